"""Forget, pause, resume and moving an entry between scopes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consent.enums import Category
from governance.actions import AuditAction
from governance.effects import run_destructive
from governance.errors import Conflict
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from memory import controls, selectors
from memory.enums import (
    CANONICAL_DEFAULT_ADAPTER,
    Lifecycle,
    Origin,
    ProvenanceKind,
    ScopeKind,
    SuppressionReason,
)
from memory.models import (
    SUPPRESSION_NOTES_MAX_LENGTH,
    ForgottenValue,
    MemoryEntry,
)
from memory.recall.pipeline import rfc3339
from memory.rules.promotion import (
    evaluate_promotion,
    promoted_origin,
)
from memory.rules.retention import soft_delete_purge_due
from memory.rules.scopes import check_scope_change
from memory.services.common import (
    _NO_SUPPRESSION,
    _aware,
    _carried,
    _current,
    _current_for_key,
    _enum,
    _gate,
    _govern,
    _insert_revision,
    _invalid,
    _lock_member,
    _operation,
    _readable_adapter_scopes,
    _refuse_read_only,
    _refuse_tombstoned,
    _relocked,
    _snapshot,
    _tombstone,
    _validated_scope,
    _written,
)
from memory.services.types import ClearResult, WriteOutcome

_LIVE = (Lifecycle.DRAFT, Lifecycle.ACTIVE, Lifecycle.PAUSED)

# The reason a summary is forgotten with the memory it quotes.
SOURCE_FORGOTTEN = "source-forgotten"


def memory_forget(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    reason_code: str = "member-request",
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> MemoryEntry:
    """Forget one memory: a terminal tombstone revision (spec: "Forget flow").

    Open questions about it and its inference counts go now, with any stored API answer
    that quoted it, and the summaries that quote it are forgotten with it; the text of its
    revisions stays only for the soft-delete grace window
    (`memory.rules.retention.SOFT_DELETE_GRACE`), after which the purge job hard-deletes the
    rows (`memory_hard_delete`). Surfaces no longer see it at all; the member sees it as
    forgotten until the purge. A value forgotten here is never silently re-created.
    """
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.forget",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id), "reasonCode": reason_code},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        tombstone = _tombstone(principal, member, entry, now=now, reason_code=reason_code)
        # Deletions propagate (spec: "tombstoned … and propagated"): a summary that quotes
        # the forgotten memory is forgotten with it, so no surface recalls the text through
        # it during the grace window; the purge then removes both.
        derived = selectors.derived_entry_ids(member=member, sources={entry.entry_id})
        for quoting in (
            MemoryEntry.objects.select_for_update()
            .filter(
                tenant_id=member.tenant_id,
                member=member,
                entry_id__in=derived,
                is_current=True,
                lifecycle__in=(Lifecycle.DRAFT, Lifecycle.ACTIVE, Lifecycle.PAUSED),
            )
            .order_by("entry_id")
        ):
            _tombstone(principal, member, quoting, now=now, reason_code=SOURCE_FORGOTTEN)
        return tombstone


def memory_clear(
    *,
    principal: Principal,
    member: User,
    category: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> ClearResult:
    """Forget every memory in one category, or (no category) everything: the spec's
    per-category and full-memory clear. Each live entry gets a tombstone as `memory_forget`
    gives it, all at one moment, so each can be restored (`memory_restore`) until the
    soft-delete grace window ends, after which the purge job erases them.

    Destructive: governed at `pre_destructive`, so a member's call waits for the member's
    own approval (`memory.clear_category` / `memory.clear_all`, resumable from the category
    alone) and runs behind its side-effect ledger row. Each tombstone is audited with the
    reason `member-clear-category` or `member-clear-all`; nothing is forgotten twice.
    """
    if category is not None:
        category = _enum(category, Category, "category").value
    op = _operation(
        name="memory.clear_all" if category is None else "memory.clear_category",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        member=member,
        context=context,
        arguments={"category": category},
    )
    reason_code = "member-clear-category" if category else "member-clear-all"
    return run_destructive(
        op, _clear, principal, member, category, reason_code, now or timezone.now()
    )


def _clear(
    principal: Principal, member: User, category: str | None, reason_code: str, now: datetime
) -> ClearResult:
    with transaction.atomic(durable=True):
        _lock_member(member)
        rows = selectors.actionable_entries(principal, member).filter(
            is_current=True, lifecycle__in=_LIVE
        )
        if category is not None:
            rows = rows.filter(category=category)
        forgotten = [
            _tombstone(principal, member, entry, now=now, reason_code=reason_code).entry_id
            for entry in rows.select_for_update().order_by("entry_id")
        ]
    return ClearResult(entry_ids=tuple(forgotten), category=category, forgotten_at=now)


def memory_restore(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    reason_code: str = "member-request",
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> MemoryEntry:
    """Bring a forgotten memory back while its text is still kept: the undo of a soft
    deletion (docs/decisions/data-rights.md, "Deletion"), never after the soft-delete grace
    window. A new revision after the tombstone, so the history keeps both: the memory was
    forgotten, then restored at the member's word.

    The restored revision is paused when it was paused (its suppression was carried onto
    the tombstone), a draft when it is a model inference (the tombstone no longer says
    whether it had been promoted, so it waits for the member's confirmation rather than
    being recalled unconfirmed), active otherwise. The value fingerprints its forget
    recorded go, so it is not treated as forgotten any more. 409 `not-forgotten` for a
    memory that is not tombstoned, `grace-window-passed` once the purge is due, and
    `restore-conflict` when the member has since stored another value for the same fact.
    """
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_not_restorable(entry, now)
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.restore",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id), "reasonCode": reason_code},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        _lock_member(member)
        entry = _current(principal, member, entry.entry_id)
        _refuse_not_restorable(entry, now)
        clash = _current_for_key(
            member,
            entry.scope_key,
            entry.category,
            entry.actor_handle,
            entry.subject,
            adapter_scopes=None,
        )
        if clash is not None and clash.entry_id != entry.entry_id:
            raise Conflict(
                "Another memory now holds this fact; correct or forget it first.",
                code="restore-conflict",
                extra={"conflictingEntryId": str(clash.entry_id)},
            )
        if entry.suppression_reason == SuppressionReason.USER_PAUSE:
            lifecycle = Lifecycle.PAUSED
        elif entry.origin == Origin.MODEL_INFERRED:
            lifecycle = Lifecycle.DRAFT
        else:
            lifecycle = Lifecycle.ACTIVE
        revision = _insert_revision(prev=entry, now=now, fields={"lifecycle": lifecycle})
        # What the forget recorded (same entry, same moment) so that nothing re-created it.
        ForgottenValue.objects.filter(
            tenant_id=member.tenant_id,
            member=member,
            entry_id=entry.entry_id,
            reason=ForgottenValue.Reason.FORGOTTEN,
            created_at=entry.updated_at,
        ).delete()
        _written(
            principal,
            member,
            revision,
            reason=reason_code,
            action=AuditAction.MEMORY_ENTRY_RESTORED,
        )
        return revision


def _refuse_not_restorable(entry: MemoryEntry, now: datetime) -> None:
    if entry.lifecycle != Lifecycle.TOMBSTONED:
        raise Conflict("Only a forgotten memory can be restored.", code="not-forgotten")
    if soft_delete_purge_due(entry.updated_at, now):
        raise Conflict(
            "This memory's grace window has passed; it cannot be restored.",
            code="grace-window-passed",
        )


def memory_pause(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    ends_at: datetime | None = None,
    notes: str = "",
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Pause a memory (suppression `user-pause`): kept, but never recalled until resumed
    or until `ends_at`. Only an active memory pauses; pausing a paused one changes nothing."""
    now = now or timezone.now()
    if ends_at is not None and _aware(ends_at, "endsAt") <= now:
        raise _invalid("endsAt", "not-in-future", "endsAt must be in the future.")
    if len(notes) > SUPPRESSION_NOTES_MAX_LENGTH:
        raise _invalid("notes", "max_length", "notes must be at most 500 characters.")
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.pause",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        text=notes or None,
        pending=decided,
        texts={"notes": notes},
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        if entry.lifecycle == Lifecycle.PAUSED:
            return WriteOutcome("not-written", "already-paused", entry=entry)
        if entry.lifecycle != Lifecycle.ACTIVE:
            raise Conflict("Only an active memory can be paused.", code="not-active")
        revision = _insert_revision(
            prev=entry,
            now=now,
            fields={
                "lifecycle": Lifecycle.PAUSED,
                "suppression_reason": SuppressionReason.USER_PAUSE.value,
                "suppression_started_at": now,
                "suppression_ends_at": ends_at,
                "suppression_notes": notes,
                "suppression_set_by": controls.lifter_of(principal),
            },
        )
        return _written(
            principal, member, revision, reason="user-pause", action=AuditAction.MEMORY_ENTRY_PAUSED
        )


def memory_resume(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Lift a pause: the memory is active again, without suppression.

    The member lifts any pause on their memory; a surface only one it set itself
    (`memory.controls`: refused 403, on record as a deny)."""
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    attributes: dict[str, Any] = {}
    if entry.lifecycle == Lifecycle.PAUSED:
        attributes[controls.SET_BY_ATTRIBUTE] = entry.suppression_set_by
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.resume",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        attributes=attributes,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        if entry.lifecycle == Lifecycle.ACTIVE:
            return WriteOutcome("not-written", "not-paused", entry=entry)
        if entry.lifecycle != Lifecycle.PAUSED:
            raise Conflict("Only a paused memory can be resumed.", code="not-paused")
        # Paused again by someone else since governance read it: the same refusal.
        reason = controls.refusal(entry.suppression_set_by, principal)
        if reason is not None:
            raise controls.refused(reason)
        revision = _insert_revision(
            prev=entry,
            now=now,
            fields={"lifecycle": Lifecycle.ACTIVE, **_NO_SUPPRESSION, "suppression_set_by": None},
        )
        reason_code = "user-resume" if principal.kind == "member" else f"{principal.kind}-resume"
        return _written(
            principal, member, revision, reason=reason_code, action=AuditAction.MEMORY_ENTRY_RESUMED
        )


def memory_change_scope(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    scope_kind: str,
    scope_identifiers: Mapping[str, Any],
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Move a memory to another scope at the member's request (`memory.rules.scopes`).

    session → profile is an explicit promotion (an inference becomes `user-confirmed`, a
    draft active, with a `profile-promotion` provenance link); session → notebook and
    profile → notebook move the entry (a new revision in the new scope). tenant →
    notebook leaves the tenant row alone and writes the member a read-only copy (a new
    entry). Anything else is 409 with the rule's reason code; a different fact with the
    same conflict key already in the target scope is 409 `scope-change-conflict`.
    """
    now = now or timezone.now()
    target_kind, identifiers, key = _validated_scope(member, scope_kind, scope_identifiers)
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    _refuse_read_only(entry)
    change = check_scope_change(entry.scope_kind, target_kind)
    if not change.allowed:
        raise Conflict(
            "This memory cannot move to that scope.",
            code=change.reason_code,
            field="scope.kind",
            rule=change.reason_code,
        )
    adapter = CANONICAL_DEFAULT_ADAPTER[target_kind]
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=adapter,
        category=entry.category,
        sensitive_interaction=entry.sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.change_scope",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={
            "entryId": str(entry.entry_id),
            "from": entry.scope_kind,
            "to": target_kind.value,
            "reasonCode": change.reason_code,
        },
        attributes={
            "memoryGate": gate.as_attributes(),
        },
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        clash = _current_for_key(
            member,
            key,
            entry.category,
            entry.actor_handle,
            entry.subject,
            adapter_scopes=_readable_adapter_scopes(principal),
        )
        if clash is not None and clash.entry_id != entry.entry_id:
            raise Conflict(
                "The target scope already holds a memory about this; correct or forget one.",
                code="scope-change-conflict",
                extra={"conflictingEntryId": str(clash.entry_id)},
            )
        scope_fields = {
            "scope_kind": target_kind.value,
            "scope_key": key,
            "scope_identifiers": identifiers,
            "adapter_scope": adapter.value,
            "consents": _snapshot(consents, entry.category),
        }
        link = None
        if change.copy:
            link = {
                "kind": ProvenanceKind.NOTEBOOK_ATTACHMENT.value,
                "ref": str(entry.revision_id),
                "capturedAt": rfc3339(now),
            }
            values = _carried(entry)
            values.update(scope_fields)
            values.update(
                {
                    "lifecycle": Lifecycle.ACTIVE,
                    "read_only_copy_of": entry.entry_id,
                    "provenance_chain": [*entry.provenance_chain, link],
                    "reference_count": 0,
                    "last_referenced_at": None,
                    **_NO_SUPPRESSION,
                }
            )
            copy = _insert_revision(prev=None, now=now, fields=values)
            return _written(
                principal,
                member,
                copy,
                reason=change.reason_code,
                action=AuditAction.MEMORY_ENTRY_SCOPE_CHANGED,
                sourceEntryId=str(entry.entry_id),
            )
        fields = dict(scope_fields)
        promotion = None
        if target_kind is ScopeKind.PROFILE:
            promotion = evaluate_promotion(
                requested=True, explicit=True, distinct_sessions=0, sensitive=gate.sensitive
            )
            fields["origin"] = promoted_origin(promotion, entry.origin).value
            fields["provenance_chain"] = [
                *entry.provenance_chain,
                {
                    "kind": ProvenanceKind.PROFILE_PROMOTION.value,
                    "ref": str(entry.revision_id),
                    "capturedAt": rfc3339(now),
                },
            ]
            if entry.lifecycle == Lifecycle.DRAFT:
                fields["lifecycle"] = Lifecycle.ACTIVE
        revision = _insert_revision(prev=entry, now=now, fields=fields)
        extra: dict[str, Any] = {"fromScopeKind": entry.scope_kind}
        if promotion is not None:
            extra["promotionReason"] = promotion.reason.value
        return _written(
            principal,
            member,
            revision,
            reason=change.reason_code,
            action=AuditAction.MEMORY_ENTRY_SCOPE_CHANGED,
            **extra,
        )
