"""The seeded world of the security suite (tests/security/world.py)."""

from __future__ import annotations

import pytest

from tests.security.world import World, seed_world


@pytest.fixture
def world(tenant, other_tenant, member, other_member, foreign_member) -> World:
    return seed_world(
        tenant,
        other_tenant,
        {"member_a": member, "member_b": other_member, "foreign": foreign_member},
    )
