"""The whole suite's log guard: every log record of every test, as the configured handlers
would write it (through the same redacting filter), is searched for planted canaries
(every memory body the factories build, the security suite's canary texts) and for
anything the secret screen recognises. tests/conftest.py installs it for every test.

Kept cheap: one handler that formats into a list, and one search at the end of a test
only when something was logged."""

from __future__ import annotations

import logging
import logging.config

from django.conf import settings

from governance.secrets_screen import find_secrets

# Shorter texts ("x", "blue") would match unrelated words.
MIN_CANARY_LENGTH = 12

_planted: set[str] = set()


def plant(text: object) -> None:
    """A text that must never reach a log line during the current test."""
    if isinstance(text, str) and len(text) >= MIN_CANARY_LENGTH:
        _planted.add(text)


class CapturingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        # The filter every configured handler carries (settings.LOGGING), built the way
        # dictConfig builds it.
        redact = settings.LOGGING["filters"]["redact"]["()"]
        self.addFilter(logging.config.BaseConfigurator({}).resolve(redact)())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # a record that cannot be formatted is kept as such
            self.lines.append(f"{record.levelname} {record.name} <unformattable record>")


def install() -> CapturingHandler:
    handler = CapturingHandler()
    attach(handler)
    return handler


def attach(handler: CapturingHandler) -> None:
    """On the root logger and on every logger that does not propagate; again before each
    test, since a test that reconfigures logging (dictConfig) drops foreign handlers."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.propagate
    ]
    for logger in loggers:
        if handler not in logger.handlers:
            logger.addHandler(handler)


def start(handler: CapturingHandler) -> None:
    attach(handler)
    handler.lines.clear()
    _planted.clear()


def findings(handler: CapturingHandler) -> list[str]:
    """What the test's log lines gave away: planted texts, and secrets by kind."""
    if not handler.lines:
        return []
    text = "\n".join(handler.lines)
    found = [f"planted text {t[:24]!r}..." for t in sorted(_planted) if t in text]
    found += [f"a {f.kind} secret" for f in find_secrets(text)]
    return found
