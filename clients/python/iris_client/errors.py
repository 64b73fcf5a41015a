"""Iris's problem+json answers (RFC 9457) as typed exceptions.

Every refusal carries `status`, the stable `code`, and for a bad field its `field` and
`rule` (the first of `errors`; all of them are in `errors`). The class is picked by the
code first (`memory-conflict`, `off-the-record`, the consent codes), then by the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    field: str | None
    rule: str | None
    message: str | None = None
    allowed: list[str] | None = None


class IrisError(Exception):
    """Anything this client raises."""


class TransportError(IrisError):
    """Iris could not be reached (after the retries)."""


class ProblemError(IrisError):
    """An error answer from Iris."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        title: str = "",
        detail: str = "",
        errors: list[FieldError] | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail or title}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.errors = list(errors or [])
        self.body: dict[str, Any] = dict(body or {})
        self.retry_after = retry_after

    @property
    def field(self) -> str | None:
        return self.errors[0].field if self.errors else None

    @property
    def rule(self) -> str | None:
        return self.errors[0].rule if self.errors else None


class ValidationProblem(ProblemError):
    """400: a field broke a rule (`field`, `rule`; every one in `errors`)."""


class NotAuthenticated(ProblemError):
    """401: no token, or an unknown or revoked one."""


class Forbidden(ProblemError):
    """403: refused by policy."""


class ConsentRequired(Forbidden):
    """403: the member has not consented to this (record consent first)."""


class NotFound(ProblemError):
    """404: no such resource for this tenant and member."""


class Conflict(ProblemError):
    """409."""


class MemoryConflict(Conflict):
    """409 `memory-conflict`: the memory contradicts what the member said; ask them
    `question` and answer with `memories_conflict_answer(conflict_id, ...)`."""

    @property
    def question(self) -> str:
        return str(self.body.get("question") or "")

    @property
    def conflict_id(self) -> str:
        return str(self.body.get("conflictId") or "")

    @property
    def entry_id(self) -> str:
        return str(self.body.get("entryId") or "")


class OffTheRecord(Conflict):
    """409 `off-the-record`: the session is off the record, so nothing was written."""


class PayloadTooLarge(ProblemError):
    """413."""


class Unprocessable(ProblemError):
    """422 (e.g. `idempotency-key-reused`: one key, two different requests)."""


class RateLimited(ProblemError):
    """429, still refused after the retries; `retry_after` is the server's wait."""


class ServiceUnavailable(ProblemError):
    """503, still refused after the retries."""


class ServerError(ProblemError):
    """Any other 5xx."""


CONSENT_CODES = frozenset(
    {"sensitive-category-without-consent", "consent-not-granted", "consent-revoked"}
)
_BY_CODE: dict[str, type[ProblemError]] = {
    "memory-conflict": MemoryConflict,
    "off-the-record": OffTheRecord,
    **dict.fromkeys(CONSENT_CODES, ConsentRequired),
}
_BY_STATUS: dict[int, type[ProblemError]] = {
    400: ValidationProblem,
    401: NotAuthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: Unprocessable,
    429: RateLimited,
    503: ServiceUnavailable,
}


def problem_from(status: int, body: Any, *, retry_after: float | None = None) -> ProblemError:
    """The exception for an error answer (`body` is its parsed JSON, or anything else)."""
    problem: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = str(problem.get("code") or f"http-{status}")
    errors = [
        FieldError(
            field=e.get("field"),
            rule=e.get("rule"),
            message=e.get("message"),
            allowed=e.get("allowed"),
        )
        for e in problem.get("errors") or []
        if isinstance(e, Mapping)
    ]
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ProblemError
    return cls(
        status=status,
        code=code,
        title=str(problem.get("title") or ""),
        detail=str(problem.get("detail") or ""),
        errors=errors,
        body=problem,
        retry_after=retry_after,
    )
