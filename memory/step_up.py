"""Step-up authentication for the member's widest forgetting (a whole topic, everything).

The member enters their password again; the moment it was checked is kept in the session
and counts as fresh for `STEP_UP_FRESH` only. The password goes through Django's
`authenticate`, so django-axes counts a wrong one like a failed sign-in (and locks the
account after as many) and the sign-in audit records it. Decisions:
docs/decisions/memory.md, "Forgetting a topic or everything".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib.auth import authenticate
from django.http import HttpRequest
from django.utils import timezone

SESSION_KEY = "iris_step_up_at"
STEP_UP_FRESH = timedelta(minutes=5)


def now() -> datetime:
    """The clock every step-up decision reads (tests fix it here)."""
    return timezone.now()


def is_fresh(request: HttpRequest, at: datetime) -> bool:
    stamp = request.session.get(SESSION_KEY)
    if not isinstance(stamp, (int, float)):
        return False
    checked = datetime.fromtimestamp(stamp, tz=UTC)
    # A stamp from the future (a clock moved back) is not trusted either.
    return checked <= at < checked + STEP_UP_FRESH


def fresh_until(request: HttpRequest) -> datetime | None:
    stamp = request.session.get(SESSION_KEY)
    if not isinstance(stamp, (int, float)):
        return None
    return datetime.fromtimestamp(stamp, tz=UTC) + STEP_UP_FRESH


def verify(request: HttpRequest, password: str, at: datetime) -> bool:
    """Check the signed-in member's password; on success the step-up is fresh from `at`."""
    user = request.user
    if not password or not user.is_authenticated:
        return False
    checked = authenticate(request, username=user.get_username(), password=password)
    if checked is None or checked.pk != user.pk:
        return False
    request.session[SESSION_KEY] = at.timestamp()
    return True
