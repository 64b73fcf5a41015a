"""Corrections and confirmations: each makes a new revision of the entry."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consent.enums import (
    AdapterScope,
    Category,
)
from governance.actions import AuditAction
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from governance.runs import content_fingerprint
from memory import screening
from memory.enums import (
    Lifecycle,
    Origin,
)
from memory.models import (
    PendingConflict,
)
from memory.rules.masking import (
    MultiActorRuleError,
    validate_relationship_note,
)
from memory.rules.promotion import (
    evaluate_promotion,
    promoted_origin,
)
from memory.selectors import text_fingerprint
from memory.services.common import (
    _body,
    _current,
    _enum,
    _gate,
    _govern,
    _insert_revision,
    _invalid,
    _lifecycle_after,
    _refuse_read_only,
    _refuse_tombstoned,
    _relocked,
    _screened_text,
    _snapshot,
    _subject,
    _with_promotion,
    _written,
)
from memory.services.types import Correction, WriteOutcome

# ------------------------------------------------------------------- member operations


def memory_correct(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    correction: Correction,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member corrects a memory: a new revision in the member's own words
    (`user-stated`). A draft inference the member corrects becomes active. A forgotten
    memory is 409 `entry-tombstoned`; a read-only copy 409 `read-only-copy`."""
    now = now or timezone.now()
    body = None if correction.body is None else _body(correction.body)
    category = (
        None if correction.category is None else _enum(correction.category, Category, "category")
    )
    if correction.relationship_note is not None:
        try:
            validate_relationship_note(correction.relationship_note)
        except MultiActorRuleError:
            raise _invalid(
                "multiActor.relationshipNote", "max_length", "relationshipNote is at most 500."
            ) from None
    if all(
        value is None
        for value in (
            correction.body,
            correction.subject,
            correction.category,
            correction.relationship_note,
            correction.sensitive_interaction,
        )
    ):
        raise _invalid("body", "required", "Send at least one field to correct.")
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    _refuse_read_only(entry)
    if entry.actor_handle is None and (
        correction.relationship_note is not None or correction.sensitive_interaction
    ):
        raise _invalid(
            "multiActor", "no-actor", "This memory mentions nobody; there is no note to correct."
        )
    new_body = body if body is not None else entry.body
    new_category = category.value if category is not None else entry.category
    sensitive_interaction = (
        entry.sensitive_interaction
        if correction.sensitive_interaction is None
        else bool(correction.sensitive_interaction)
    )
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=AdapterScope(entry.adapter_scope),
        category=new_category,
        sensitive_interaction=sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.correct",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        # No text in the arguments: a held correction is not resumed from storage; the
        # caller repeats it with the approval id, and the fingerprint ties the two.
        arguments={"entryId": str(entry.entry_id), "bodyFingerprint": text_fingerprint(new_body)},
        attributes={
            "memoryGate": gate.as_attributes(),
            "previous_fingerprint": content_fingerprint(entry.body),
        },
        text=_screened_text(new_body, correction.relationship_note or ""),
        pending=decided,
        texts=screening.correct_texts(
            body=new_body,
            subject=correction.subject,
            relationship_note=correction.relationship_note,
        ),
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        fields: dict[str, Any] = {
            "body": new_body,
            "category": new_category,
            "subject": _subject(correction.subject, new_body)
            if correction.subject is not None or body is not None
            else entry.subject,
            "origin": Origin.USER_STATED.value,
            "sensitive_interaction": sensitive_interaction,
            "relationship_note": entry.relationship_note
            if correction.relationship_note is None
            else correction.relationship_note,
            "consents": _snapshot(consents, new_category),
        }
        unchanged = all(
            getattr(entry, name) == value for name, value in fields.items() if name != "consents"
        )
        if unchanged:
            return WriteOutcome("not-written", "unchanged", entry=entry)
        fields.update(_lifecycle_after(entry, fields))
        revision = _insert_revision(prev=entry, now=now, fields=fields)
        # A correction answers any open question about this memory.
        PendingConflict.objects.filter(entry_id=entry.entry_id, status="open").update(
            status=PendingConflict.Status.REPLACED, proposal={}, closed_at=now
        )
        return _written(
            principal,
            member,
            revision,
            reason="member-correction",
            action=AuditAction.MEMORY_ENTRY_CORRECTED,
        )


def memory_confirm(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member confirms an inference (spec: "explicit-promotion"): a draft becomes
    active, and any inferred origin becomes `user-confirmed`."""
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    gate, _ = _gate(
        principal=principal,
        member=member,
        adapter=AdapterScope(entry.adapter_scope),
        category=entry.category,
        sensitive_interaction=entry.sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.confirm",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        attributes={"memoryGate": gate.as_attributes()},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        decision = evaluate_promotion(
            requested=True, explicit=True, distinct_sessions=0, sensitive=gate.sensitive
        )
        origin = promoted_origin(decision, entry.origin)
        lifecycle = Lifecycle.ACTIVE if entry.lifecycle == Lifecycle.DRAFT else entry.lifecycle
        if origin.value == entry.origin and lifecycle == entry.lifecycle:
            return WriteOutcome("not-written", "already-confirmed", entry=entry)
        revision = _insert_revision(
            prev=entry, now=now, fields={"origin": origin.value, "lifecycle": lifecycle}
        )
        outcome = _written(
            principal,
            member,
            revision,
            reason=decision.reason.value,
            action=AuditAction.MEMORY_ENTRY_PROMOTED,
        )
        return _with_promotion(outcome, decision, 0)
