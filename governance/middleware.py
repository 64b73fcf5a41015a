"""Request guards: operator sessions are short (10 hours at most from sign-in, 30 minutes
idle), and query strings of the API carry no unusable text (`governance.text`): the JSON
parser guards bodies, this guards `?name=value`, so both refuse the same characters the
same way."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, JsonResponse

from governance import accounts
from governance.errors import PROBLEM_CONTENT_TYPE, problem_body
from governance.text import UNUSABLE_MESSAGES, safe_field_name, unusable_rule


class OperatorSessionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and getattr(user, "is_operator", False):
            remaining = accounts.operator_session_remaining(request)
            if remaining is None or remaining <= 0:
                # Fail closed: a session without a sign-in stamp predates this rule.
                logout(request)
                messages.info(request, "Your session has ended. Please sign in again.")
            else:
                # Every request renews the idle timer, never past the absolute end.
                idle = settings.IRIS_OPERATOR_SESSION_IDLE_SECONDS
                request.session.set_expiry(int(min(idle, remaining)))
        return self.get_response(request)


class UsableQueryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") and request.GET:
            for name, values in request.GET.lists():
                for text in (name, *values):
                    rule = unusable_rule(text)
                    if rule is not None:
                        return _refusal(safe_field_name(name) or "query", rule)
        return self.get_response(request)


def _refusal(field: str, rule: str) -> JsonResponse:
    message = UNUSABLE_MESSAGES[rule]
    body = problem_body(
        400,
        "validation-failed",
        "The request is not valid",
        f"Invalid field(s): {field}.",
        errors=[{"field": field, "rule": rule, "message": message}],
    )
    return JsonResponse(body, status=400, content_type=PROBLEM_CONTENT_TYPE)
