"""One error shape: RFC 9457 problem+json with a stable `code`, never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

from governance.rules import RuleError

log = logging.getLogger(__name__)

PROBLEM_TYPE = "https://iris.invalid/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"


class IrisError(Exception):
    """A domain refusal with a stable code and HTTP status. Messages never hold content."""

    status = 400
    code = "bad-request"
    title = "Bad request"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        status: int | None = None,
        field: str | None = None,
        rule: str | None = None,
        allowed: Iterable[str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        if status:
            self.status = status
        self.field = field
        self.rule = rule
        self.allowed = list(allowed) if allowed is not None else None
        self.extra = dict(extra or {})

    def problem(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": PROBLEM_TYPE + self.code,
            "title": self.title,
            "status": self.status,
            "code": self.code,
            "detail": self.detail,
        }
        if self.field:
            error: dict[str, Any] = {"field": self.field, "rule": self.rule or self.code}
            error["message"] = self.detail
            if self.allowed is not None:
                error["allowed"] = self.allowed
            body["errors"] = [error]
        body.update(self.extra)
        return body


class ValidationFailed(IrisError):
    status = 400
    code = "validation-failed"
    title = "The request is not valid"


class NotAuthenticated(IrisError):
    status = 401
    code = "not-authenticated"
    title = "Authentication required"


class Forbidden(IrisError):
    status = 403
    code = "forbidden"
    title = "Not allowed"


class NotFound(IrisError):
    status = 404
    code = "not-found"
    title = "Not found"

    def __init__(self, detail: str = "No such resource.", **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)


def invalid(
    exc: RuleError, *, field: str | None = None, rule: str | None = None, detail: str | None = None
) -> ValidationFailed:
    """The 400 a broken pure rule answers with: its field, rule and allowed values, unless
    the caller knows the field better (a prefix such as `scope.`) or words it for people."""
    return ValidationFailed(
        detail or exc.message,
        field=field or exc.field,
        rule=rule or exc.rule,
        allowed=exc.allowed or None,
    )


class Conflict(IrisError):
    status = 409
    code = "conflict"
    title = "Conflict"


class Unprocessable(IrisError):
    status = 422
    code = "unprocessable"
    title = "Unprocessable request"


class ServiceUnavailable(IrisError):
    status = 503
    code = "service-unavailable"
    title = "Service unavailable"


def problem_body(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    body = {
        "type": PROBLEM_TYPE + code,
        "title": title,
        "status": status,
        "code": code,
        "detail": detail,
    }
    body.update(extra)
    return body


def problem_response(body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        dict(body), status=body["status"], content_type=PROBLEM_CONTENT_TYPE, headers=headers
    )


def _flatten_validation(detail: Any, prefix: str = "") -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if isinstance(key, int):  # ListField reports child errors by index
                path = f"{prefix}[{key}]"
            else:
                name = key if key != "non_field_errors" else ""
                path = f"{prefix}.{name}" if prefix and name else (name or prefix)
            errors.extend(_flatten_validation(value, path))
    elif isinstance(detail, list):
        if detail and all(isinstance(d, drf.ErrorDetail) for d in detail):
            for d in detail:
                errors.append({"field": prefix or None, "rule": d.code, "message": str(d)})
        else:
            for index, value in enumerate(detail):
                errors.extend(_flatten_validation(value, f"{prefix}[{index}]"))
    elif isinstance(detail, drf.ErrorDetail | str):
        code = getattr(detail, "code", "invalid")
        errors.append({"field": prefix or None, "rule": code, "message": str(detail)})
    return errors


_DRF_CODES: dict[type[drf.APIException], tuple[str, str]] = {
    drf.NotAuthenticated: ("not-authenticated", "Authentication required"),
    drf.AuthenticationFailed: ("not-authenticated", "Authentication failed"),
    drf.PermissionDenied: ("forbidden", "Not allowed"),
    drf.NotFound: ("not-found", "Not found"),
    drf.MethodNotAllowed: ("method-not-allowed", "Method not allowed"),
    drf.NotAcceptable: ("not-acceptable", "Not acceptable"),
    drf.UnsupportedMediaType: ("unsupported-media-type", "Unsupported media type"),
    drf.Throttled: ("rate-limited", "Too many requests"),
    drf.ParseError: ("malformed-request", "The request body could not be parsed"),
}


def problem_exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    if isinstance(exc, IrisError):
        return problem_response(exc.problem())
    if isinstance(exc, Http404):
        return problem_response(problem_body(404, "not-found", "Not found", "No such resource."))
    if isinstance(exc, DjangoPermissionDenied):
        return problem_response(problem_body(403, "forbidden", "Not allowed", "Not allowed."))
    if isinstance(exc, RequestDataTooBig):
        return problem_response(
            problem_body(413, "payload-too-large", "Payload too large", "The body is too large.")
        )
    if isinstance(exc, OperationalError | InterfaceError):
        # The database went away mid-request (a restart, a failover, a dropped connection):
        # the open transaction is rolled back, so the client may try again. Logged by type
        # only: a database error can quote a row.
        log.warning("database unavailable during a request: %s", type(exc).__name__)
        return problem_response(
            problem_body(
                503,
                ServiceUnavailable.code,
                ServiceUnavailable.title,
                "The database is not reachable. Try again shortly.",
            ),
            {"Retry-After": "5"},
        )
    if isinstance(exc, drf.ValidationError):
        errors = _flatten_validation(exc.detail)
        fields = ", ".join(sorted({e["field"] for e in errors if e["field"]})) or "body"
        return problem_response(
            problem_body(
                400,
                "validation-failed",
                "The request is not valid",
                f"Invalid field(s): {fields}.",
                errors=errors,
            )
        )
    if isinstance(exc, drf.APIException):
        code, title = _DRF_CODES.get(type(exc), ("error", "Error"))
        headers = {}
        # Throttled sets `wait` in __init__; drf-stubs do not declare the attribute.
        wait: float | None = getattr(exc, "wait", None)
        if isinstance(exc, drf.Throttled) and wait is not None:
            headers["Retry-After"] = str(int(wait) + 1)
        if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
            headers["WWW-Authenticate"] = 'Bearer realm="iris"'
        detail = exc.detail if isinstance(exc.detail, str) else title
        return problem_response(problem_body(exc.status_code, code, title, str(detail)), headers)
    return None  # unexpected: Django's handler500 answers, logging the trace server-side only


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(
        problem_body(404, "not-found", "Not found", "No such resource."),
        status=404,
        content_type=PROBLEM_CONTENT_TYPE,
    )


def api_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        problem_body(500, "internal-error", "Internal error", "Something went wrong on our side."),
        status=500,
        content_type=PROBLEM_CONTENT_TYPE,
    )
