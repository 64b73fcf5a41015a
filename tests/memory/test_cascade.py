"""The revocation cascade: a revoked sensitive consent hard-deletes what it covered."""

from __future__ import annotations

import pytest
from django.utils import timezone

from consent.enums import Category, ConsentType, category_consent_type
from governance.models import AuditEvent, JobRun
from memory import jobs, tasks
from memory.models import MemoryEntry
from memory.services import Correction, ProvenanceRef, memory_correct
from tests.factories import (
    as_member,
    grant,
    grant_category,
    grant_storage,
    memory_audits,
    mention,
    written,
)
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

CANARY = "zq-cascade-canary-9931"


@pytest.fixture
def ready(ready):
    # These tests also remember medical facts.
    grant_category(ready, Category.MEDICAL)
    return ready


def revoke(member, consent_type: str, capture) -> None:
    with capture(execute=True):
        grant(member, consent_type, status="revoked")


def entry_ids(member) -> set:
    return set(MemoryEntry.objects.filter(member=member).values_list("entry_id", flat=True))


@pytest.fixture
def world(ready, other_member):
    """A medical memory with two revisions, a summary derived from it, an unrelated
    memory of the same member, and another member's medical memory."""
    grant_storage(other_member)
    grant_category(other_member, Category.MEDICAL)
    medical = written(ready, f"{CANARY} I have asthma", category="medical")
    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=medical.entry_id,
        correction=Correction(body=f"{CANARY} I have mild asthma"),
    )
    summary = written(
        ready,
        "Chat about breathing and inhalers",
        category="fact",
        origin="summarized-from-session",
        provenance_chain=[
            ProvenanceRef("session-summary", str(medical.revision_id), timezone.now())
        ],
    )
    tea = written(ready, "I like green tea", category="preference")
    theirs = written(other_member, "I have a peanut allergy", category="medical")
    return {"medical": medical, "summary": summary, "tea": tea, "theirs": theirs}


def test_revoking_a_category_consent_queues_one_task_after_commit(
    ready, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    queued: list[dict] = []
    monkeypatch.setattr(
        tasks.cascade_consent_revocation, "apply_async", lambda kwargs: queued.append(kwargs)
    )
    revoke(ready, category_consent_type(Category.MEDICAL), django_capture_on_commit_callbacks)
    assert len(queued) == 1
    (kwargs,) = queued
    assert kwargs["tenant_id"] == str(ready.tenant_id) and kwargs["member_id"] == ready.pk
    assert kwargs["categories"] == ["medical"]
    assert kwargs["consent_type"] == category_consent_type(Category.MEDICAL)


def test_revocation_deletes_every_revision_and_summary_and_nothing_else(
    world, ready, other_member, django_capture_on_commit_callbacks
) -> None:
    assert find_in_database(CANARY)
    revoke(ready, category_consent_type(Category.MEDICAL), django_capture_on_commit_callbacks)

    assert entry_ids(ready) == {world["tea"].entry_id}
    assert MemoryEntry.objects.filter(entry_id=world["medical"].entry_id).count() == 0
    assert entry_ids(other_member) == {world["theirs"].entry_id}
    assert find_in_database(CANARY) == []
    run = JobRun.objects.get(job="revocation-cascade")
    assert run.status == "done"
    assert run.counts == {"entries": 2, "revisions": 3, "batches": 1}


def test_cascade_audit_keeps_ids_and_fingerprints_only(
    world, ready, django_capture_on_commit_callbacks
) -> None:
    revoke(ready, category_consent_type(Category.MEDICAL), django_capture_on_commit_callbacks)
    deleted = memory_audits("iris.memory.entry.hard_deleted")
    assert {e.payload["entryId"] for e in deleted} == {
        str(world["medical"].entry_id),
        str(world["summary"].entry_id),
    }
    assert all(e.reason_code == "consent-revoked" for e in deleted)
    assert all(len(fp) == 64 for e in deleted for fp in e.payload["bodyFingerprints"])
    completed = AuditEvent.objects.get(action=jobs.CASCADE_ACTION)
    assert completed.payload == {"entries": 2, "revisions": 3}
    for event in AuditEvent.objects.all():
        text = f"{event.payload} {event.subject_ids} {event.reason_code}"
        assert CANARY not in text and "asthma" not in text


def test_running_the_task_twice_changes_nothing(
    world, ready, django_capture_on_commit_callbacks
) -> None:
    consent_type = category_consent_type(Category.MEDICAL)
    revoke(ready, consent_type, django_capture_on_commit_callbacks)
    rows, events = MemoryEntry.objects.count(), AuditEvent.objects.count()
    counts = tasks.cascade_consent_revocation.apply(
        kwargs={
            "tenant_id": str(ready.tenant_id),
            "member_id": ready.pk,
            "consent_type": consent_type,
            "categories": ["medical"],
            "event_id": "00000000-0000-0000-0000-000000000001",
        }
    ).get()
    assert counts == {"entries": 0, "revisions": 0, "batches": 0}
    assert (MemoryEntry.objects.count(), AuditEvent.objects.count()) == (rows, events)


def test_a_crash_after_the_first_batch_is_finished_by_the_rerun(ready, monkeypatch) -> None:
    ids = {
        written(ready, f"{CANARY} symptom {i}", category="medical", subject=f"symptom {i}").entry_id
        for i in range(3)
    }
    keep = written(ready, "I like green tea", category="preference").entry_id
    real = jobs.memory_hard_delete
    calls = {"n": 0}

    def dies_after_first_batch(**kwargs):
        if calls["n"] == 1:
            raise SystemExit("worker killed")
        calls["n"] += 1
        return real(**kwargs)

    monkeypatch.setattr(jobs, "memory_hard_delete", dies_after_first_batch)
    arguments = {
        "tenant_id": ready.tenant_id,
        "member_id": ready.pk,
        "consent_type": category_consent_type(Category.MEDICAL),
        "categories": ["medical"],
        "event_id": "00000000-0000-0000-0000-000000000002",
        "batch": 1,
    }
    with pytest.raises(SystemExit):
        jobs.consent_revocation_cascade(**arguments)
    assert len(entry_ids(ready) & ids) == 2
    assert JobRun.objects.get(job="revocation-cascade").status == "failed"

    monkeypatch.setattr(jobs, "memory_hard_delete", real)
    run = jobs.consent_revocation_cascade(**arguments)
    assert run.counts["entries"] == 2 and run.counts["batches"] == 2
    assert entry_ids(ready) == {keep}
    assert find_in_database(CANARY) == []
    deleted = [e.payload["entryId"] for e in memory_audits("iris.memory.entry.hard_deleted")]
    assert sorted(deleted) == sorted(str(i) for i in ids)  # each exactly once


def test_multi_actor_revocation_deletes_sensitive_interactions_only(
    ready, django_capture_on_commit_callbacks
) -> None:
    grant(ready, ConsentType.MULTI_ACTOR_SENSITIVE)
    sensitive = written(
        ready,
        "Argued with my brother about money",
        category="relationship",
        multi_actor=mention("Bram", "my brother", sensitive=True),
    )
    plain = written(
        ready,
        "My brother likes chess",
        category="relationship",
        multi_actor=mention("Bram", "my brother"),
    )
    revoke(ready, ConsentType.MULTI_ACTOR_SENSITIVE, django_capture_on_commit_callbacks)
    assert entry_ids(ready) == {plain.entry_id}
    assert sensitive.entry_id not in entry_ids(ready)


def test_cascade_for_a_member_that_no_longer_exists_does_nothing(ready) -> None:
    run = jobs.consent_revocation_cascade(
        tenant_id=ready.tenant_id,
        member_id=ready.pk + 999,
        consent_type=category_consent_type(Category.MEDICAL),
        categories=["medical"],
        event_id="00000000-0000-0000-0000-000000000003",
    )
    assert run.status == "done" and run.counts["entries"] == 0
