"""Reads that resolve who a request may act for. Tenant first, always."""

from __future__ import annotations

import uuid

from governance import plainsql
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
        # A member principal comes from a user, and every user has a tenant.
        assert principal.tenant_id is not None
        return User.objects.get(tenant_id=principal.tenant_id, public_id=principal.id)
    if principal.kind in {"surface", "system"} and user_id is not None:
        try:
            key = uuid.UUID(str(user_id))
        except ValueError:
            raise NotFound("No such member.") from None
        member = _active_member(principal.tenant_id, key)
        if member is not None:
            return member
    raise NotFound("No such member.")


def _active_member(tenant_id: uuid.UUID | None, public_id: uuid.UUID) -> User | None:
    # On every surface call, so plain SQL (see governance.plainsql).
    rows = plainsql.select(
        User,
        "tenant_id = %s AND public_id = %s AND kind = %s AND is_active",
        [
            plainsql.prep(User, "tenant", tenant_id),
            plainsql.prep(User, "public_id", public_id),
            User.Kind.MEMBER.value,
        ],
    )
    return rows[0] if rows else None
