"""The deletion work of a data-rights request: hard and soft, its undo, its purge, the
legal hold and the result fingerprint (any database; the PostgreSQL-only proofs are in
test_deletion_postgres.py)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from consent.enums import category_consent_type
from consent.models import ConsentEventBody
from dsar import deletion, journal, services, work
from dsar.models import DataRightsRequest
from governance.actions import AuditAction
from governance.errors import Conflict, NotFound, ValidationFailed
from governance.models import AuditEvent
from governance.principal import Principal
from memory.continuity import services as continuity
from memory.continuity.models import ContinuationToken
from memory.enums import Lifecycle
from memory.models import MemoryEntry
from tests.factories import (
    as_member,
    as_surface,
    grant_category,
    scope_of,
    summary_of,
    written,
)

pytestmark = pytest.mark.django_db

HOUR_MS = 3600 * 1000


@pytest.fixture(autouse=True)
def _journal_in_tmp(tmp_path, settings):
    settings.IRIS_ERASURE_JOURNAL_PATH = tmp_path / "erasure-journal.jsonl"
    settings.IRIS_EXPORT_DIR = tmp_path / "exports"


def sha256_of(ids) -> str:
    return hashlib.sha256("\n".join(sorted(str(i) for i in ids)).encode()).hexdigest()


def file_delete(member, **payload) -> DataRightsRequest:
    """A delete request the member files in their own session: verified at once."""
    return services.data_rights_open(
        principal=as_member(member), member=member, kind="delete", payload=payload
    )


def reload(request: DataRightsRequest) -> DataRightsRequest:
    return DataRightsRequest.objects.select_related("member").get(id=request.id)


def entry_ids(member) -> set[uuid.UUID]:
    return set(MemoryEntry.objects.filter(member=member).values_list("entry_id", flat=True))


def notebook(member) -> dict:
    return {"kind": "notebook", "identifiers": scope_of(member, "notebook", notebookId="nb-1")}


def lifecycle_of(entry_id) -> str:
    return MemoryEntry.objects.get(entry_id=entry_id, is_current=True).lifecycle


def legal(make_operator) -> Principal:
    operator = make_operator("legal")
    return Principal(
        kind="operator",
        id=operator.public_id,
        tenant_id=operator.tenant_id,
        roles=frozenset({"legal"}),
    )


@pytest.fixture
def memories(ready):
    """Two notebook memories (one corrected), a profile preference and a health memory."""
    grant_category(ready, "medical")
    note = written(ready, "My bike is a green Brompton", **notebook(ready), category="fact")
    from memory.services import Correction, memory_correct

    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=note.entry_id,
        correction=Correction(body="My bike is a red Brompton"),
    )
    other_note = written(ready, "Piano lessons on Tuesdays", **notebook(ready), category="goal")
    keep = written(ready, "My favourite colour is blue")
    health = written(ready, "I take a daily vitamin D tablet", category="medical")
    return {"note": note, "other_note": other_note, "keep": keep, "medical": health}


# -- hard ----------------------------------------------------------------------------------


def test_a_hard_delete_removes_every_revision_of_what_it_names(ready, memories):
    request = file_delete(ready, mode="hard", scopes=["notebook"], categories=["medical"])
    assert work.process(request.id) == "completed"
    gone = {
        memories["note"].entry_id,
        memories["other_note"].entry_id,
        memories["medical"].entry_id,
    }
    assert entry_ids(ready) == {memories["keep"].entry_id}
    assert not MemoryEntry.objects.filter(entry_id__in=gone).exists()
    request = reload(request)
    assert request.state == "completed"
    assert request.result_fingerprint == sha256_of(gone)
    assert [s.to_state for s in request.trail.order_by("position")] == [
        "submitted",
        "verified",
        "in-progress",
        "completed",
    ]
    applied = AuditEvent.objects.get(action=AuditAction.DSAR_DELETION_APPLIED)
    assert applied.payload["entries"] == 3
    assert "medical" not in json.dumps(applied.payload)  # the audit never names a category


def test_a_hard_delete_runs_as_iris_so_nothing_waits_for_an_approval(ready, memories):
    request = file_delete(ready, mode="hard", categories=["medical"])
    assert work.process(request.id) == "completed"
    hard = AuditEvent.objects.filter(action=AuditAction.MEMORY_ENTRY_HARD_DELETED)
    assert {(e.actor_kind, e.actor_id) for e in hard} == {("system", f"dsar-{request.id}")}
    assert {e.reason_code for e in hard} == {"data-rights-erasure"}


def test_the_work_is_safe_to_run_twice(ready, memories):
    request = file_delete(ready, mode="hard", scopes=["notebook"])
    assert work.process(request.id) == "completed"
    fingerprint = reload(request).result_fingerprint
    assert work.process(request.id) == "completed"
    assert reload(request).result_fingerprint == fingerprint
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_DELETION_APPLIED).count() == 1


def test_a_resumed_run_still_counts_what_the_first_run_deleted(ready, memories, monkeypatch):
    request = file_delete(ready, mode="hard", scopes=["notebook"])
    monkeypatch.setattr(deletion, "BATCH", 1)
    real = deletion._forget_tokens

    def die_after_the_entries(*args, **kwargs):
        raise SystemExit("worker killed")

    monkeypatch.setattr(deletion, "_forget_tokens", die_after_the_entries)
    with pytest.raises(SystemExit):
        work.process(request.id)
    assert reload(request).state == "in-progress"
    monkeypatch.setattr(deletion, "_forget_tokens", real)
    assert work.process(request.id) == "completed"
    assert reload(request).result_fingerprint == sha256_of(
        {memories["note"].entry_id, memories["other_note"].entry_id}
    )


def test_a_hard_delete_forgets_tokens_and_purges_the_consent_ledger(ready, memories):
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=ready.tenant_id)
    continuity.continuation_token_write(
        principal=surface,
        member=ready,
        payload={
            "userId": str(ready.public_id),
            "scopeKey": f"session:{ready.public_id}:s-1",
            "surfaceContext": {"surface": "tara", "sessionId": "s-1", "itemId": "book-42"},
            "anchorRef": {"surface": "tara", "kind": "segment", "ref": "b/1", "offsetMs": 1},
            "posture": "listening",
            "deviceId": "phone-1",
            "clientTimestamp": "2025-03-01T12:00:00Z",
        },
    )
    health_type = category_consent_type("medical")
    assert ConsentEventBody.objects.filter(consent_type=health_type).exists()
    request = file_delete(ready, mode="hard", categories=["medical"], purgeConsentLedger=True)
    assert work.process(request.id) == "completed"
    assert not ContinuationToken.objects.filter(member=ready).exists()
    assert not ConsentEventBody.objects.filter(consent_type=health_type).exists()
    # Other consent stays: storage consent is not the request's.
    assert ConsentEventBody.objects.filter(event__member=ready).exists()
    kinds = {e.kind for e in journal.read().erasures}
    assert kinds == {
        journal.Kind.MEMORY_ENTRIES,
        journal.Kind.CONSENT_EVENTS,
        journal.Kind.CONTINUATION_TOKENS,
    }


def test_the_journal_names_ids_only(ready, memories, settings):
    request = file_delete(ready, mode="hard", scopes=["notebook"], categories=["medical"])
    work.process(request.id)
    text = settings.IRIS_ERASURE_JOURNAL_PATH.read_text()
    assert "Brompton" not in text and "vitamin" not in text and "medical" not in text
    erasures = journal.read().erasures
    assert {e.request_id for e in erasures} == {request.id}
    assert {e.member_id for e in erasures} == {ready.public_id}
    deleted = set().union(*(set(e.ids) for e in erasures if e.kind == "memory-entries"))
    assert deleted == {
        memories["note"].entry_id,
        memories["other_note"].entry_id,
        memories["medical"].entry_id,
    }


def test_a_hard_delete_removes_the_members_export_files(ready, memories, settings):
    from dsar.models import ExportBundle

    export = services.data_rights_open(
        principal=as_member(ready), member=ready, kind="export", payload={}
    )
    settings.IRIS_EXPORT_DIR.mkdir(parents=True)
    staged = settings.IRIS_EXPORT_DIR / f"{export.id}.zip"
    staged.write_bytes(b"My bike is a red Brompton")
    ExportBundle.objects.create(
        request=export,
        tenant_id=ready.tenant_id,
        state=ExportBundle.State.READY,
        file_name=staged.name,
        started_at=timezone.now(),
    )
    request = file_delete(ready, mode="hard", scopes=["notebook"])
    assert work.process(request.id) == "completed"
    assert not staged.exists()
    bundle = ExportBundle.objects.get(request=export)
    assert (bundle.state, bundle.deleted_at is not None) == ("expired", True)


# -- soft, undo and purge -----------------------------------------------------------------


def test_a_soft_delete_tombstones_and_waits_out_its_grace_window(ready, memories):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    assert work.process(request.id) == "waiting"
    request = reload(request)
    assert request.state == "in-progress"
    started = request.grace_until - timedelta(hours=1)
    assert lifecycle_of(memories["note"].entry_id) == Lifecycle.TOMBSTONED
    assert lifecycle_of(memories["other_note"].entry_id) == Lifecycle.TOMBSTONED
    assert lifecycle_of(memories["keep"].entry_id) == Lifecycle.ACTIVE
    # Still stored (the member may undo it) until the window ends.
    assert (
        deletion.soft_deletions_purge(tenant=ready.tenant, now=started + timedelta(minutes=59)) == 0
    )
    assert MemoryEntry.objects.filter(entry_id=memories["note"].entry_id).count() == 3
    assert deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until) == 1
    gone = {memories["note"].entry_id, memories["other_note"].entry_id}
    assert not MemoryEntry.objects.filter(entry_id__in=gone).exists()
    request = reload(request)
    assert request.state == "completed"
    assert request.result_fingerprint == sha256_of(gone)
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_DELETION_PURGED).count() == 1
    # Running the purge again finds nothing.
    assert deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until) == 0


def test_a_soft_delete_without_grace_completes_at_once_with_the_same_fingerprint(ready, memories):
    soft = file_delete(ready, mode="soft", categories=["medical"], retentionGraceMs=0)
    assert work.process(soft.id) == "completed"
    assert reload(soft).result_fingerprint == sha256_of({memories["medical"].entry_id})


def test_memory_written_during_the_grace_window_is_not_part_of_the_deletion(ready, memories):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    later = written(ready, "Choir on Thursdays", **notebook(ready), category="goal")
    request = reload(request)
    deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until)
    assert lifecycle_of(later.entry_id) == Lifecycle.ACTIVE


def test_the_member_undoes_a_soft_delete_inside_its_window(ready, memories):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    request = reload(request)
    undone = deletion.data_rights_undo_delete(
        principal=as_member(ready),
        member=ready,
        request_id=request.id,
        now=request.grace_until - timedelta(seconds=1),
    )
    assert undone.state == "completed"
    assert undone.result_fingerprint == hashlib.sha256(b"").hexdigest()
    assert undone.trail.order_by("-position").first().reason_code == "undone"
    assert lifecycle_of(memories["note"].entry_id) == Lifecycle.ACTIVE
    assert MemoryEntry.objects.get(entry_id=memories["note"].entry_id, is_current=True).body == (
        "My bike is a red Brompton"
    )
    assert lifecycle_of(memories["other_note"].entry_id) == Lifecycle.ACTIVE
    event = AuditEvent.objects.get(action=AuditAction.DSAR_DELETION_UNDONE)
    assert event.payload["restored"] == 2
    # The purge leaves an undone request alone.
    assert deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until) == 0
    assert lifecycle_of(memories["note"].entry_id) == Lifecycle.ACTIVE


def test_a_soft_delete_hides_the_summaries_that_quote_it_and_undo_brings_them_back(ready, memories):
    source = MemoryEntry.objects.get(entry_id=memories["note"].entry_id, is_current=True)
    summary = summary_of(ready, source)
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    # No surface reads the deleted text through its summary during the window.
    assert lifecycle_of(summary.entry_id) == Lifecycle.TOMBSTONED
    assert lifecycle_of(memories["keep"].entry_id) == Lifecycle.ACTIVE
    request = reload(request)
    deletion.data_rights_undo_delete(
        principal=as_member(ready),
        member=ready,
        request_id=request.id,
        now=request.grace_until - timedelta(seconds=1),
    )
    assert lifecycle_of(summary.entry_id) == Lifecycle.ACTIVE
    assert AuditEvent.objects.get(action=AuditAction.DSAR_DELETION_UNDONE).payload["restored"] == 3


def test_after_the_window_undo_is_409(ready, memories):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    request = reload(request)
    with pytest.raises(Conflict) as refused:
        deletion.data_rights_undo_delete(
            principal=as_member(ready), member=ready, request_id=request.id, now=request.grace_until
        )
    assert (refused.value.status, refused.value.code) == (409, "undo-window-closed")
    assert lifecycle_of(memories["note"].entry_id) == Lifecycle.TOMBSTONED


def test_a_hard_delete_cannot_be_undone(ready, memories):
    request = file_delete(ready, mode="hard", scopes=["notebook"])
    work.process(request.id)
    with pytest.raises(Conflict) as refused:
        deletion.data_rights_undo_delete(
            principal=as_member(ready), member=ready, request_id=request.id
        )
    assert refused.value.code == "not-a-soft-delete"


def test_another_member_cannot_undo_it(ready, memories, other_member):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    with pytest.raises(NotFound):
        deletion.data_rights_undo_delete(
            principal=as_member(other_member), member=other_member, request_id=request.id
        )


def test_a_surface_undoes_it_for_its_member(ready, memories):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    undone = deletion.data_rights_undo_delete(
        principal=as_surface(ready), member=ready, request_id=request.id
    )
    assert undone.state == "completed"


def test_a_waiting_soft_delete_is_cancelled_but_not_once_it_started(ready, memories):
    surface = as_surface(ready)
    waiting = services.data_rights_open(
        principal=surface,
        member=ready,
        kind="delete",
        payload={"mode": "soft", "scopes": ["notebook"]},
    )
    assert waiting.state == "submitted"
    cancelled = services.data_rights_transition(
        principal=surface, member=ready, request_id=waiting.id, to="cancelled"
    )
    assert cancelled.state == "cancelled"
    with pytest.raises(Conflict) as not_started:
        deletion.data_rights_undo_delete(principal=surface, member=ready, request_id=waiting.id)
    assert not_started.value.code == "undo-window-closed"

    started = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(started.id)
    with pytest.raises(ValidationFailed) as refused:
        services.data_rights_transition(
            principal=surface, member=ready, request_id=started.id, to="cancelled"
        )
    assert refused.value.rule == "transition-not-allowed"
    assert reload(started).state == "in-progress"


def test_a_soft_delete_not_started_says_cancel_instead(ready, memories):
    request = services.data_rights_open(
        principal=as_surface(ready),
        member=ready,
        kind="delete",
        payload={"mode": "soft", "scopes": ["notebook"]},
    )
    with pytest.raises(Conflict) as refused:
        deletion.data_rights_undo_delete(
            principal=as_surface(ready), member=ready, request_id=request.id
        )
    assert refused.value.code == "deletion-not-started"


# -- legal hold ----------------------------------------------------------------------------


def test_a_legal_hold_blocks_deletion_until_it_is_lifted(
    ready, memories, make_operator, member_api, django_capture_on_commit_callbacks
):
    operator = legal(make_operator)
    services.legal_hold_place(principal=operator, member=ready, reason="Litigation 2026-114")
    request = file_delete(ready, mode="hard", scopes=["notebook"])
    assert work.process(request.id) == "held"
    assert reload(request).state == "verified"
    shown = member_api.get(f"/api/v1/data-rights/{request.id}").json()
    assert shown["state"] == "verified"  # what the member sees meanwhile
    assert memories["note"].entry_id in entry_ids(ready)
    with django_capture_on_commit_callbacks(execute=True):
        services.legal_hold_lift(principal=operator, member=ready)
    request = reload(request)
    assert request.state == "completed"
    assert memories["note"].entry_id not in entry_ids(ready)


def test_the_purge_skips_a_member_under_a_hold(ready, memories, make_operator):
    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    operator = legal(make_operator)
    services.legal_hold_place(principal=operator, member=ready, reason="Regulator inquiry")
    request = reload(request)
    assert deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until) == 0
    assert MemoryEntry.objects.filter(entry_id=memories["note"].entry_id).exists()
    assert reload(request).state == "in-progress"
    services.legal_hold_lift(principal=operator, member=ready)
    assert deletion.soft_deletions_purge(tenant=ready.tenant, now=request.grace_until) == 1
    assert not MemoryEntry.objects.filter(entry_id=memories["note"].entry_id).exists()


def test_the_grace_window_never_outlasts_the_memory_purge(ready, memories):
    from memory.rules.retention import SOFT_DELETE_GRACE

    request = file_delete(
        ready, mode="soft", scopes=["notebook"], retentionGraceMs=60 * 24 * HOUR_MS
    )
    work.process(request.id)
    request = reload(request)
    tombstone = MemoryEntry.objects.get(entry_id=memories["note"].entry_id, is_current=True)
    assert request.grace_until == tombstone.updated_at + SOFT_DELETE_GRACE


def test_the_member_undoes_through_the_api_and_the_page_offers_it(ready, memories):
    from rest_framework.test import APIClient

    request = file_delete(ready, mode="soft", scopes=["notebook"], retentionGraceMs=HOUR_MS)
    work.process(request.id)
    client = APIClient()
    client.force_login(ready)
    page = client.get("/data-rights/")
    assert "Undo this deletion" in page.content.decode()
    answer = client.post(f"/api/v1/data-rights/{request.id}/undo", {}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["state"] == "completed"
    assert lifecycle_of(memories["note"].entry_id) == Lifecycle.ACTIVE
    again = client.post(f"/api/v1/data-rights/{request.id}/undo", {}, format="json")
    assert again.status_code in (400, 409)
    assert "Undo this deletion" not in client.get("/data-rights/").content.decode()


def test_memorys_own_purge_waits_for_a_legal_hold_and_goes_on_for_others(
    ready, other_member, make_operator
):
    from datetime import UTC, datetime

    from memory.jobs import purge_run
    from memory.rules.retention import SOFT_DELETE_GRACE
    from memory.services import memory_forget
    from tests.factories import as_member, grant_storage

    grant_storage(other_member)
    then = datetime(2026, 1, 5, 9, tzinfo=UTC)
    mine = written(ready, "My locker code is behind the blue door")
    theirs = written(other_member, "I keep bees on the roof")
    memory_forget(principal=as_member(ready), member=ready, entry_id=mine.entry_id, now=then)
    memory_forget(
        principal=as_member(other_member), member=other_member, entry_id=theirs.entry_id, now=then
    )
    operator = legal(make_operator)
    services.legal_hold_place(principal=operator, member=ready, reason="Litigation")
    later = then + SOFT_DELETE_GRACE + timedelta(hours=1)
    run = purge_run(tenant_id=ready.tenant_id, now=later)
    assert run.counts["held"] == 1
    assert MemoryEntry.objects.filter(entry_id=mine.entry_id).exists()
    assert not MemoryEntry.objects.filter(entry_id=theirs.entry_id).exists()
    assert AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code="legal-hold"
    ).exists()
    services.legal_hold_lift(principal=operator, member=ready)
    purge_run(tenant_id=ready.tenant_id, now=later)
    assert not MemoryEntry.objects.filter(entry_id=mine.entry_id).exists()
