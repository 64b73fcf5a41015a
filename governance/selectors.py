"""Reads that resolve who a request may act for. Tenant first, always."""

from __future__ import annotations

import uuid

from governance import plainsql
from governance.errors import NotFound
from governance.models import SurfaceClient, User
from governance.principal import Principal

TOKEN_PREFIX_LENGTH = 12  # what `surface_client_create` stores of a token


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


def surface_clients_for_operations(*, tenant_slug: str | None = None) -> list[SurfaceClient]:
    """Every surface client (of one tenant, if named), for the command line: a deployment's
    administrator, not a request, is asking. Ordered by tenant, surface, creation."""
    clients = SurfaceClient.objects.select_related("tenant").order_by(
        "tenant__slug", "surface", "created_at", "id"
    )
    if tenant_slug is not None:
        clients = clients.filter(tenant__slug=tenant_slug)
    return list(clients)


def surface_clients_matching(ident: str) -> list[SurfaceClient]:
    """The clients a command-line argument names: a client id, or the start of a token
    (at least its prefix's length; a longer string is cut to the stored prefix)."""
    ident = ident.strip()
    try:
        client_id = uuid.UUID(ident)
    except ValueError:
        client_id = None
    if client_id is not None:
        return list(SurfaceClient.objects.select_related("tenant").filter(id=client_id))
    if len(ident) < TOKEN_PREFIX_LENGTH:
        return []
    prefix = ident[:TOKEN_PREFIX_LENGTH]
    return list(SurfaceClient.objects.select_related("tenant").filter(token_prefix=prefix))
