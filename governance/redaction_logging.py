"""A logging filter that keeps credentials and personal identifiers out of log lines
(DESIGN invariant 4: "Audit carries no content ... Logs likewise").

Put it on every handler (a filter on a logger does not see records propagated from its
children). It rewrites the record in place: the message is formatted once, scrubbed, and
stored without args; a traceback is formatted, scrubbed and stored as `exc_text`, and the
exception object itself is dropped from the record, so no handler further down can format
it again from the raw exception (whose message may hold the secret). Identifiers are
masked without a key (`[pii:email]`), never tokenised: a log line is nobody's view.

Imports no Django: `dictConfig` builds it while settings load.
"""

from __future__ import annotations

import logging
from typing import Any

from governance.pii import mask_pii
from governance.secrets_screen import redact_secrets

WITHHELD = "[log message withheld: redaction failed]"

# What a LogRecord carries by itself; anything else was passed in `extra=`.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
}
_formatter = logging.Formatter()


def scrub_log_text(text: str) -> str:
    return mask_pii(redact_secrets(text))


class RedactingFilter(logging.Filter):
    """Scrub every record's message, args, traceback, stack and string extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._scrub(record)
        except Exception:  # a log line is never worth leaking a secret for
            record.msg = WITHHELD
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True

    def _scrub(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # bad %-args: keep the template, drop the args
            message = str(record.msg)
        record.msg = scrub_log_text(message)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = _formatter.formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = scrub_log_text(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_log_text(record.stack_info)
        extras: dict[str, Any] = vars(record)
        for name, value in list(extras.items()):
            if name not in _STANDARD_ATTRIBUTES and isinstance(value, str):
                extras[name] = scrub_log_text(value)


# What settings.LOGGING needs (see docs/decisions/governance-classification.md).
LOGGING_FILTERS = {"redact": {"()": "governance.redaction_logging.RedactingFilter"}}
