"""The seeded world of the security suite (tests/security/world.py)."""

from __future__ import annotations

import pytest

from governance.models import User
from governance.principal import principal_of
from inspection import services as inspection_services
from tests.security.expectations import (
    FOREIGN_MEMBER,
    FOREIGN_OPERATOR,
    MEMBER_A,
    MEMBER_B,
    OPERATOR_ROLES,
)
from tests.security.world import World, seed_world


@pytest.fixture
def world(tenant, other_tenant, member, other_member, foreign_member) -> World:
    return seed_world(
        tenant,
        other_tenant,
        {"member_a": member, "member_b": other_member, "foreign": foreign_member},
    )


@pytest.fixture
def people(world: World, make_operator, other_tenant) -> dict[str, User]:
    """The signed-in callers of the route matrix, by their name in the table."""
    users = {
        MEMBER_A: world.a.member,
        MEMBER_B: world.b.member,
        FOREIGN_MEMBER: world.foreign.member,
        FOREIGN_OPERATOR: make_operator("legal", of_tenant=other_tenant),
    }
    for role in OPERATOR_ROLES:
        users[role] = world.operators[role] = make_operator(role)
    return users


@pytest.fixture
def url_values(world: World, people: dict[str, User]) -> dict[str, str]:
    """Path parameters naming member A's objects, in the tenant of the operators under
    test, and an inspection of A requested by support."""
    inspection = inspection_services.inspection_request(
        principal=principal_of(people["support"]),
        member=world.a.member,
        path="routine-review",
        justification="Member wrote to support about a wrong reminder.",
    )
    return {
        "entry_id": world.a.entry_id,
        "conflict_id": world.a.conflict_id,
        "request_id": world.a.request_id,
        "approval_id": world.a.approval_id,
        "member_id": world.a.user_id,
        "inspection_id": str(inspection.id),
        "run_id": "run-1",
        # Admin routes take a primary key and a content type; any will do, since only a
        # superuser reaches them.
        "object_id": "1",
        "content_type_id": "1",
        "app_label": "governance",
    }
