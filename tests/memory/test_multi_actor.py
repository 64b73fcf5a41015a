"""People a member mentions: opaque handles per member, and "forget all mentions of"."""

from __future__ import annotations

import pytest

from governance.approvals import approval_decide
from governance.errors import ValidationFailed
from governance.keys import multifernet
from governance.models import SurfaceClient
from governance.pipeline import HeldForApproval
from governance.principal import Principal
from memory.models import ActorHandle, ActorNamespace, MemoryEntry
from memory.services import ActorMention, actor_handle_for, actors_forget, memory_write
from tests.factories import (
    as_member,
    as_surface,
    as_system,
    draft,
    grant_storage,
    memory_audits,
    mention,
    scope_of,
)
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db


def mention_write(member, body, name, **kw):
    note = kw.pop("note", "my sister")
    return memory_write(
        principal=as_surface(member),
        member=member,
        draft=draft(member, body, category="relationship", multi_actor=mention(name, note), **kw),
    )


def test_a_mention_becomes_an_opaque_handle_and_the_name_is_not_stored(ready) -> None:
    entry = mention_write(ready, "She taught me to swim", "Quillon Vexhart").entry
    assert entry.actor_handle.startswith("actor_") and len(entry.actor_handle) == 38
    assert entry.relationship_note == "my sister"
    assert find_in_database("Quillon") == [] and find_in_database("quillon") == []
    assert ActorHandle.objects.filter(member=ready, handle=entry.actor_handle).exists()


def test_the_namespace_key_is_random_and_encrypted(ready) -> None:
    mention_write(ready, "She taught me to swim", "Anna")
    row = ActorNamespace.objects.get(member=ready)
    key = multifernet().decrypt(row.encrypted_key.encode())
    assert len(key) == 32 and key not in row.encrypted_key.encode()


def test_spellings_of_one_name_share_a_handle(ready) -> None:
    a = actor_handle_for(principal=as_member(ready), member=ready, name="Dr. Anna-Maria O'Neil")
    b = actor_handle_for(principal=as_member(ready), member=ready, name="dr anna maria oneil")
    assert a == b


def test_two_members_get_different_handles_for_the_same_name(ready, other_member) -> None:
    grant_storage(other_member)
    mine = mention_write(ready, "He is my coach", "Jordan Lee").entry
    theirs = mention_write(other_member, "He is my coach", "Jordan Lee").entry
    assert mine.actor_handle != theirs.actor_handle


def test_a_handle_outside_the_namespace_is_refused(ready, other_member) -> None:
    grant_storage(other_member)
    foreign = mention_write(other_member, "He is my coach", "Jordan Lee").entry.actor_handle
    with pytest.raises(ValidationFailed) as bad:
        memory_write(
            principal=as_surface(ready),
            member=ready,
            draft=draft(
                ready,
                "He is my coach",
                category="relationship",
                multi_actor=ActorMention(relationship_note="coach", actor_handle=foreign),
            ),
        )
    assert (bad.value.field, bad.value.rule) == ("multiActor.actorHandle", "unknown-handle")
    assert MemoryEntry.objects.filter(member=ready).count() == 0


def test_a_relationship_note_over_500_characters_is_refused(ready) -> None:
    with pytest.raises(ValidationFailed) as bad:
        mention_write(ready, "She taught me to swim", "Anna", note="x" * 501)
    assert bad.value.field == "multiActor.relationshipNote"
    assert MemoryEntry.objects.count() == 0


def test_forget_all_mentions_tombstones_every_tagged_entry_and_drops_the_handle(ready) -> None:
    tagged = [
        mention_write(ready, "She taught me to swim", "Anna").entry,
        mention_write(ready, "Her birthday is in May", "Anna", note="sister").entry,
        mention_write(
            ready,
            "We met for lunch",
            "Anna",
            kind="session",
            identifiers=scope_of(ready, "session", sessionId="s1"),
        ).entry,
    ]
    untouched = mention_write(ready, "He is my coach", "Jordan").entry
    plain = memory_write(principal=as_member(ready), member=ready, draft=draft(ready)).entry
    handle = tagged[0].actor_handle

    result = actors_forget(principal=as_system(ready), member=ready, actor_name="anna")
    assert result.actor_handle == handle and result.handle_removed
    assert set(result.entry_ids) == {e.entry_id for e in tagged}
    for entry in tagged:
        assert MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True).lifecycle == (
            "tombstoned"
        )
    assert not ActorHandle.objects.filter(member=ready, handle=handle).exists()
    for entry in (untouched, plain):
        assert MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True).lifecycle == (
            "active"
        )
    event = memory_audits("iris.memory.actor.forgotten")[0]
    assert event.payload == {"actorHandle": handle, "entryCount": 3, "handleRemoved": True}
    # Forgetting again forgets nothing more.
    again = actors_forget(principal=as_system(ready), member=ready, actor_handle=handle)
    assert again.entry_ids == () and not again.handle_removed


def test_forget_all_mentions_waits_for_the_owner_then_resumes(ready, surface_token) -> None:
    client = SurfaceClient.objects.get()
    surface = Principal("surface", client.id, client.tenant_id, surface=client.surface)
    entry = mention_write(ready, "She taught me to swim", "Anna").entry
    with pytest.raises(HeldForApproval) as held:
        actors_forget(principal=surface, member=ready, actor_name="Anna")
    assert MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True).lifecycle == "active"
    assert "forget every memory that mentions one person" in held.value.extra["card"]
    outcome = approval_decide(
        principal=as_member(ready), approval_id=held.value.extra["approvalId"], decision="approve"
    )
    assert outcome.resume_code == "completed"
    assert MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True).lifecycle == (
        "tombstoned"
    )
    assert not ActorHandle.objects.filter(member=ready).exists()


def test_forgetting_someone_never_mentioned_forgets_nothing(ready) -> None:
    result = actors_forget(principal=as_system(ready), member=ready, actor_name="Nobody Here")
    assert result.entry_ids == () and not result.handle_removed
