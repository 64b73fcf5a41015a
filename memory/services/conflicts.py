"""Answering a pending conflict question, and expiring the ones nobody answered."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consent.enums import (
    AdapterScope,
)
from governance.actions import AuditAction
from governance.errors import Conflict, NotFound
from governance.idempotency import forget_subject
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from memory import screening
from memory.enums import (
    Origin,
)
from memory.models import (
    ForgottenValue,
    MemoryEntry,
    PendingConflict,
)
from memory.rules.promotion import (
    PromotionDecision,
    PromotionReason,
    promoted_origin,
)
from memory.selectors import value_fingerprint
from memory.services.common import (
    _NO_SUPPRESSION,
    _audit,
    _gate,
    _govern,
    _insert_revision,
    _invalid,
    _lifecycle_after,
    _lock_member,
    _readable_adapter_scopes,
    _revision_payload,
    _screened_text,
    _uuid_or_none,
)
from memory.services.types import CONFLICT_ANSWERS, REPLAYED_ORIGINS, WriteOutcome

# ------------------------------------------------------------------ answering a conflict


def memory_conflict_answer(
    *,
    principal: Principal,
    member: User,
    conflict_id: uuid.UUID | str,
    answer: str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member's answer to "you mentioned X earlier — should I update it?".

    `update` applies the proposed write as a new revision (an inference the member
    accepts becomes `user-confirmed`); `keep` drops it, and an inference the member
    refused is not proposed again. Either way the proposal's text is erased from the
    question row; the audit records prior state, new state, rule and answer as ids and
    fingerprints. A question that expired, was replaced, or whose memory changed since is
    a 409 and changes nothing but its own closing.
    """
    now = now or timezone.now()
    if answer not in CONFLICT_ANSWERS:
        raise _invalid(
            "answer", "invalid_choice", "answer must be update or keep.", CONFLICT_ANSWERS
        )
    key = _uuid_or_none(conflict_id)
    conflict = (
        PendingConflict.objects.filter(tenant_id=member.tenant_id, member=member, id=key).first()
        if key
        else None
    )
    readable = _readable_adapter_scopes(principal)
    if conflict is not None and readable is not None:
        # A question about an entry the surface may not read does not exist for it.
        prior = MemoryEntry.objects.filter(
            tenant_id=member.tenant_id, member=member, revision_id=conflict.prior_revision_id
        ).first()
        if prior is None or prior.adapter_scope not in readable:
            conflict = None
    if conflict is None:
        raise NotFound("No such question.")
    proposal = conflict.proposal
    attributes: dict[str, Any] = {"answer": answer}
    text = None
    if answer == "update" and conflict.status == PendingConflict.Status.OPEN and proposal:
        gate, _ = _gate(
            principal=principal,
            member=member,
            adapter=AdapterScope(proposal["adapterScope"]),
            category=proposal["category"],
            sensitive_interaction=bool(proposal["sensitiveInteraction"]),
        )
        attributes["memoryGate"] = gate.as_attributes()
        text = _screened_text(proposal["body"], proposal["relationshipNote"])
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.conflict_answer",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[conflict.id, conflict.entry_id],
        arguments={"conflictId": str(conflict.id), "answer": answer},
        attributes=attributes,
        text=text,
        pending=decided,
        texts=screening.proposal_texts(proposal) if text is not None else None,
    )
    refusal: Conflict | None = None
    outcome: WriteOutcome
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        _lock_member(member)
        conflict = PendingConflict.objects.select_for_update().get(pk=conflict.pk)
        current = (
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id,
                member=member,
                entry_id=conflict.entry_id,
                is_current=True,
            )
            .select_for_update()
            .first()
        )
        if conflict.status != PendingConflict.Status.OPEN:
            raise Conflict("This question was already closed.", code="conflict-closed")
        if conflict.expires_at <= now:
            _close(conflict, PendingConflict.Status.EXPIRED, now)
            refusal = Conflict(
                "This question expired; nothing was changed.", code="conflict-expired"
            )
        elif current is None or current.revision_id != conflict.prior_revision_id:
            _close(conflict, PendingConflict.Status.EXPIRED, now)
            refusal = Conflict(
                "The memory changed since the question was asked; nothing was changed.",
                code="conflict-stale",
            )
        else:
            proposal = conflict.proposal
            payload = {
                "answer": answer,
                "rule": conflict.rule,
                "ladderWinner": conflict.ladder_winner,
                "prior": {
                    "revisionId": str(current.revision_id),
                    "revision": current.revision,
                    "origin": current.origin,
                    "bodyFingerprint": current.body_fingerprint,
                },
                "proposed": {
                    "origin": proposal["origin"],
                    "bodyFingerprint": conflict.proposal_fingerprint,
                },
            }
            if answer == "update":
                entry = _apply_proposal(member, current, proposal, now)
                payload["result"] = {
                    "revisionId": str(entry.revision_id),
                    "revision": entry.revision,
                    "origin": entry.origin,
                }
                outcome = WriteOutcome("written", "conflict-answered-update", entry=entry)
            else:
                if Origin(proposal["origin"]) in REPLAYED_ORIGINS:
                    ForgottenValue.objects.create(
                        tenant_id=member.tenant_id,
                        member=member,
                        entry_id=current.entry_id,
                        value_fingerprint=value_fingerprint(proposal["body"]),
                        reason=ForgottenValue.Reason.REJECTED,
                        created_at=now,
                    )
                outcome = WriteOutcome("not-written", "conflict-answered-keep", entry=current)
            conflict.answer = answer
            _close(conflict, PendingConflict.Status.ANSWERED, now)
            # The stored 409 answers quoted the proposal; they go with it.
            forget_subject(member.public_id)
            _audit(
                principal,
                member,
                AuditAction.MEMORY_CONFLICT_ANSWERED,
                subject_ids=[conflict.entry_id, conflict.id],
                reason_code=conflict.rule,
                payload=payload,
            )
            if outcome.entry is not None and outcome.written:
                _audit(
                    principal,
                    member,
                    AuditAction.MEMORY_ENTRY_WRITTEN,
                    subject_ids=[outcome.entry.entry_id, outcome.entry.revision_id],
                    reason_code="conflict-answered-update",
                    payload=_revision_payload(outcome.entry),
                )
    if refusal is not None:
        raise refusal
    return outcome


def _close(conflict: PendingConflict, status: str, now: datetime) -> None:
    conflict.status = status
    conflict.proposal = {}
    conflict.closed_at = now
    conflict.save(update_fields=["status", "answer", "proposal", "closed_at"])


def _apply_proposal(
    member: User, current: MemoryEntry, proposal: Mapping[str, Any], now: datetime
) -> MemoryEntry:
    confirmed = promoted_origin(
        PromotionDecision(True, PromotionReason.EXPLICIT_PROMOTION), proposal["origin"]
    )
    suppression = dict(_NO_SUPPRESSION)
    if proposal.get("suppression"):
        s = proposal["suppression"]
        suppression = {
            "suppression_reason": s["reason"],
            "suppression_started_at": datetime.fromisoformat(s["startedAt"]),
            "suppression_ends_at": datetime.fromisoformat(s["endsAt"]) if s["endsAt"] else None,
            "suppression_notes": s["notes"],
        }
    fields = {
        "body": proposal["body"],
        "origin": confirmed.value,
        "category": proposal["category"],
        "subject": proposal["subject"],
        "adapter_scope": proposal["adapterScope"],
        "actor_handle": proposal["actorHandle"],
        "relationship_note": proposal["relationshipNote"],
        "sensitive_interaction": proposal["sensitiveInteraction"],
        "provenance_chain": proposal["provenanceChain"],
        **suppression,
    }
    fields.update(_lifecycle_after(current, fields))
    return _insert_revision(prev=current, now=now, fields=fields)


def pending_conflicts_expire(
    *, principal: Principal, tenant_id: uuid.UUID, now: datetime | None = None, batch: int = 500
) -> int:
    """Close open questions past their expiry and erase their proposals (for a job).

    Governed per member like any write; returns how many questions were closed.
    """
    now = now or timezone.now()
    due = list(
        PendingConflict.objects.filter(tenant_id=tenant_id, status="open", expires_at__lte=now)
        .select_related("member")
        .order_by("expires_at")[:batch]
    )
    closed = 0
    for member_id in sorted({c.member_id for c in due}):
        member = next(c.member for c in due if c.member_id == member_id)
        ids = [c.id for c in due if c.member_id == member_id]
        decided: list[dict[str, Any]] = []
        _govern(
            Hook.PRE_WRITE,
            name="memory.conflicts_expire",
            effect=Effect.WRITE,
            principal=principal,
            member=member,
            context=None,
            subject_ids=ids,
            pending=decided,
        )
        with transaction.atomic(durable=True):
            record_pending(decided)  # the allow commits with what it allowed, or not at all
            count = PendingConflict.objects.filter(id__in=ids, status="open").update(
                status=PendingConflict.Status.EXPIRED, proposal={}, closed_at=now
            )
            if count:
                forget_subject(member.public_id)
                _audit(
                    principal,
                    member,
                    AuditAction.MEMORY_CONFLICT_EXPIRED,
                    subject_ids=ids,
                    payload={"count": count},
                )
            closed += count
    return closed
