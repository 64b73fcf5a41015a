"""The suite-wide log guard (tests/log_guard.py, installed by tests/conftest.py) catches a
planted text in any logger's line, including loggers that do not propagate, and sees
secrets only as the redacting filter leaves them."""

from __future__ import annotations

import logging

import pytest

from tests import log_guard
from tests.factories import draft


@pytest.fixture
def guard(_log_guard_handler):
    yield _log_guard_handler
    # What these tests log on purpose is not a finding of theirs.
    _log_guard_handler.lines.clear()


def test_a_memory_body_the_factories_built_is_caught_in_a_log_line(guard, member) -> None:
    body = "My sister's birthday is on the ninth of May"
    draft(member, body)
    logging.getLogger("iris.careless").warning("writing %s", body)

    assert log_guard.findings(guard) == [f"planted text {body[:24]!r}..."]


def test_a_logger_that_does_not_propagate_is_captured_too(guard) -> None:
    log_guard.plant("CanaryInARequestLogLine")
    assert logging.getLogger("django").propagate is False
    logging.getLogger("django.request").error("failed on CanaryInARequestLogLine")

    assert len(log_guard.findings(guard)) == 1


def test_a_secret_reaches_the_guard_as_the_filter_leaves_it(guard) -> None:
    secret = "sk_live_" + "Q7w" * 10
    logging.getLogger("iris.careless").warning("key is %s", secret)

    assert secret not in "\n".join(guard.lines)
    assert "[redacted:" in "\n".join(guard.lines)
    assert log_guard.findings(guard) == []


def test_short_texts_are_not_planted(guard) -> None:
    log_guard.plant("blue")
    logging.getLogger("iris.careless").warning("blue")

    assert log_guard.findings(guard) == []
