"""Writing a memory: a member's or surface's assertion, an inference that needs more
sessions before it is believed, and the conflict question when the two disagree."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consent.policy import ScopeMode
from governance.actions import AuditAction
from governance.audit import one_insert
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from memory import screening, selectors
from memory.enums import (
    Lifecycle,
    Origin,
)
from memory.models import (
    ForgottenValue,
    InferenceObservation,
    MemoryEntry,
    PendingConflict,
)
from memory.recall.pipeline import rfc3339
from memory.rules.conflicts import (
    ConflictResolution,
    ConflictSide,
    conflict_key,
    resolve_conflict,
    same_value,
)
from memory.rules.promotion import (
    PromotionDecision,
    count_distinct_sessions,
    evaluate_promotion,
)
from memory.selectors import conflict_fingerprint as _conflict_fingerprint
from memory.selectors import text_fingerprint, value_fingerprint
from memory.services.common import (
    _audit,
    _audited_category,
    _current_for_key,
    _gate,
    _govern,
    _insert_revision,
    _lifecycle_after,
    _lock_fact,
    _readable_adapter_scopes,
    _resolve_mention,
    _screened_text,
    _share_member,
    _snapshot,
    _validate,
    _with_promotion,
    _Write,
    _written,
)
from memory.services.types import (
    CONFLICT_TTL,
    MEMBER_WORD_ORIGINS,
    REPLAYED_ORIGINS,
    MemoryDraft,
    WriteGate,
    WriteOutcome,
)

# ------------------------------------------------------------------------ the write path


def memory_write(
    *,
    principal: Principal,
    member: User,
    draft: MemoryDraft,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Remember something (spec: the write path).

    In order: validation (ValidationFailed, 400); off the record (nothing written, not even
    an audit event); governance with the write gate (scope enabled for this member,
    allowed consumer, sensitive consent: Denied, 403); an ephemeral scope stores nothing;
    then, under the member's lock, inference gating and conflict resolution against the
    current entry with the same conflict key in the same scope.
    """
    now = now or timezone.now()
    w = _validate(member, draft)
    if selectors.off_the_record_for(
        member=member, session_id=w.session_id, surface=principal.surface
    ):
        return WriteOutcome("not-written", "off-the-record")
    sensitive_interaction = bool(w.mention and w.mention.sensitive_interaction)
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=w.adapter_scope,
        category=w.category,
        sensitive_interaction=sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.write",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        arguments={
            "category": w.category.value,
            "scopeKind": w.scope_kind.value,
            "origin": w.origin.value,
        },
        attributes={"memoryGate": gate.as_attributes()},
        text=_screened_text(w.body, w.mention.relationship_note if w.mention else ""),
        texts=screening.write_texts(
            body=w.body,
            subject=draft.subject or w.subject,  # as sent: normalising may hide a key
            session_id=w.session_id,
            scope_identifiers=w.scope_identifiers,
            relationship_note=w.mention.relationship_note if w.mention else "",
            suppression_notes=w.suppression["suppression_notes"],
            provenance=w.provenance,
        ),
        pending=decided,
    )
    # The body's vector, before the member's lock: one member's writers would otherwise
    # take turns at the encoder (recall.service.encode_ahead).
    from memory.recall.service import encode_ahead

    encoded: dict[str, bytes] = {}
    if gate.scope_mode != ScopeMode.EPHEMERAL:
        vector = encode_ahead(w.body)
        if vector is not None:
            encoded[w.body] = vector
    # The allow is on record in the same commit, and the same INSERT, as what it allowed.
    with transaction.atomic(durable=True), one_insert():
        record_pending(decided)
        if gate.scope_mode == ScopeMode.EPHEMERAL:
            return WriteOutcome("not-written", "scope-ephemeral", notes=gate.scope_notes)
        _share_member(member)
        handle = _resolve_mention(member, w.mention)
        # Inference counts are kept per conflict key across scopes, so the key is the lock's.
        _lock_fact(member, conflict_key(w.category, handle, w.subject))
        fields = {
            "tenant_id": member.tenant_id,
            "member_id": member.pk,
            "scope_kind": w.scope_kind.value,
            "scope_key": w.scope_key,
            "scope_identifiers": w.scope_identifiers,
            "adapter_scope": w.adapter_scope.value,
            "category": w.category.value,
            "body": w.body,
            "subject": w.subject,
            "origin": w.origin.value,
            "actor_handle": handle,
            "relationship_note": w.mention.relationship_note if w.mention else "",
            "sensitive_interaction": sensitive_interaction,
            "consents": _snapshot(consents, w.category),
            "provenance_chain": w.provenance,
            "read_only_copy_of": None,
            **w.suppression,
        }
        if (
            w.origin in REPLAYED_ORIGINS
            and ForgottenValue.objects.filter(
                tenant_id=member.tenant_id,
                member=member,
                value_fingerprint=value_fingerprint(w.body),
            ).exists()
        ):
            _audit(
                principal,
                member,
                AuditAction.MEMORY_WRITE_DROPPED,
                reason_code="forgotten-not-recreated",
                payload={"origin": w.origin.value, "bodyFingerprint": text_fingerprint(w.body)},
            )
            return WriteOutcome("not-written", "forgotten-not-recreated")
        current = _current_for_key(
            member,
            w.scope_key,
            w.category,
            handle,
            w.subject,
            adapter_scopes=_readable_adapter_scopes(principal),
        )
        if w.origin is Origin.MODEL_INFERRED:
            return _write_inference(principal, member, w, fields, current, gate, now, encoded)
        return _write_assertion(principal, member, w, fields, current, now, encoded)


def _side(origin: str, body: str, at: datetime) -> ConflictSide:
    return ConflictSide(origin=Origin(origin), body=body, updated_at=at)


def _write_assertion(
    principal: Principal,
    member: User,
    w: _Write,
    fields: dict[str, Any],
    current: MemoryEntry | None,
    now: datetime,
    encoded: Mapping[str, bytes],
) -> WriteOutcome:
    """A write that is not a model inference: stated, confirmed, operator, summary, import."""
    if current is None:
        entry = _insert_revision(
            prev=None, now=now, fields={**fields, "lifecycle": Lifecycle.ACTIVE}, encoded=encoded
        )
        return _written(principal, member, entry, reason="created")

    if same_value(current.body, w.body):
        # Restating a stored value changes nothing, unless the member's word now stands
        # behind what was only inferred: that is a confirmation, worth a revision.
        upgrade = (
            w.origin in MEMBER_WORD_ORIGINS and Origin(current.origin) not in MEMBER_WORD_ORIGINS
        )
        if not upgrade:
            return WriteOutcome("not-written", "already-known", entry=current)

    resolution = resolve_conflict(
        _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
    )
    if resolution.ask_member:
        return _raise_conflict(principal, member, current, w, fields, resolution, now)
    if resolution.winner == "prior":
        _audit(
            principal,
            member,
            AuditAction.MEMORY_CONFLICT_RESOLVED,
            subject_ids=[current.entry_id, current.revision_id],
            reason_code=resolution.rule.value,
            payload=_conflict_payload(current, w.origin.value, w.body, resolution),
        )
        return WriteOutcome("not-written", f"kept-existing:{resolution.rule.value}", entry=current)
    entry = _insert_revision(
        prev=current,
        now=now,
        fields={**fields, **_lifecycle_after(current, fields)},
        encoded=encoded,
    )
    return _written(
        principal,
        member,
        entry,
        reason=resolution.rule.value,
        conflict={"rule": resolution.rule.value, "priorOrigin": current.origin},
    )


def _conflict_payload(
    prior: MemoryEntry, incoming_origin: str, incoming_body: str, resolution: ConflictResolution
) -> dict[str, Any]:
    return {
        "entryId": str(prior.entry_id),
        "prior": {
            "revisionId": str(prior.revision_id),
            "revision": prior.revision,
            "origin": prior.origin,
            "bodyFingerprint": prior.body_fingerprint,
        },
        "incoming": {"origin": incoming_origin, "bodyFingerprint": text_fingerprint(incoming_body)},
        "rule": resolution.rule.value,
        "ladderWinner": resolution.winner,
        "askMember": resolution.ask_member,
        "category": _audited_category(prior.category),
    }


def _proposal(w: _Write, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The proposed write, JSON-safe, to be applied if the member says "update"."""
    suppression = None
    if fields.get("suppression_reason"):
        ends = fields["suppression_ends_at"]
        suppression = {
            "reason": fields["suppression_reason"],
            "startedAt": rfc3339(fields["suppression_started_at"]),
            "endsAt": rfc3339(ends) if ends else None,
            "notes": fields["suppression_notes"],
        }
    return {
        "body": w.body,
        "origin": w.origin.value,
        "category": w.category.value,
        "subject": w.subject,
        "adapterScope": w.adapter_scope.value,
        "actorHandle": fields["actor_handle"],
        "relationshipNote": fields["relationship_note"],
        "sensitiveInteraction": fields["sensitive_interaction"],
        "provenanceChain": fields["provenance_chain"],
        "suppression": suppression,
    }


def _raise_conflict(
    principal: Principal,
    member: User,
    current: MemoryEntry,
    w: _Write,
    fields: Mapping[str, Any],
    resolution: ConflictResolution,
    now: datetime,
) -> WriteOutcome:
    # One open question per entry: a newer contradiction replaces the older question.
    PendingConflict.objects.filter(entry_id=current.entry_id, status="open").update(
        status=PendingConflict.Status.REPLACED, proposal={}, closed_at=now
    )
    conflict = PendingConflict.objects.create(
        tenant_id=member.tenant_id,
        member=member,
        entry_id=current.entry_id,
        prior_revision_id=current.revision_id,
        rule=resolution.rule.value,
        ladder_winner=resolution.winner,
        proposal=_proposal(w, fields),
        proposal_fingerprint=text_fingerprint(w.body),
        created_at=now,
        expires_at=now + CONFLICT_TTL,
    )
    _audit(
        principal,
        member,
        AuditAction.MEMORY_CONFLICT_RAISED,
        subject_ids=[current.entry_id, conflict.id],
        reason_code=resolution.rule.value,
        payload=_conflict_payload(current, w.origin.value, w.body, resolution),
    )
    return WriteOutcome(
        "conflict",
        "memory-conflict",
        entry=current,
        conflict=conflict,
        question=selectors.conflict_question(prior_body=current.body, proposed_body=w.body),
    )


def _observe(member: User, key: str, body: str, session_id: str, now: datetime) -> int:
    """Record that the model inferred this value in this session; return in how many
    distinct sessions it has been inferred. A write without a session counts for none."""
    conflict_fp, value_fp = _conflict_fingerprint(key), value_fingerprint(body)
    if session_id:
        InferenceObservation.objects.get_or_create(
            tenant_id=member.tenant_id,
            member=member,
            conflict_fingerprint=conflict_fp,
            value_fingerprint=value_fp,
            session_id=session_id,
            defaults={"seen_at": now},
        )
    sessions = InferenceObservation.objects.filter(
        tenant_id=member.tenant_id,
        member=member,
        conflict_fingerprint=conflict_fp,
        value_fingerprint=value_fp,
    ).values_list("session_id", flat=True)
    return count_distinct_sessions(sessions)


def _write_inference(
    principal: Principal,
    member: User,
    w: _Write,
    fields: dict[str, Any],
    current: MemoryEntry | None,
    gate: WriteGate,
    now: datetime,
    encoded: Mapping[str, bytes],
) -> WriteOutcome:
    """A model inference earns durability (spec: "Inference vs Confirmation Policy").

    It is stored as a draft (never recalled) and becomes active only once the same value
    has been inferred in PROMOTION_THRESHOLD distinct sessions, or when the member
    confirms it; a sensitive inference only by confirmation. Against the member's own word
    it is never stored: it becomes a question instead.
    """
    if current is not None and Origin(current.origin) in MEMBER_WORD_ORIGINS:
        if same_value(current.body, w.body):
            return WriteOutcome("not-written", "already-known", entry=current)
        resolution = resolve_conflict(
            _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
        )
        return _raise_conflict(principal, member, current, w, fields, resolution, now)

    key = conflict_key(w.category, fields["actor_handle"], w.subject)
    distinct = _observe(member, key, w.body, w.session_id, now)
    decision = evaluate_promotion(
        requested=True, explicit=False, distinct_sessions=distinct, sensitive=gate.sensitive
    )
    if current is None:
        lifecycle = Lifecycle.ACTIVE if decision.allowed else Lifecycle.DRAFT
        entry = _insert_revision(
            prev=None, now=now, fields={**fields, "lifecycle": lifecycle}, encoded=encoded
        )
        outcome = _written(
            principal,
            member,
            entry,
            reason=decision.reason.value,
            promotionReason=decision.reason.value,
            distinctSessions=distinct,
        )
        return _with_promotion(outcome, decision, distinct)

    if same_value(current.body, w.body) and current.lifecycle != Lifecycle.DRAFT:
        return WriteOutcome("not-written", "already-known", entry=current)
    if current.lifecycle == Lifecycle.DRAFT:
        if not decision.allowed and same_value(current.body, w.body):
            _audit_observed(principal, member, current, decision, distinct)
            return _with_promotion(
                WriteOutcome("not-written", "inference-observed", entry=current), decision, distinct
            )
        lifecycle = Lifecycle.ACTIVE if decision.allowed else Lifecycle.DRAFT
        entry = _insert_revision(
            prev=current, now=now, fields={**fields, "lifecycle": lifecycle}, encoded=encoded
        )
        action = (
            AuditAction.MEMORY_ENTRY_PROMOTED
            if decision.allowed
            else AuditAction.MEMORY_ENTRY_WRITTEN
        )
        outcome = _written(
            principal,
            member,
            entry,
            reason=decision.reason.value,
            action=action,
            promotionReason=decision.reason.value,
            distinctSessions=distinct,
        )
        return _with_promotion(outcome, decision, distinct)
    # The stored fact is itself an inference (or an operator's or a summary's): a different
    # inferred value replaces it only once it has earned durability on its own.
    if not decision.allowed:
        _audit_observed(principal, member, current, decision, distinct)
        return _with_promotion(
            WriteOutcome("not-written", "inference-observed", entry=current), decision, distinct
        )
    resolution = resolve_conflict(
        _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
    )
    if resolution.winner == "prior":
        return WriteOutcome("not-written", f"kept-existing:{resolution.rule.value}", entry=current)
    entry = _insert_revision(
        prev=current,
        now=now,
        fields={**fields, **_lifecycle_after(current, fields)},
        encoded=encoded,
    )
    outcome = _written(
        principal,
        member,
        entry,
        reason=decision.reason.value,
        action=AuditAction.MEMORY_ENTRY_PROMOTED,
        conflict={"rule": resolution.rule.value, "priorOrigin": current.origin},
        promotionReason=decision.reason.value,
        distinctSessions=distinct,
    )
    return _with_promotion(outcome, decision, distinct)


def _audit_observed(
    principal: Principal,
    member: User,
    entry: MemoryEntry,
    decision: PromotionDecision,
    distinct: int,
) -> None:
    _audit(
        principal,
        member,
        AuditAction.MEMORY_INFERENCE_OBSERVED,
        subject_ids=[entry.entry_id],
        reason_code=decision.reason.value,
        payload={"distinctSessions": distinct, "category": _audited_category(entry.category)},
    )
