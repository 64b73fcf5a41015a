"""Conflicts respect the surface's adapter scopes: a surface never meets, is never quoted
and never answers about a memory it could not recall (issue 19, finding 12)."""

from __future__ import annotations

import pytest

from memory.models import MemoryEntry
from memory.services import memory_write
from tests.factories import as_member, as_system, draft, grant_storage, payload

pytestmark = pytest.mark.django_db
PRIOR = "My home city is Berlin"


@pytest.fixture
def review_note(member):
    """A profile memory in `admin_review`, which only operators consume: no surface reads it."""
    grant_storage(member)
    outcome = memory_write(
        principal=as_system(member),
        member=member,
        draft=draft(member, PRIOR, adapter_scope="admin_review"),
    )
    assert outcome.written, outcome
    return outcome.entry


def test_a_surface_write_never_quotes_a_prior_body_it_cannot_read(
    surface_api, member, review_note
) -> None:
    readable = surface_api.get(
        f"/api/v1/memories/{review_note.entry_id}", {"userId": str(member.public_id)}
    )
    assert readable.status_code == 404  # the surface cannot recall it
    response = surface_api.post(
        "/api/v1/memories", payload(member, body="My home city is Paris"), format="json"
    )
    assert response.status_code == 201, response.content
    assert "Berlin" not in response.content.decode()
    assert MemoryEntry.objects.get(entry_id=review_note.entry_id, is_current=True).body == PRIOR


def test_a_surface_cannot_answer_a_question_about_a_memory_it_cannot_read(
    surface_api, member, review_note
) -> None:
    asked = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "My home city is Paris")
    )
    assert asked.conflict is not None and asked.entry.entry_id == review_note.entry_id
    response = surface_api.post(
        f"/api/v1/memories/conflicts/{asked.conflict.id}/answer",
        {"userId": str(member.public_id), "answer": "update"},
        format="json",
    )
    assert response.status_code == 404, response.content
    assert "Berlin" not in response.content.decode() and "Paris" not in response.content.decode()
    assert MemoryEntry.objects.get(entry_id=review_note.entry_id, is_current=True).body == PRIOR


def test_a_surface_still_meets_a_conflict_it_can_read(surface_api, member) -> None:
    grant_storage(member)
    first = surface_api.post("/api/v1/memories", payload(member, body=PRIOR), format="json")
    assert first.status_code == 201, first.content
    again = surface_api.post(
        "/api/v1/memories", payload(member, body="My home city is Paris"), format="json"
    )
    assert again.status_code == 409, again.content
