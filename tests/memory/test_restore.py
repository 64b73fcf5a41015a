"""memory_restore: a forgotten memory comes back inside the soft-delete grace window, as a
new revision after its tombstone, governed like every write."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.actions import AuditAction
from governance.errors import Conflict
from governance.models import AuditEvent
from memory.enums import Lifecycle
from memory.models import ForgottenValue, MemoryEntry
from memory.rules.retention import SOFT_DELETE_GRACE
from memory.services import memory_forget, memory_pause, memory_restore
from tests.factories import NOW, as_member, current, summary_of, written

pytestmark = pytest.mark.django_db


def test_a_forgotten_memory_is_restored_as_it_was(ready):
    entry = written(ready, "My favourite colour is blue", now=NOW)
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    assert ForgottenValue.objects.filter(entry_id=entry.entry_id).exists()
    restored = memory_restore(
        principal=as_member(ready),
        member=ready,
        entry_id=entry.entry_id,
        now=NOW + timedelta(days=1),
    )
    assert (restored.lifecycle, restored.revision, restored.body) == (
        Lifecycle.ACTIVE,
        3,
        "My favourite colour is blue",
    )
    assert current(entry.entry_id).revision_id == restored.revision_id
    # The history keeps the tombstone; the value is no longer treated as forgotten.
    lifecycles = list(
        MemoryEntry.objects.filter(entry_id=entry.entry_id)
        .order_by("revision")
        .values_list("lifecycle", flat=True)
    )
    assert lifecycles == [Lifecycle.SUPERSEDED, Lifecycle.SUPERSEDED, Lifecycle.ACTIVE]
    assert not ForgottenValue.objects.filter(entry_id=entry.entry_id).exists()
    event = AuditEvent.objects.get(action=AuditAction.MEMORY_ENTRY_RESTORED)
    assert event.payload["entryId"] == str(entry.entry_id)
    assert "blue" not in str(event.payload)
    decisions = AuditEvent.objects.filter(action__startswith="iris.governance.decision.")
    assert any(e.payload.get("operation") == "memory.restore" for e in decisions)


def test_a_paused_memory_comes_back_paused(ready):
    entry = written(ready, now=NOW)
    memory_pause(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    restored = memory_restore(
        principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW
    )
    assert restored.lifecycle == Lifecycle.PAUSED


def test_after_the_grace_window_it_is_409(ready):
    entry = written(ready, now=NOW)
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    with pytest.raises(Conflict) as refused:
        memory_restore(
            principal=as_member(ready),
            member=ready,
            entry_id=entry.entry_id,
            now=NOW + SOFT_DELETE_GRACE,
        )
    assert refused.value.code == "grace-window-passed"
    assert current(entry.entry_id).lifecycle == Lifecycle.TOMBSTONED


def test_only_a_forgotten_memory_is_restored(ready):
    entry = written(ready, now=NOW)
    with pytest.raises(Conflict) as refused:
        memory_restore(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    assert refused.value.code == "not-forgotten"


def test_a_fact_stored_again_meanwhile_is_not_overwritten(ready):
    entry = written(ready, "My favourite colour is blue", now=NOW)
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=NOW)
    newer = written(ready, "My favourite colour is green", now=NOW + timedelta(hours=1))
    with pytest.raises(Conflict) as refused:
        memory_restore(
            principal=as_member(ready),
            member=ready,
            entry_id=entry.entry_id,
            now=NOW + timedelta(hours=2),
        )
    assert refused.value.code == "restore-conflict"
    assert refused.value.extra["conflictingEntryId"] == str(newer.entry_id)


def test_forgetting_a_memory_forgets_the_summaries_that_quote_it(ready) -> None:
    source = written(ready, "My bike is a red Brompton", category="fact")
    summary = summary_of(ready, source)
    other = written(ready, "I like tea")
    memory_forget(principal=as_member(ready), member=ready, entry_id=source.entry_id)
    assert current(summary.entry_id).lifecycle == Lifecycle.TOMBSTONED
    assert current(other.entry_id).lifecycle == Lifecycle.ACTIVE
    event = AuditEvent.objects.filter(action=AuditAction.MEMORY_ENTRY_FORGOTTEN).order_by("seq")
    assert [e.reason_code for e in event] == ["member-request", "source-forgotten"]
