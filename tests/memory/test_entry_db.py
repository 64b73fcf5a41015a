"""Stored memory: immutable revisions, the write gate, member operations, forgetting."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from consent.enums import Category, ConsentType
from governance.errors import Conflict, NotFound, ValidationFailed
from governance.models import AuditEvent, IdempotencyRecord
from governance.pipeline import Denied, HeldForApproval
from memory import selectors
from memory.enums import Lifecycle, Origin
from memory.models import (
    ForgottenValue,
    InferenceObservation,
    MemoryEntry,
    OffTheRecord,
    PendingConflict,
    RevisionImmutable,
)
from memory.selectors import text_fingerprint
from memory.services import (
    Correction,
    ProvenanceRef,
    SuppressionMarker,
    memory_change_scope,
    memory_correct,
    memory_forget,
    memory_hard_delete,
    memory_pause,
    memory_resume,
    off_the_record_set,
)
from tests.factories import (
    as_member,
    as_surface,
    as_system,
    counts,
    current,
    grant,
    grant_category,
    grant_storage,
    memory_actions,
    memory_audits,
    mention,
    scope_of,
    write,
)
from tests.helpers_db import find_in_database, run_together

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------ revisions


def test_write_stores_revision_one_and_audits_only_fingerprints(ready) -> None:
    outcome = write(ready, "Canary-7f3 favourite colour is teal")
    assert outcome.written and outcome.reason == "created"
    entry = outcome.entry
    assert (entry.revision, entry.lifecycle, entry.is_current) == (1, "active", True)
    assert entry.supersedes is None
    assert entry.scope_key == f"profile:{ready.public_id}"
    assert entry.adapter_scope == "assistant_profile"
    assert entry.subject == "canary 7f3 favourite colour"
    assert entry.body_fingerprint == text_fingerprint(entry.body)
    [event] = memory_audits()
    assert event.action == "iris.memory.entry.written"
    assert event.payload["bodyFingerprint"] == entry.body_fingerprint
    assert "Canary-7f3" not in json.dumps(event.payload)
    assert str(entry.entry_id) in event.subject_ids


def test_correction_writes_a_new_revision_and_supersedes_the_old(ready) -> None:
    first = write(ready).entry
    outcome = memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=first.entry_id,
        correction=Correction(body="My favourite colour is green"),
    )
    second = outcome.entry
    assert (second.revision, second.supersedes, second.entry_id) == (
        2,
        first.revision_id,
        first.entry_id,
    )
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    old = MemoryEntry.objects.get(pk=first.pk)
    assert (old.lifecycle, old.is_current, old.body) == ("superseded", False, first.body)
    history = selectors.memory_history(
        principal=as_member(ready), member=ready, entry_id=first.entry_id
    )
    assert [r.revision for r in history] == [1, 2]
    assert memory_actions()[-1] == "iris.memory.entry.corrected"


def test_a_stored_revision_cannot_be_changed(ready) -> None:
    entry = write(ready).entry
    entry.body = "rewritten"
    with pytest.raises(RevisionImmutable):
        entry.save()
    with pytest.raises(RevisionImmutable):
        MemoryEntry.objects.filter(pk=entry.pk).update(body="rewritten")
    assert MemoryEntry.objects.get(pk=entry.pk).body == "My favourite colour is blue"


def test_the_database_allows_one_current_revision_per_entry(ready) -> None:
    entry = write(ready).entry
    clone = MemoryEntry.objects.get(pk=entry.pk)
    clone.pk = None
    clone.revision_id = None
    clone._state.adding = True
    clone.revision = 2
    with pytest.raises(IntegrityError), transaction.atomic():
        import uuid

        clone.revision_id = uuid.uuid4()
        clone.save(force_insert=True)


def test_writes_carry_the_suppression_marker_and_provenance(ready) -> None:
    now = timezone.now()
    outcome = write(
        ready,
        "I had a rough night",
        category="fact",
        suppression=SuppressionMarker("crisis-frame", now, now + timedelta(days=1), "frame"),
        provenance_chain=[ProvenanceRef("session-turn", "turn-1", now)],
    )
    entry = outcome.entry
    assert entry.suppression_reason == "crisis-frame" and entry.suppression_notes == "frame"
    assert entry.provenance_chain[0]["kind"] == "session-turn"
    assert entry.provenance_chain[0]["capturedAt"].endswith("Z")


# --------------------------------------------------------------------- write gate


def test_without_storage_consent_the_scope_is_suppressed_with_notes(member) -> None:
    before = counts()
    with pytest.raises(Denied) as refused:
        write(member)
    assert refused.value.code == "scope-suppressed"
    assert "requires data processing consent" in refused.value.detail
    assert refused.value.extra["notes"]
    assert MemoryEntry.objects.count() == before[0]
    assert memory_audits() == []
    decision = AuditEvent.objects.filter(action="iris.governance.decision.deny").get()
    assert decision.reason_code == "scope-suppressed"


def test_session_memory_without_storage_consent_runs_ephemerally(member) -> None:
    grant(member, ConsentType.DATA_PROCESSING)
    outcome = write(member, kind="session", identifiers=scope_of(member, "session", sessionId="s1"))
    assert outcome.status == "not-written" and outcome.reason == "scope-ephemeral"
    assert outcome.notes and MemoryEntry.objects.count() == 0


def test_a_surface_outside_the_scope_allow_list_is_refused(ready, make_operator) -> None:
    operator = make_operator("support")
    with pytest.raises(Denied) as refused:
        write(
            ready,
            kind="operator-copilot",
            identifiers=scope_of(ready, "operator-copilot", operatorId=str(operator.public_id)),
            principal=as_surface(ready),
        )
    assert refused.value.code == "consumer-not-allowed"
    assert MemoryEntry.objects.count() == 0


@pytest.mark.parametrize("category", [Category.MEDICAL, Category.SEXUALITY, Category.FINANCIAL])
def test_sensitive_category_needs_explicit_consent(ready, category) -> None:
    with pytest.raises(Denied) as refused:
        write(ready, "I take insulin daily", category=category)
    assert refused.value.code == "sensitive-category-without-consent"
    assert refused.value.status == 403
    assert MemoryEntry.objects.count() == 0 and memory_audits() == []
    grant_category(ready, category)
    entry = write(ready, "I take insulin daily", category=category).entry
    assert entry.category == category
    assert [c["category"] for c in entry.consents] == [category]
    assert entry.consents[0]["revokedAt"] is None
    # The audit does not say which sensitive category a member has memory in.
    assert memory_audits()[-1].payload["category"] == "sensitive"


def test_sensitive_interaction_needs_multi_actor_consent(ready) -> None:
    with pytest.raises(Denied) as refused:
        write(
            ready,
            "We argued about money",
            category="relationship",
            multi_actor=mention("Sam", sensitive=True),
        )
    assert refused.value.code == "sensitive-category-without-consent"
    assert MemoryEntry.objects.count() == 0
    grant(ready, ConsentType.MULTI_ACTOR_SENSITIVE)
    entry = write(
        ready,
        "We argued about money",
        category="relationship",
        multi_actor=mention("Sam", sensitive=True),
    ).entry
    assert entry.sensitive_interaction and entry.actor_handle.startswith("actor_")


def test_scope_identifiers_must_be_the_members(ready, other_member) -> None:
    with pytest.raises(ValidationFailed) as bad:
        write(ready, identifiers={"userId": str(other_member.public_id)})
    assert bad.value.field == "scope.userId"
    with pytest.raises(ValidationFailed) as bad:
        write(ready, kind="session", identifiers=scope_of(ready))
    assert (bad.value.field, bad.value.rule) == ("scope.sessionId", "missing")
    with pytest.raises(ValidationFailed) as bad:
        write(ready, identifiers=scope_of(ready, sessionId="s1"))
    assert (bad.value.field, bad.value.rule) == ("scope.sessionId", "unexpected")
    with pytest.raises(ValidationFailed) as bad:
        write(ready, kind="tenant", identifiers={"tenantId": "x", "userId": str(ready.public_id)})
    assert bad.value.field == "scope.tenantId"
    assert counts() == (0, AuditEvent.objects.count())
    assert memory_audits() == []


def test_adapter_scope_must_map_onto_the_kind(ready) -> None:
    with pytest.raises(ValidationFailed) as bad:
        write(ready, adapter_scope="session")
    assert bad.value.field == "adapterScope" and "assistant_profile" in bad.value.allowed
    entry = write(ready, adapter_scope="domain").entry
    assert entry.adapter_scope == "domain" and entry.scope_kind == "profile"


# ------------------------------------------------------------------- member operations


def test_forget_tombstones_and_nothing_changes_a_tombstone(ready) -> None:
    entry = write(ready).entry
    tombstone = memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    assert (tombstone.lifecycle, tombstone.revision) == ("tombstoned", 2)
    assert "iris.memory.entry.forgotten" in memory_actions()
    before = counts()
    for call in (
        lambda: memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id),
        lambda: memory_correct(
            principal=as_member(ready),
            member=ready,
            entry_id=entry.entry_id,
            correction=Correction(body="new"),
        ),
        lambda: memory_pause(principal=as_member(ready), member=ready, entry_id=entry.entry_id),
    ):
        with pytest.raises(Conflict) as refused:
            call()
        assert refused.value.code == "entry-tombstoned"
    assert MemoryEntry.objects.count() == before[0]
    # A surface no longer sees a forgotten memory; the member does, until the purge.
    with pytest.raises(NotFound):
        selectors.memory_get(principal=as_surface(ready), member=ready, entry_id=entry.entry_id)
    assert (
        selectors.memory_get(
            principal=as_member(ready), member=ready, entry_id=entry.entry_id
        ).lifecycle
        == "tombstoned"
    )


def test_pause_and_resume_set_and_lift_the_user_pause(ready) -> None:
    entry = write(ready).entry
    paused = memory_pause(
        principal=as_member(ready), member=ready, entry_id=entry.entry_id, notes="not now"
    ).entry
    assert paused.lifecycle == "paused" and paused.suppression_reason == "user-pause"
    assert paused.suppression_notes == "not now" and paused.suppression_started_at
    again = memory_pause(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    assert not again.written
    resumed = memory_resume(principal=as_member(ready), member=ready, entry_id=entry.entry_id).entry
    assert resumed.lifecycle == "active" and resumed.suppression_reason is None
    assert resumed.revision == 3
    assert memory_actions()[-2:] == ["iris.memory.entry.paused", "iris.memory.entry.resumed"]


def test_a_correction_keeps_the_pause(ready) -> None:
    entry = write(ready).entry
    memory_pause(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    corrected = memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=entry.entry_id,
        correction=Correction(body="My favourite colour is red"),
    ).entry
    assert corrected.lifecycle == "paused" and corrected.suppression_reason == "user-pause"


def test_session_to_profile_is_an_explicit_promotion(ready) -> None:
    session = scope_of(ready, "session", sessionId="s1")
    entry = write(ready, "I am training for a marathon", kind="session", identifiers=session).entry
    moved = memory_change_scope(
        principal=as_member(ready),
        member=ready,
        entry_id=entry.entry_id,
        scope_kind="profile",
        scope_identifiers=scope_of(ready),
    ).entry
    assert (moved.entry_id, moved.scope_kind, moved.revision) == (entry.entry_id, "profile", 2)
    assert moved.adapter_scope == "assistant_profile"
    assert moved.provenance_chain[-1]["kind"] == "profile-promotion"
    assert moved.provenance_chain[-1]["ref"] == str(entry.revision_id)
    event = memory_audits()[-1]
    assert event.action == "iris.memory.entry.scope_changed"
    assert event.reason_code == "promote-session-to-profile"
    assert event.payload["promotionReason"] == "explicit-promotion"


def test_tenant_memory_becomes_a_read_only_copy_never_a_profile_fact(ready) -> None:
    tenant_entry = write(
        ready,
        "Course starts Monday",
        kind="tenant",
        category="commitment",
        principal=as_system(ready),
    ).entry
    with pytest.raises(Conflict) as refused:
        memory_change_scope(
            principal=as_member(ready),
            member=ready,
            entry_id=tenant_entry.entry_id,
            scope_kind="profile",
            scope_identifiers=scope_of(ready),
        )
    assert refused.value.code == "tenant-memory-never-consumer-profile"
    copy = memory_change_scope(
        principal=as_member(ready),
        member=ready,
        entry_id=tenant_entry.entry_id,
        scope_kind="notebook",
        scope_identifiers=scope_of(ready, notebookId="nb1"),
    ).entry
    assert copy.entry_id != tenant_entry.entry_id
    assert copy.read_only_copy_of == tenant_entry.entry_id
    assert copy.provenance_chain[-1]["kind"] == "notebook-attachment"
    assert current(tenant_entry.entry_id).revision == 1  # the tenant row is untouched
    with pytest.raises(Conflict) as refused:
        memory_correct(
            principal=as_member(ready),
            member=ready,
            entry_id=copy.entry_id,
            correction=Correction(body="Course starts Tuesday"),
        )
    assert refused.value.code == "read-only-copy"


def test_scope_change_refuses_what_the_rules_refuse(ready) -> None:
    entry = write(ready).entry
    with pytest.raises(Conflict) as refused:
        memory_change_scope(
            principal=as_member(ready),
            member=ready,
            entry_id=entry.entry_id,
            scope_kind="session",
            scope_identifiers=scope_of(ready, sessionId="s1"),
        )
    assert refused.value.code == "scope-change-not-allowed"
    assert MemoryEntry.objects.count() == 1


def test_off_the_record_writes_nothing_and_survives_reconnect(ready) -> None:
    session = scope_of(ready, "session", sessionId="s-otr")
    off_the_record_set(principal=as_member(ready), member=ready, enabled=True, session_id="s-otr")
    before = counts()
    outcome = write(ready, "secret plans", kind="session", identifiers=session)
    assert (outcome.status, outcome.reason) == ("not-written", "off-the-record")
    # A fresh surface connection (a new principal object) finds the toggle still on.
    outcome = write(
        ready, "secret plans", kind="session", identifiers=session, principal=as_surface(ready)
    )
    assert outcome.reason == "off-the-record"
    assert counts() == before
    # Another session is not affected.
    other = write(
        ready,
        "Lunch was nice",
        kind="session",
        identifiers=scope_of(ready, "session", sessionId="s2"),
    )
    assert other.written
    off_the_record_set(principal=as_member(ready), member=ready, enabled=False, session_id="s-otr")
    assert write(ready, "secret plans", kind="session", identifiers=session).written
    assert OffTheRecord.objects.count() == 0
    assert "iris.memory.off_the_record.enabled" in memory_actions()


def test_off_the_record_for_every_session_covers_profile_writes(ready) -> None:
    off_the_record_set(principal=as_member(ready), member=ready, enabled=True)
    assert write(ready).reason == "off-the-record"
    assert MemoryEntry.objects.count() == 0


# --------------------------------------------------------------------- forgetting


def test_hard_delete_leaves_the_canary_nowhere_and_is_idempotent(ready) -> None:
    canary = "zq-canary-4471 loves quince jam"
    entry = write(ready, canary, category="preference").entry
    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=entry.entry_id,
        correction=Correction(body=canary + " a lot"),
    )
    # An idempotent API answer quoting it, keyed to the member.
    IdempotencyRecord.objects.create(
        principal="member:x",
        key="k1",
        request_fingerprint="f",
        subject_id=ready.public_id,
        status_code=201,
        response_body={"body": canary},
    )
    assert find_in_database("zq-canary-4471")
    result = memory_hard_delete(
        principal=as_system(ready), member=ready, entry_ids=[entry.entry_id], reason_code="test"
    )
    assert result.entry_ids == (entry.entry_id,) and result.revision_count == 2
    assert find_in_database("zq-canary-4471") == []
    events = memory_audits("iris.memory.entry.hard_deleted")
    assert len(events) == 1 and events[0].payload["revisionCount"] == 2
    assert ForgottenValue.objects.filter(entry_id=entry.entry_id).exists()
    before = counts()
    again = memory_hard_delete(
        principal=as_system(ready), member=ready, entry_ids=[entry.entry_id], reason_code="test"
    )
    assert again.entry_ids == () and MemoryEntry.objects.count() == before[0]
    assert len(memory_audits("iris.memory.entry.hard_deleted")) == 1


def test_hard_delete_by_category_takes_old_revisions_and_derived_summaries(ready) -> None:
    grant_category(ready, Category.MEDICAL)
    medical = write(ready, "I have asthma", category="medical").entry
    # Corrected into another category: the old revision still holds medical text.
    moved = write(ready, "I run on Sundays", category="fact").entry
    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=moved.entry_id,
        correction=Correction(category="medical"),
    )
    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=moved.entry_id,
        correction=Correction(category="fact"),
    )
    now = timezone.now()
    summary = write(
        ready,
        "Summary of health chat",
        category="fact",
        origin="summarized-from-session",
        provenance_chain=[ProvenanceRef("session-summary", str(medical.entry_id), now)],
    ).entry
    keep = write(ready, "I like tea", category="preference").entry
    result = memory_hard_delete(
        principal=as_system(ready), member=ready, category="medical", reason_code="consent-revoked"
    )
    assert set(result.entry_ids) == {medical.entry_id, moved.entry_id, summary.entry_id}
    assert set(MemoryEntry.objects.values_list("entry_id", flat=True)) == {keep.entry_id}


def test_hard_delete_in_batches_reports_what_remains(ready) -> None:
    ids = [
        write(ready, f"Fact number {i} is true", category="fact").entry.entry_id for i in range(3)
    ]
    first = memory_hard_delete(
        principal=as_system(ready), member=ready, category="fact", limit=2, reason_code="job"
    )
    assert len(first.entry_ids) == 2 and first.remaining
    second = memory_hard_delete(
        principal=as_system(ready), member=ready, category="fact", limit=2, reason_code="job"
    )
    assert len(second.entry_ids) == 1 and not second.remaining
    assert set(first.entry_ids) | set(second.entry_ids) == set(ids)


def test_a_members_hard_delete_waits_for_their_approval(ready) -> None:
    entry = write(ready).entry
    with pytest.raises(HeldForApproval) as held:
        memory_hard_delete(principal=as_member(ready), member=ready, entry_ids=[entry.entry_id])
    assert held.value.extra["approvalId"]
    assert MemoryEntry.objects.filter(entry_id=entry.entry_id).exists()


def test_forgetting_clears_questions_and_inference_counts(ready) -> None:
    stated = write(ready, "My home city is Berlin", category="fact").entry
    asked = write(
        ready, "My home city is Paris", category="fact", origin="model-inferred", session_id="s1"
    )
    assert asked.status == "conflict"
    write(ready, "I work in Munich", category="work", origin="model-inferred", session_id="s1")
    assert PendingConflict.objects.filter(entry_id=stated.entry_id).exists()
    memory_forget(principal=as_member(ready), member=ready, entry_id=stated.entry_id)
    assert not PendingConflict.objects.filter(entry_id=stated.entry_id).exists()
    assert InferenceObservation.objects.count() == 1  # the other fact's count stays


def test_a_forgotten_value_is_not_silently_recreated(ready) -> None:
    entry = write(ready, "I am vegan", category="preference").entry
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    for origin in (Origin.MODEL_INFERRED, Origin.SUMMARIZED_FROM_SESSION, Origin.IMPORTED):
        outcome = write(ready, "I am Vegan", category="preference", origin=origin, session_id="s9")
        assert outcome.reason == "forgotten-not-recreated"
    assert MemoryEntry.objects.filter(is_current=True).exclude(lifecycle="tombstoned").count() == 0
    # The member saying it again is not silent.
    assert write(ready, "I am vegan", category="preference").written


def test_recall_candidates_are_the_current_revisions(ready) -> None:
    entry = write(ready).entry
    memory_pause(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    [candidate] = selectors.recall_candidates(
        tenant_id=ready.tenant_id, member=ready, scope_keys=[f"profile:{ready.public_id}"]
    )
    assert candidate.entry_id == str(entry.entry_id) and candidate.revision == 2
    assert candidate.lifecycle == Lifecycle.PAUSED and candidate.suppression is not None
    assert candidate.user_id == str(ready.public_id)


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_of_one_fact_store_one_entry(require_postgres, member) -> None:
    grant_storage(member)
    outcomes: list[str] = []

    def worker() -> None:
        outcomes.append(write(member, "My lucky number is 7", category="fact").reason)

    assert run_together(worker, threads=4) == []
    assert sorted(outcomes) == ["already-known"] * 3 + ["created"]
    assert MemoryEntry.objects.filter(member=member).count() == 1


# ------------------------------------------------------------------- recall term keys


def test_each_revision_stores_its_recall_terms_from_its_own_body(ready) -> None:
    """The term index holds exactly what the Python tokeniser makes of the body, keyed by
    member, through save and bulk_create alike; a correction's revision gets new terms."""
    from memory.models import recall_term_keys
    from memory.recall.pipeline import tokens
    from memory.rules.lexical import terms

    body = "I walked the dogs to the bakeries"
    first = write(ready, body, subject="walk").entry
    expected = {f"{ready.pk}:{t}" for t in terms(body)}
    expected |= {f"{ready.pk}:~{t}" for t in tokens(body)}
    assert set(first.recall_terms.split()) == expected
    assert f"{ready.pk}:~walked" in expected and f"{ready.pk}:~the" in expected
    assert MemoryEntry.objects.get(pk=first.pk).recall_terms == first.recall_terms
    second = memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=first.entry_id,
        correction=Correction(body="Coffee at noon"),
    ).entry
    assert set(second.recall_terms.split()) == {
        f"{ready.pk}:coffee",
        f"{ready.pk}:noon",
        f"{ready.pk}:~coffee",
        f"{ready.pk}:~noon",
    }
    # Not plain ASCII: one key that sends the row to Python, which folds Unicode itself.
    assert recall_term_keys(7, "Café au lait") == "7:"
    clone = MemoryEntry.objects.get(pk=first.pk)
    clone.revision_id, clone.entry_id, clone.recall_terms = uuid.uuid4(), uuid.uuid4(), "stale"
    MemoryEntry.objects.bulk_create([clone])
    assert MemoryEntry.objects.get(pk=clone.revision_id).recall_terms == first.recall_terms


def test_the_term_index_keeps_a_short_pending_list_and_stands_alone(require_postgres) -> None:
    # A pending list is read by every search (migration 0005 says why a long one hurt);
    # the trigram and non-ASCII indexes it replaced are gone (migration 0006).
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN "
            "('memory_recall_terms', 'memory_recall_trgm', 'memory_recall_nonascii')"
        )
        rows = cursor.fetchall()
    assert rows == [("memory_recall_terms", ["fastupdate=on", "gin_pending_list_limit=64"])]


def test_connections_plan_for_a_working_set_in_memory(require_postgres) -> None:
    # iris_site/settings.py: with the default 4.0 a continued recall stream sorted the
    # member's every row instead of walking the recency index.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        assert cursor.fetchone() == ("1.1",)
