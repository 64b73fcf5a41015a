"""Who an API request acts for: the one answer every app's views use.

A surface names the member it acts for (`userId`, required); a member acts for themself
(a `userId`, if sent, must be theirs); an operator or a job never acts for a member
through the member API. Anything the caller may not see is a 404 that does not say
whether the member exists (`governance.selectors.member_for`).
"""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.request import Request

from governance.errors import NotFound, ValidationFailed
from governance.models import User
from governance.principal import Principal, principal_of
from governance.selectors import member_for

MEMBER_API_CALLERS = frozenset({"surface", "member"})


def user_id_in(data: Any) -> Any:
    """The `userId` a request body or query carries, or None."""
    return data.get("userId") if hasattr(data, "get") else None


def acting_for(request: Request, user_id: Any) -> tuple[Principal, User]:
    """The principal and the member it acts for. Stored idempotent answers are tied to
    the member, so they are dropped when the member's memory is forgotten."""
    principal = principal_of(request.user)
    if user_id is not None and not isinstance(user_id, str | uuid.UUID):
        raise ValidationFailed("userId must be a UUID string.", field="userId", rule="wrong-type")
    if principal.kind == "surface" and not user_id:
        raise ValidationFailed(
            "A surface names the member it acts for.", field="userId", rule="required"
        )
    if principal.kind not in MEMBER_API_CALLERS:
        raise NotFound("No such member.")
    member = member_for(principal, user_id)
    request.idempotency_subject = member.public_id  # type: ignore[attr-defined]
    return principal, member
