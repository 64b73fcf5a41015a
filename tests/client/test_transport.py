"""The client's hand-written rules that need no server: Retry-After, and which exception
an error answer becomes (the live tests cover each one over the wire)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from iris_client import (
    ConsentRequired,
    Forbidden,
    MemoryConflict,
    OffTheRecord,
    ProblemError,
    RateLimited,
    ServerError,
    ValidationProblem,
)
from iris_client._transport import retry_after_seconds
from iris_client.errors import problem_from

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("Sun, 01 Mar 2026 12:00:30 GMT", 30.0),
        ("Sun, 01 Mar 2026 11:00:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(header, seconds):
    assert retry_after_seconds(header, now=lambda: NOW) == seconds


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (409, "memory-conflict", MemoryConflict),
        (409, "off-the-record", OffTheRecord),
        (403, "sensitive-category-without-consent", ConsentRequired),
        (403, "consent-revoked", ConsentRequired),
        (403, "governance-denied", Forbidden),
        (400, "validation-failed", ValidationProblem),
        (429, "rate-limited", RateLimited),
        (500, "internal-error", ServerError),
        (418, "teapot", ProblemError),
    ],
)
def test_an_error_answer_becomes_its_exception(status, code, expected):
    problem = problem_from(status, {"status": status, "code": code, "detail": "d"})

    assert type(problem) is expected
    assert (problem.status, problem.code) == (status, code)


def test_a_field_error_carries_field_rule_and_allowed_values():
    problem = problem_from(
        400,
        {
            "code": "validation-failed",
            "errors": [
                {"field": "category", "rule": "invalid_choice", "allowed": ["fact"]},
                {"field": "origin", "rule": "required"},
            ],
        },
    )

    assert (problem.field, problem.rule) == ("category", "invalid_choice")
    assert problem.errors[0].allowed == ["fact"]
    assert [e.field for e in problem.errors] == ["category", "origin"]


def test_a_body_that_is_not_json_still_raises_with_the_status():
    problem = problem_from(502, "<html>Bad gateway</html>")

    assert type(problem) is ServerError
    assert (problem.status, problem.code, problem.field) == (502, "http-502", None)
