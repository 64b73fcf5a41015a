"""Operator sessions are short: 10 hours at most from sign-in, and 30 minutes idle."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

from governance import accounts


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
