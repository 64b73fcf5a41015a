"""Fixtures of the API tests: a member with a memory and an open conflict, and a surface
client that answers a server error with its 500 (as gunicorn would)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.services import memory_write
from tests.api.helpers import World
from tests.factories import as_member, draft, grant_storage


@pytest.fixture
def world(member) -> World:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "My home city is Berlin")
    ).entry
    conflict = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "My home city is Paris")
    ).conflict
    return World(member, str(entry.entry_id), str(conflict.id))


@pytest.fixture
def raw_surface(surface_token) -> APIClient:
    """A surface client that answers a server error with its 500 (as gunicorn would)
    instead of raising it into the test."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {surface_token}")
    return client
