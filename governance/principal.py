"""Who is acting: a member, an operator, a surface client, or Iris itself."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from governance.audit import Actor
from governance.models import SurfaceClient


@dataclass(frozen=True, slots=True)
class Principal:
    kind: str  # member | operator | surface | system
    id: uuid.UUID | str
    tenant_id: uuid.UUID | None
    roles: frozenset[str] = field(default_factory=frozenset)
    surface: str | None = None
    # A surface client's registered tier (where its model runs); None for everyone else.
    destination_tier: str | None = None

    @property
    def actor(self) -> Actor:
        return Actor(self.kind, str(self.id))

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"

    @classmethod
    def system(cls, name: str = "iris", tenant_id: uuid.UUID | None = None) -> Principal:
        return cls("system", name, tenant_id)


class SurfaceUser:
    """What `request.user` is for a surface client: authenticated, never a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, client: SurfaceClient) -> None:
        self.client = client
        self.pk = client.id
        self.principal = Principal(
            kind="surface",
            id=client.id,
            tenant_id=client.tenant_id,
            surface=client.surface,
            destination_tier=client.destination_tier,
        )

    def has_perm(self, perm: str, obj: object = None) -> bool:
        return False


def principal_of(user) -> Principal:
    """The principal behind a request's user (a SurfaceUser or a Django user)."""
    if isinstance(user, SurfaceUser):
        return user.principal
    kind = "operator" if user.is_operator else "member"
    roles = frozenset(g.name for g in user.groups.all()) if kind == "operator" else frozenset()
    return Principal(kind=kind, id=user.public_id, tenant_id=user.tenant_id, roles=roles)
