"""Django and axes announce sign-ins only through signals; these receivers hand each one to
`governance.accounts`, which records it. Connected after axes' own receivers (apps.py), so
a failure already carries axes' verdict (`axes_locked_out`, `axes_failures_since_start`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from governance import accounts


def on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    accounts.login_succeeded_record(request=request, user=user)
    accounts.operator_session_start(request, user)


def on_login_failed(sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
    username = credentials.get("username")
    reason = kwargs.get("iris_reason", "bad-credentials")
    locked = bool(getattr(request, "axes_locked_out", False))
    failures = getattr(request, "axes_failures_since_start", None)
    began = locked and failures == settings.AXES_FAILURE_LIMIT
    if locked and not began:
        reason = "locked-out"  # refused before its password or code was looked at
    accounts.login_failed_record(
        request=request,
        username=username if isinstance(username, str) else None,
        reason=reason,
        lockout_began=began,
    )
