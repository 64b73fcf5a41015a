"""The deletion work of a data-rights request, its undo, its purge and its replay.

`run_deletion` (called by `dsar.work.process`) carries a delete request's payload through
the memory and consent services as Iris itself — a system principal named after the
request, so every audit event and side-effect row it leaves says which request did it —
and so through governance, the consent cascade and `continuation_tokens_forget`:

- **hard**: every entry with any revision in the named scope kinds or categories, with
  every entry derived from one (summaries), is hard-deleted, fifty source entries per call
  and transaction (`memory_hard_delete(entry_ids=…, include_derived=True)`, as the consent
  cascade does, so a source and its summaries always go together). Then the member's
  continuation tokens go, the consent ledger bodies of the named sensitive categories with
  `purgeConsentLedger`, the member's export bundles in the staging folder (they hold the
  same text) and this worker's recall snapshots. Each step selects from the stored state,
  so a worker killed mid-way is finished by the next run.
- **soft**: the same live entries are tombstoned (`memory_forget`, all at one moment,
  `grace_until - grace`); `grace_until` is set and the request waits (None) while the
  member can undo it (`data_rights_undo_delete`). After the window `soft_deletions_purge`
  (beat, `dsar.tasks.purge_soft_deletions`) — or `run_deletion` itself when the work is
  queued again — hard-deletes them as above and completes the request.

A legal hold stops both: `work.process` does not start a held request, the purge skips a
held member. `resultFingerprint` is the SHA-256 of the sorted set of deleted entry ids
(`_fingerprint_of`), read back from the audit events this request's principal left, so a
run that was resumed after a crash still counts every entry the first run removed.

Each erasure is appended to the erasure journal (`dsar.journal`) once it has committed,
and the whole set once more when the request completes; `erasures_reapply` (`manage.py
reapply_erasures`) deletes again what the journal names, after a backup restore.

Decisions: docs/decisions/data-rights.md, "Deletion".
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from consent.enums import category_consent_type, category_of_consent_type, is_sensitive
from consent.models import ConsentEventBody
from consent.services import consent_purge_categories
from dsar import journal
from dsar.enums import DeleteMode, RequestKind, RequestState
from dsar.models import DataRightsRequest, ExportBundle
from dsar.selectors import active_hold
from dsar.services import POLICY_ID, _append, _audit, _govern, _locked, _visible
from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import Conflict, Forbidden
from governance.models import AuditEvent, Tenant, User
from governance.pipeline import Effect, Hook, Operation, govern, record_pending
from governance.principal import Principal
from memory.continuity.models import ContinuationToken
from memory.continuity.services import continuation_tokens_forget
from memory.enums import Lifecycle
from memory.models import MemoryEntry
from memory.recall import snapshot as recall_snapshot
from memory.rules.retention import SOFT_DELETE_GRACE
from memory.selectors import derived_entry_ids
from memory.services import memory_forget, memory_hard_delete, memory_restore

log = logging.getLogger(__name__)

S = RequestState
REASON_CODE = "data-rights-erasure"
REAPPLY_REASON_CODE = "erasure-reapplied"
UNDO_REASON_CODE = "undone"
# Source entries per hard-delete call: one short transaction each, and an argument list
# the side-effect ledger can store (ids only, at most 4 KiB).
BATCH = 50
LIVE = (Lifecycle.DRAFT, Lifecycle.ACTIVE, Lifecycle.PAUSED)


def _fingerprint_of(entry_ids: Iterable[uuid.UUID | str]) -> str:
    """SHA-256 (hex) of the deleted entry ids: lower-case UUIDs, sorted, one per line."""
    ids = sorted({str(uuid.UUID(str(i))) for i in entry_ids})
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _principal(request: DataRightsRequest) -> Principal:
    return Principal.system(f"dsar-{request.id}", request.tenant_id)


def _grace(payload: dict[str, Any]) -> timedelta:
    """The undo window. The memory purge removes every tombstone's text after
    SOFT_DELETE_GRACE whoever forgot it, so a longer window could not be honoured."""
    asked = timedelta(milliseconds=int(payload.get("retentionGraceMs") or 0))
    return min(asked, SOFT_DELETE_GRACE)


def _is_soft(request: DataRightsRequest) -> bool:
    return request.payload.get("mode") == DeleteMode.SOFT


def _named(request: DataRightsRequest, member: User) -> QuerySet[MemoryEntry]:
    """Every revision of the member's memory that the payload names: any revision in one
    of its scope kinds or categories (a later correction does not move an entry out)."""
    payload = request.payload
    selection = Q(pk__in=[])
    if payload.get("scopes"):
        selection |= Q(scope_kind__in=payload["scopes"])
    if payload.get("categories"):
        selection |= Q(category__in=payload["categories"])
    return MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member).filter(selection)


def _with_derived(member: User, named: QuerySet[MemoryEntry]) -> set[uuid.UUID]:
    """The entry ids of `named` and of every summary that quotes one of them: a soft
    deletion hides them together (a hard one deletes them together), so no surface reads
    a deleted memory's text through its summary during the grace window."""
    ids = set(named.values_list("entry_id", flat=True))
    return ids | derived_entry_ids(member=member, sources=ids)


# --------------------------------------------------------------------------- the work


def run_deletion(request: DataRightsRequest) -> str | None:
    """The work of a verified delete request: the result fingerprint once everything named
    is gone, or None while a soft deletion waits out its grace window."""
    return _advance(request, now=timezone.now())


def _advance(request: DataRightsRequest, *, now: datetime) -> str | None:
    if _is_soft(request):
        if request.grace_until is None or now < request.grace_until:
            _soft_delete(request, now=now)
        if request.grace_until is not None and now < request.grace_until:
            return None
    return _erase(request, now=now)


def _soft_start(request: DataRightsRequest, now: datetime) -> datetime:
    """The moment the request tombstones at, kept as `grace_until - grace`: set once, so a
    resumed run tombstones at the same moment and the undo finds exactly its tombstones."""
    grace = _grace(request.payload)
    if request.grace_until is None:
        with transaction.atomic(durable=True):
            row = _locked(request.id, request.tenant_id)
            if row.grace_until is None:
                row.grace_until = now + grace
                row.updated_at = max(now, row.updated_at)
                row.save(update_fields=["grace_until", "updated_at"])
        request.grace_until = row.grace_until
    assert request.grace_until is not None
    return request.grace_until - grace


def _soft_delete(request: DataRightsRequest, *, now: datetime) -> None:
    member = request.member
    principal = _principal(request)
    start = _soft_start(request, now)
    # Entries the member writes after the request started are not part of it.
    named = _named(request, member).filter(created_at__lte=start)
    live = list(
        MemoryEntry.objects.filter(
            tenant_id=member.tenant_id,
            member=member,
            is_current=True,
            lifecycle__in=LIVE,
            entry_id__in=_with_derived(member, named),
            created_at__lte=start,
        )
        .order_by("entry_id")
        .values_list("entry_id", flat=True)
    )
    for entry_id in live:
        try:
            memory_forget(
                principal=principal,
                member=member,
                entry_id=entry_id,
                reason_code=REASON_CODE,
                now=start,
            )
        except Conflict:
            continue  # forgotten meanwhile: it is already what this step wants
    if live:
        with transaction.atomic(durable=True):
            _audit(
                principal,
                request,
                AuditAction.DSAR_DELETION_APPLIED,
                reason_code=REASON_CODE,
                payload={
                    "mode": DeleteMode.SOFT.value,
                    "entries": len(live),
                    "graceUntil": request.grace_until.isoformat() if request.grace_until else None,
                },
            )


def _erase(request: DataRightsRequest, *, now: datetime) -> str:
    """Remove for good what the request names; returns the result fingerprint."""
    member = request.member
    principal = _principal(request)
    named = _named(request, member)
    if _is_soft(request):
        # What the soft step tombstoned (and what was forgotten before it): not what the
        # member wrote or restored since.
        start = request.grace_until - _grace(request.payload) if request.grace_until else now
        named = named.filter(
            created_at__lte=start,
            entry_id__in=MemoryEntry.objects.filter(
                tenant_id=member.tenant_id,
                member=member,
                is_current=True,
                lifecycle=Lifecycle.TOMBSTONED,
            ).values("entry_id"),
        )
    entries = 0
    while True:
        sources = list(named.order_by("entry_id").values_list("entry_id", flat=True).distinct())
        sources = sources[:BATCH]
        if not sources:
            break
        result = memory_hard_delete(
            principal=principal,
            member=member,
            entry_ids=sources,
            include_derived=True,
            reason_code=REASON_CODE,
            now=now,
        )
        entries += len(result.entry_ids)
        _journal(request, journal.Kind.MEMORY_ENTRIES, result.entry_ids, now)
        if not result.entry_ids:
            break  # nothing it could delete: never spin
    tokens = _forget_tokens(request, principal, member, now)
    consent_events = _purge_consent(request, principal, member, now)
    bundles = _drop_export_files(request, principal, member, now)
    # This worker's snapshots may hold the deleted rows' terms and subjects; other workers
    # drop the rows at their next look and rebuild within IRIS_RECALL_SNAPSHOT_SECONDS.
    recall_snapshot.clear()
    deleted = _deleted_ids(request)
    with transaction.atomic(durable=True):
        _audit(
            principal,
            request,
            AuditAction.DSAR_DELETION_PURGED
            if _is_soft(request)
            else AuditAction.DSAR_DELETION_APPLIED,
            reason_code=REASON_CODE,
            payload={
                "mode": request.payload.get("mode"),
                "entries": len(deleted),
                "entriesThisRun": entries,
                "consentEvents": consent_events,
                "continuationTokens": tokens,
                "exportBundles": bundles,
            },
        )
    # The whole set once more: a line lost to a crash between a batch's commit and its
    # journal line is covered here.
    journal.append(
        [
            journal.Erasure(
                tenant_id=request.tenant_id,
                member_id=member.public_id,
                request_id=request.id,
                kind=journal.Kind.MEMORY_ENTRIES,
                ids=tuple(uuid.UUID(i) for i in sorted(deleted)),
                at=now,
            )
        ]
    )
    return _fingerprint_of(deleted)


def _deleted_ids(request: DataRightsRequest) -> set[str]:
    """Entry ids this request's principal forgot or hard-deleted, from the audit chain
    (written in the same transaction as each change, so nothing committed is missed)."""
    payloads = AuditEvent.objects.filter(
        tenant_id=request.tenant_id,
        actor_kind="system",
        actor_id=str(_principal(request).id),
        action__in=[AuditAction.MEMORY_ENTRY_HARD_DELETED, AuditAction.MEMORY_ENTRY_FORGOTTEN],
    ).values_list("payload", flat=True)
    return {str(p["entryId"]) for p in payloads if isinstance(p, dict) and p.get("entryId")}


def _journal(
    request: DataRightsRequest, kind: journal.Kind, ids: Iterable[uuid.UUID], now: datetime
) -> None:
    """Append one erasure after its commit. A journal that cannot be written does not
    undo the erasure; the completion line writes the whole set again (and fails loudly)."""
    try:
        journal.append(
            [
                journal.Erasure(
                    tenant_id=request.tenant_id,
                    member_id=request.member.public_id,
                    request_id=request.id,
                    kind=kind,
                    ids=tuple(ids),
                    at=now,
                )
            ]
        )
    except OSError:
        log.error("erasure journal not written", extra={"requestId": str(request.id)})


def _forget_tokens(
    request: DataRightsRequest, principal: Principal, member: User, now: datetime
) -> int:
    ids = list(
        ContinuationToken.objects.filter(tenant_id=member.tenant_id, member=member).values_list(
            "id", flat=True
        )
    )
    if not ids:
        return 0
    deleted = continuation_tokens_forget(principal=principal, member=member)
    gone = set(ids) - set(
        ContinuationToken.objects.filter(
            tenant_id=member.tenant_id, member=member, id__in=ids
        ).values_list("id", flat=True)
    )
    _journal(request, journal.Kind.CONTINUATION_TOKENS, sorted(gone), now)
    return deleted


def _purge_consent(
    request: DataRightsRequest, principal: Principal, member: User, now: datetime
) -> int:
    """With purgeConsentLedger, erase the consent bodies of the named sensitive categories
    (the others have no consent of their own)."""
    if not request.payload.get("purgeConsentLedger"):
        return 0
    categories = sorted(c for c in request.payload.get("categories") or () if is_sensitive(c))
    if not categories:
        return 0
    bodies = ConsentEventBody.objects.filter(
        tenant_id=member.tenant_id,
        event__member=member,
        consent_type__in=[category_consent_type(c) for c in categories],
    )
    ids = list(bodies.values_list("event_id", flat=True))
    if not ids:
        return 0
    erased = consent_purge_categories(principal=principal, member=member, categories=categories)
    still = set(
        ConsentEventBody.objects.filter(tenant_id=member.tenant_id, event_id__in=ids).values_list(
            "event_id", flat=True
        )
    )
    _journal(request, journal.Kind.CONSENT_EVENTS, sorted(set(ids) - still), now)
    return erased


def _drop_export_files(
    request: DataRightsRequest, principal: Principal, member: User, now: datetime
) -> int:
    """Delete the member's export bundles from the staging folder: they hold the text
    that was just deleted. The member can ask for a new export."""
    bundles = list(
        ExportBundle.objects.filter(
            tenant_id=member.tenant_id, request__member=member, deleted_at__isnull=True
        )
    )
    for bundle in bundles:
        if bundle.file_name:
            staged = Path(settings.IRIS_EXPORT_DIR) / Path(bundle.file_name).name
            staged.unlink(missing_ok=True)
            # A bundle being built writes next to its final name.
            for partial in staged.parent.glob(f"{staged.name}.*"):
                partial.unlink(missing_ok=True)
        with transaction.atomic(durable=True):
            ExportBundle.objects.filter(pk=bundle.pk, deleted_at__isnull=True).update(
                state=ExportBundle.State.EXPIRED, deleted_at=now
            )
            audit_record(
                actor=principal.actor,
                action=AuditAction.DSAR_EXPORT_EXPIRED,
                tenant_id=member.tenant_id,
                policy_id=POLICY_ID,
                reason_code=REASON_CODE,
                subject_ids=[member.public_id, bundle.request_id],
                payload={"requestId": str(bundle.request_id), "deletedBy": str(request.id)},
            )
    return len(bundles)


def _complete(request: DataRightsRequest, fingerprint: str, *, now: datetime) -> bool:
    with transaction.atomic(durable=True):
        row = _locked(request.id, request.tenant_id)
        if row.state != S.IN_PROGRESS:
            return False
        row.result_fingerprint = fingerprint
        _append(_principal(row), row, S.COMPLETED, now=now, reason_code=REASON_CODE)
    return True


# --------------------------------------------------------------------------- the purge


def soft_deletions_purge(*, tenant: Tenant, now: datetime | None = None, batch: int = 20) -> int:
    """Finish this tenant's soft deletions whose grace window has ended: hard-delete what
    they tombstoned and complete them. A member under a legal hold is skipped until it is
    lifted. Safe to run twice: a finished request is no longer in progress."""
    now = now or timezone.now()
    due = list(
        DataRightsRequest.objects.select_related("member")
        .filter(
            tenant_id=tenant.id,
            kind=RequestKind.DELETE,
            state=S.IN_PROGRESS,
            grace_until__lte=now,
        )
        .order_by("grace_until", "id")[:batch]
    )
    done = 0
    for request in due:
        if active_hold(request.member) is not None:
            continue
        fingerprint = _advance(request, now=now)
        if fingerprint is not None and _complete(request, fingerprint, now=now):
            done += 1
    return done


# --------------------------------------------------------------------------- undo


def data_rights_undo_delete(
    *,
    principal: Principal,
    member: User | None,
    request_id: uuid.UUID,
    now: datetime | None = None,
) -> DataRightsRequest:
    """Undo a soft deletion inside its grace window: the memory it tombstoned comes back
    (`memory_restore`) and the request completes with reason `undone` and the fingerprint
    of an empty deleted set. The member, or a surface acting for them.

    409 `deletion-not-started` before the work started (cancel it instead),
    `not-a-soft-delete` for a hard one, `undo-window-closed` once the window has passed or
    the request finished. A memory the member has since stored another value for stays
    forgotten (`restore-conflict`); the audit event counts it."""
    now = now or timezone.now()
    if principal.kind not in {"member", "surface"}:
        raise Forbidden(
            "Only the member undoes a deletion.",
            code="transition-not-permitted",
            field="requestId",
            rule="member-only",
        )
    request = _visible(principal, member, request_id)
    _check_undoable(request, now)
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.undo_delete",
        subject_ids=(str(request.id),),
        pending=decided,
    )
    owner = request.member
    start = request.grace_until - _grace(request.payload) if request.grace_until else now
    tombstoned = list(
        MemoryEntry.objects.filter(
            tenant_id=owner.tenant_id,
            member=owner,
            is_current=True,
            lifecycle=Lifecycle.TOMBSTONED,
            updated_at=start,
            entry_id__in=_with_derived(owner, _named(request, owner)),
        )
        .order_by("entry_id")
        .values_list("entry_id", flat=True)
    )
    restored = kept = 0
    for entry_id in tombstoned:
        try:
            memory_restore(
                principal=_principal(request),
                member=owner,
                entry_id=entry_id,
                reason_code="data-rights-undo",
                now=now,
            )
            restored += 1
        except Conflict:
            kept += 1
    with transaction.atomic(durable=True):
        record_pending(decided)
        request = _locked(request.id, request.tenant_id)
        _check_undoable(request, now)
        request.result_fingerprint = _fingerprint_of(())
        _append(principal, request, S.COMPLETED, now=now, reason_code=UNDO_REASON_CODE)
        _audit(
            principal,
            request,
            AuditAction.DSAR_DELETION_UNDONE,
            reason_code=UNDO_REASON_CODE,
            payload={"restored": restored, "keptForgotten": kept},
        )
    return request


def _check_undoable(request: DataRightsRequest, now: datetime) -> None:
    if request.kind != RequestKind.DELETE or not _is_soft(request):
        raise Conflict(
            "Only a soft deletion can be undone.",
            code="not-a-soft-delete",
            field="requestId",
            rule="soft-delete-only",
        )
    if request.state in (S.SUBMITTED, S.VERIFIED):
        raise Conflict(
            "This deletion has not started: cancel it instead.",
            code="deletion-not-started",
            field="requestId",
            rule="cancel-instead",
        )
    if request.state != S.IN_PROGRESS or request.grace_until is None or now >= request.grace_until:
        raise Conflict(
            "The grace window of this deletion has passed; it can no longer be undone.",
            code="undo-window-closed",
            field="requestId",
            rule="grace-window",
        )


# --------------------------------------------------------------------------- replay


@dataclass
class ReapplyReport:
    lines: int = 0
    refused: int = 0
    members_missing: int = 0
    entries: int = 0
    consent_events: int = 0
    consent_types_skipped: int = 0
    continuation_tokens: int = 0
    tenants: set[uuid.UUID] = field(default_factory=set)


def erasures_reapply(*, since: datetime | None = None) -> ReapplyReport:
    """Delete again everything the erasure journal says was erased (at or after `since`):
    after a database backup is restored, what was erased since the backup comes back, and
    this removes it. Lines whose signature fails are refused and counted. Idempotent: what
    is already gone is skipped.

    Consent bodies are erased by type, as the purge does; a type is skipped (and counted)
    when the restored ledger holds a body of it the journal does not name, i.e. consent
    given again after the erasure, which is not the erasure's to remove."""
    reading = journal.read(since=since)
    report = ReapplyReport(lines=len(reading.erasures), refused=reading.refused)
    by_member: dict[tuple[uuid.UUID, uuid.UUID], dict[journal.Kind, set[uuid.UUID]]] = {}
    for erasure in reading.erasures:
        kinds = by_member.setdefault((erasure.tenant_id, erasure.member_id), {})
        kinds.setdefault(erasure.kind, set()).update(erasure.ids)
    for (tenant_id, member_id), kinds in by_member.items():
        member = User.objects.filter(tenant_id=tenant_id, public_id=member_id).first()
        if member is None:
            report.members_missing += 1
            continue
        report.tenants.add(tenant_id)
        principal = Principal.system("dsar-reapply", tenant_id)
        report.entries += _reapply_entries(
            principal, member, kinds.get(journal.Kind.MEMORY_ENTRIES, set())
        )
        erased, skipped = _reapply_consent(
            principal, member, kinds.get(journal.Kind.CONSENT_EVENTS, set())
        )
        report.consent_events += erased
        report.consent_types_skipped += skipped
        tokens = kinds.get(journal.Kind.CONTINUATION_TOKENS, set())
        if (
            tokens
            and ContinuationToken.objects.filter(
                tenant_id=tenant_id, member=member, id__in=tokens
            ).exists()
        ):
            report.continuation_tokens += continuation_tokens_forget(
                principal=principal, member=member
            )
    recall_snapshot.clear()
    for tenant_id in sorted(report.tenants):
        principal = Principal.system("dsar-reapply", tenant_id)
        decided: list[dict[str, Any]] = []
        govern(
            Hook.PRE_WRITE,
            Operation(
                name="dsar.erasures_reapply",
                effect=Effect.WRITE,
                principal=principal,
                tenant_id=tenant_id,
            ),
            pending=decided,
        )
        with transaction.atomic(durable=True):
            record_pending(decided)
            audit_record(
                actor=principal.actor,
                action=AuditAction.DSAR_ERASURES_REAPPLIED,
                tenant_id=tenant_id,
                policy_id=POLICY_ID,
                reason_code=REAPPLY_REASON_CODE,
                payload={
                    "since": since.isoformat() if since else None,
                    "lines": report.lines,
                    "refusedLines": report.refused,
                    "entries": report.entries,
                    "consentEvents": report.consent_events,
                    "consentTypesSkipped": report.consent_types_skipped,
                    "continuationTokens": report.continuation_tokens,
                },
            )
    return report


def _reapply_entries(principal: Principal, member: User, ids: set[uuid.UUID]) -> int:
    if not ids:
        return 0
    present = sorted(
        set(
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id, member=member, entry_id__in=ids
            ).values_list("entry_id", flat=True)
        )
    )
    deleted = 0
    for start in range(0, len(present), BATCH):
        result = memory_hard_delete(
            principal=principal,
            member=member,
            entry_ids=present[start : start + BATCH],
            include_derived=True,
            reason_code=REAPPLY_REASON_CODE,
        )
        deleted += len(result.entry_ids)
    return deleted


def _reapply_consent(principal: Principal, member: User, ids: set[uuid.UUID]) -> tuple[int, int]:
    if not ids:
        return 0, 0
    bodies = ConsentEventBody.objects.filter(tenant_id=member.tenant_id, event__member=member)
    types = set(bodies.filter(event_id__in=ids).values_list("consent_type", flat=True))
    categories: list[str] = []
    skipped = 0
    for consent_type in sorted(types):
        category = category_of_consent_type(consent_type)
        newer = bodies.filter(consent_type=consent_type).exclude(event_id__in=ids).exists()
        if category is None or newer:
            skipped += 1
            continue
        categories.append(category.value)
    if not categories:
        return 0, skipped
    return consent_purge_categories(
        principal=principal, member=member, categories=categories
    ), skipped
