"""Page context every template gets from memory: whether the member is off the record.

The banner in `base.html` reads it, so the state shows on every page, and survives a new
browser or device: it is the member's stored toggle, not anything in the session.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from governance.models import User
from memory import selectors


def off_the_record(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if not isinstance(user, User) or user.kind != User.Kind.MEMBER:
        return {}
    return {"off_the_record_banner": selectors.off_the_record_everywhere(member=user)}
