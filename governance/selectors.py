"""Reads that resolve who a request may act for. Tenant first, always."""

from __future__ import annotations

import uuid

from governance.errors import NotFound
from governance.models import User
from governance.principal import Principal


def member_for(principal: Principal, user_id: uuid.UUID | str | None) -> User:
    """The member a request acts for.

    A surface acts for any member of its own tenant; a member acts only for themself.
    Anything else is a 404 that does not reveal whether the member exists elsewhere.
    """
    if principal.kind == "member":
        if user_id is not None and str(user_id) != str(principal.id):
            raise NotFound("No such member.")
        return User.objects.get(tenant_id=principal.tenant_id, public_id=principal.id)
    if principal.kind in {"surface", "system"} and user_id is not None:
        try:
            key = uuid.UUID(str(user_id))
        except ValueError:
            raise NotFound("No such member.") from None
        member = User.objects.filter(
            tenant_id=principal.tenant_id, public_id=key, kind=User.Kind.MEMBER, is_active=True
        ).first()
        if member is not None:
            return member
    raise NotFound("No such member.")
