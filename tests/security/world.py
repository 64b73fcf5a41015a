"""Two tenants, two members in the first, one in the second, each with memories, an open
conflict and a data-rights request whose texts carry a canary: a string that may reach
no one but its owner. The fuzz and the route matrix both read what must never leak
from here."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from rest_framework.test import APIClient

from dsar import services as dsar_services
from governance.models import Tenant, User
from governance.services import surface_client_create
from memory.services import memory_write
from tests.conftest import SYSTEM
from tests.factories import as_member, draft, grant_storage
from tests.log_guard import plant


@dataclass
class Owner:
    """One member and the identifiers and texts that belong to them alone."""

    member: User
    canary: str
    entry_id: str
    conflict_id: str
    request_id: str
    approval_id: str

    @property
    def user_id(self) -> str:
        return str(self.member.public_id)

    def secrets(self) -> list[str]:
        """Every string of this member's that another caller must never see."""
        return [
            self.canary,
            self.user_id,
            self.entry_id,
            self.conflict_id,
            self.request_id,
            self.approval_id,
        ]


@dataclass
class World:
    tenant: Tenant
    other_tenant: Tenant
    a: Owner
    b: Owner
    foreign: Owner
    operators: dict[str, User] = field(default_factory=dict)

    def owners(self) -> list[Owner]:
        return [self.a, self.b, self.foreign]


def canary(label: str) -> str:
    # Letters only, so no screen takes it for a secret or an identifier.
    return f"Canary{label}" + "".join(secrets.choice("qwrtypsdfghjklzxcvbnm") for _ in range(12))


def seed_owner(member: User, label: str) -> Owner:
    """A member with a memory holding their canary, an open conflict and an export request."""
    grant_storage(member)
    text = canary(label)
    plant(text)
    entry = memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, f"My home city is {text}"),
    ).entry
    conflict = memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, f"My home city is Paris, not {text}"),
    ).conflict
    request = dsar_services.data_rights_open(
        principal=as_member(member), member=member, kind="export", payload={}
    )
    assert entry is not None and conflict is not None
    # A destructive call from the member's surface waits for the member: an approval.
    token = surface_client_create(actor=SYSTEM, tenant=member.tenant, surface="assistant").token
    surface = APIClient()
    surface.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    held = surface.post(
        "/api/v1/actors/forget",
        {"userId": str(member.public_id), "actorName": "Anna"},
        format="json",
    )
    assert held.status_code == 202, held.content
    return Owner(
        member=member,
        canary=text,
        entry_id=str(entry.entry_id),
        conflict_id=str(conflict.id),
        request_id=str(request.id),
        approval_id=held.json()["approvalId"],
    )


def seed_world(tenant: Tenant, other_tenant: Tenant, users: dict[str, Any]) -> World:
    return World(
        tenant=tenant,
        other_tenant=other_tenant,
        a=seed_owner(users["member_a"], "Ada"),
        b=seed_owner(users["member_b"], "Grace"),
        foreign=seed_owner(users["foreign"], "Linus"),
    )


def leaked(text: str, owners: list[Owner]) -> list[str]:
    """The secrets of `owners` that appear in `text` (case-insensitive)."""
    lowered = text.lower()
    return [s for owner in owners for s in owner.secrets() if s.lower() in lowered]


__all__ = ["SYSTEM", "Owner", "World", "canary", "leaked", "seed_owner", "seed_world"]
