"""Memory's background jobs: the revocation cascade, retention, purge, decay and expiry.

Each job works on ONE tenant and at most `batch` items per run, records a
`governance.JobRun` with its counts, and decides what is due from the stored state alone
(never from a previous run's memory). So a run killed mid-batch is finished by the next
run, and a run repeated on an unchanged state changes nothing: each item is handled by
one service call in its own transaction, and the next run's selection no longer contains
what the killed run already handled.

Writes go through `memory.services` with a system principal (`Principal.system`), so the
governance kernel decides and audits them like any other call (DESIGN invariant 8); the
one write of its own, the retention review flag, asks the kernel itself. The rules of what
is due live in the pure module `memory.rules.retention`; this module only selects
candidates, asks those rules, and calls the services. The decisions are written up in
docs/decisions/memory.md ("Jobs").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from consent.enums import AdapterScope, ConsentType
from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import Conflict, NotFound
from governance.models import JobRun, User
from governance.pipeline import Denied, Effect, Hook, Operation, govern, record_pending
from governance.principal import Principal
from memory.enums import Lifecycle, Origin, ProvenanceKind
from memory.models import MemoryEntry
from memory.rules.retention import (
    DECAY_HALF_LIFE,
    INFERRED_ORIGINS,
    RETENTION_ENVELOPES,
    SOFT_DELETE_GRACE,
    STALE_INFERENCE_THRESHOLD,
    RetentionAction,
    is_stale_inference,
    retention_action,
)
from memory.selectors import forgotten_entries_due
from memory.services import (
    MemoryDraft,
    ProvenanceRef,
    memory_forget,
    memory_hard_delete,
    memory_write,
    pending_conflicts_expire,
)

DEFAULT_BATCH = 200
# The cascade deletes this many source entries (with everything derived from them) per
# transaction: small enough to keep each lock short, large enough to finish quickly.
CASCADE_BATCH = 50
# A summary may cite at most this many revisions (the service's provenance limit).
SUMMARY_MAX_SOURCES = 50
SUMMARY_MAX_CHARS = 4000
SUMMARY_SEPARATOR = " · "
REVIEW_ACTION = AuditAction.MEMORY_ENTRY_RETENTION_REVIEW_FLAGGED
CASCADE_ACTION = AuditAction.MEMORY_CONSENT_CASCADE_COMPLETED
POLICY_ID = "iris-memory-jobs-v1"

# Lifecycles a job may still act on; tombstoned entries belong to the purge.
LIVE = (Lifecycle.DRAFT, Lifecycle.ACTIVE, Lifecycle.PAUSED)


def _system(job: str, tenant_id: uuid.UUID) -> Principal:
    return Principal.system(f"memory-{job}", tenant_id)


def _record(job: str, tenant_id: uuid.UUID | None, body: Callable[[], dict[str, int]]) -> JobRun:
    """Run `body` and keep its counts in a JobRun row (status `failed` if it raised).

    The row is written in its own short transactions (not the work's), so a crash still
    leaves a `running` or `failed` row behind for the operator."""
    run = JobRun.objects.create(
        job=job, tenant_id=tenant_id, started_at=timezone.now(), status="running"
    )
    try:
        counts = body()
    except BaseException:
        JobRun.objects.filter(pk=run.pk).update(status="failed", finished_at=timezone.now())
        raise
    run.counts = counts
    run.status = "done"
    run.finished_at = timezone.now()
    run.save(update_fields=["counts", "status", "finished_at"])
    return run


def _members(tenant_id: uuid.UUID, member_ids: Iterable[int]) -> dict[int, User]:
    return {u.pk: u for u in User.objects.filter(tenant_id=tenant_id, pk__in=set(member_ids))}


# ----------------------------------------------------------------- revocation cascade


def _cascade_sources(
    member: User, categories: Iterable[str], sensitive_interactions: bool, limit: int
) -> list[uuid.UUID]:
    """Entries that must go because of the revocation: any revision in a revoked
    category, or (multi-actor consent) any revision recording a sensitive interaction."""
    selection = Q(category__in=list(categories))
    if sensitive_interactions:
        selection |= Q(sensitive_interaction=True)
    return list(
        MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member)
        .filter(selection)
        .order_by("entry_id")
        .values_list("entry_id", flat=True)
        .distinct()[:limit]
    )


def consent_revocation_cascade(
    *,
    tenant_id: uuid.UUID | str,
    member_id: int,
    consent_type: str,
    categories: Iterable[str],
    event_id: uuid.UUID | str,
    batch: int = CASCADE_BATCH,
    now: datetime | None = None,
) -> JobRun:
    """Hard-delete every memory the revoked consent covered, with every revision and
    every summary derived from it (DESIGN invariant 7, issue 4 item 8).

    The service is called with explicit entry ids, a batch of source entries at a time,
    and `include_derived=True`, so a source and the summaries made from it always go in
    the same transaction. (Its `category=…, limit=…` form would split a source from its
    summaries across batches; a crash between them would orphan the summary, which no
    later batch would find again by category.)
    """
    tenant = uuid.UUID(str(tenant_id))
    categories = sorted({str(c) for c in categories})
    sensitive_interactions = consent_type == ConsentType.MULTI_ACTOR_SENSITIVE.value

    def body() -> dict[str, int]:
        counts = {"entries": 0, "revisions": 0, "batches": 0}
        member = User.objects.filter(tenant_id=tenant, pk=member_id).first()
        if member is None or not (categories or sensitive_interactions):
            return counts
        principal = _system("cascade", tenant)
        while True:
            sources = _cascade_sources(member, categories, sensitive_interactions, batch)
            if not sources:
                break
            result = memory_hard_delete(
                principal=principal,
                member=member,
                entry_ids=sources,
                include_derived=True,
                reason_code="consent-revoked",
                now=now,
            )
            counts["batches"] += 1
            counts["entries"] += len(result.entry_ids)
            counts["revisions"] += result.revision_count
        if counts["entries"]:
            with transaction.atomic(durable=True):
                audit_record(
                    actor=principal.actor,
                    action=CASCADE_ACTION,
                    tenant_id=tenant,
                    policy_id=POLICY_ID,
                    reason_code="consent-revoked",
                    subject_ids=[member.public_id, event_id],
                    payload={"entries": counts["entries"], "revisions": counts["revisions"]},
                )
        return counts

    return _record("revocation-cascade", tenant, body)


# -------------------------------------------------------------------------- retention


def _is_summary(entry: MemoryEntry) -> bool:
    return entry.origin == Origin.SUMMARIZED_FROM_SESSION


def _retention_due(tenant_id: uuid.UUID, now: datetime) -> QuerySet[MemoryEntry]:
    """Current, live entries old enough that their envelope may want something done."""
    due = Q(pk__in=[])
    for scope, envelope in RETENTION_ENVELOPES.items():
        if envelope.raw is not None and envelope.at_expiry is RetentionAction.REVIEW:
            # Queued once; a person's answer (any new revision) restarts the clock, so
            # an entry the member just confirmed is not queued again the same night.
            due |= Q(
                adapter_scope=scope.value,
                created_at__lte=now - envelope.raw,
                updated_at__lte=now - envelope.raw,
                retention_review_flagged_at__isnull=True,
            ) & ~Q(origin=Origin.SUMMARIZED_FROM_SESSION)
        elif envelope.raw is not None and envelope.at_expiry is not RetentionAction.KEEP:
            due |= Q(adapter_scope=scope.value, created_at__lte=now - envelope.raw) & ~Q(
                origin=Origin.SUMMARIZED_FROM_SESSION
            )
        if envelope.summarized is not None:
            due |= Q(
                adapter_scope=scope.value,
                origin=Origin.SUMMARIZED_FROM_SESSION,
                created_at__lte=now - envelope.summarized,
            )
    rows = MemoryEntry.objects.filter(tenant_id=tenant_id, is_current=True, lifecycle__in=LIVE)
    return rows.filter(due)


def extractive_summary(bodies: Iterable[str]) -> str:
    """The summary text: the summarised bodies joined in time order, cut to the body limit.

    Deliberately extractive and deterministic (no model): it only ever shortens what the
    member already has, so it adds no new claim, and a rerun produces the same text."""
    text = SUMMARY_SEPARATOR.join(" ".join(b.split()) for b in bodies)
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    return text


def _summarised_refs(member: User, scope_key: str) -> set[str]:
    """Revision ids already cited by a summary in this scope: the raw entry was summarised
    by a run that died before it removed the raw text."""
    refs: set[str] = set()
    for chain in MemoryEntry.objects.filter(
        tenant_id=member.tenant_id,
        member=member,
        scope_key=scope_key,
        is_current=True,
        origin=Origin.SUMMARIZED_FROM_SESSION,
    ).values_list("provenance_chain", flat=True):
        refs.update(
            str(link.get("ref"))
            for link in chain or ()
            if isinstance(link, dict) and link.get("kind") == ProvenanceKind.SESSION_SUMMARY
        )
    return refs


def _summarise(
    principal: Principal, member: User, raws: list[MemoryEntry], now: datetime
) -> tuple[int, int]:
    """One rolling summary for raw entries of one scope key and category, then the raw
    rows go (hard delete, without their derived entries: the summary is their successor).
    Returns (summaries written, raw entries removed)."""
    already = _summarised_refs(member, raws[0].scope_key)
    fresh = [r for r in raws if str(r.revision_id) not in already]
    written = 0
    if fresh:
        first = fresh[0]
        draft = MemoryDraft(
            scope_kind=first.scope_kind,
            scope_identifiers=dict(first.scope_identifiers),
            adapter_scope=first.adapter_scope,
            category=first.category,
            body=extractive_summary(r.body for r in fresh),
            # A subject of its own: a summary never contends with a memory in the
            # conflict ladder.
            subject=f"session-summary {first.revision_id}",
            origin=Origin.SUMMARIZED_FROM_SESSION.value,
            provenance_chain=[
                ProvenanceRef(ProvenanceKind.SESSION_SUMMARY.value, str(r.revision_id), now)
                for r in fresh
            ],
        )
        try:
            outcome = memory_write(principal=principal, member=member, draft=draft, now=now)
            written = int(outcome.written)
        except Denied:
            # The member switched the scope off or withdrew consent since: the raw
            # text's lifetime is over all the same, so it goes without a summary.
            written = 0
    result = memory_hard_delete(
        principal=principal,
        member=member,
        entry_ids=[r.entry_id for r in raws],
        include_derived=False,
        reason_code="retention-summarized",
        now=now,
    )
    return written, len(result.entry_ids)


def _flag_for_review(principal: Principal, member: User, entry: MemoryEntry, now: datetime) -> bool:
    """Queue one entry for a person's review: the flag on its current revision, and the
    audit event that records it (the event is the record, never read back as state).
    False when the entry changed since it was selected: the new revision is due afresh."""
    op = Operation(
        name="memory.retention_review_flag",
        effect=Effect.WRITE,
        principal=principal,
        tenant_id=entry.tenant_id,
        member_id=member.public_id,
        subject_ids=(str(entry.entry_id), str(entry.revision_id)),
        attributes={"adapterScope": entry.adapter_scope},
    )
    pending: list[dict[str, Any]] = []
    govern(Hook.PRE_WRITE, op, pending=pending)
    with transaction.atomic(durable=True):
        record_pending(pending)
        flagged = MemoryEntry.objects.filter(
            pk=entry.pk, is_current=True, retention_review_flagged_at__isnull=True
        ).update(retention_review_flagged_at=now)
        if not flagged:
            return False
        audit_record(
            actor=principal.actor,
            action=REVIEW_ACTION,
            tenant_id=entry.tenant_id,
            policy_id=POLICY_ID,
            reason_code="retention-envelope-expired",
            subject_ids=[entry.entry_id, entry.revision_id],
            payload={"entryId": str(entry.entry_id), "adapterScope": entry.adapter_scope},
            occurred_at=now,
        )
    return True


def retention_pending(tenant_id: uuid.UUID, now: datetime) -> int:
    return _retention_due(tenant_id, now).count()


def retention_run(
    *, tenant_id: uuid.UUID, batch: int = DEFAULT_BATCH, now: datetime | None = None
) -> JobRun:
    """Apply the retention envelopes to at most `batch` due entries of one tenant.

    Raw memory past its raw lifetime is summarised, purged or flagged for review as its
    envelope says; a summary past its summarised lifetime is purged."""
    now = now or timezone.now()
    principal = _system("retention", tenant_id)

    def body() -> dict[str, int]:
        counts = {"scanned": 0, "summarized": 0, "summaries": 0, "purged": 0, "flagged": 0}
        rows = list(_retention_due(tenant_id, now).order_by("created_at", "entry_id")[:batch])
        counts["scanned"] = len(rows)
        members = _members(tenant_id, (r.member_id for r in rows))
        groups: dict[tuple[int, str, str], list[MemoryEntry]] = {}
        for entry in rows:
            member = members[entry.member_id]
            action = retention_action(
                AdapterScope(entry.adapter_scope), entry.created_at, now, _is_summary(entry)
            )
            if action is RetentionAction.SUMMARIZE and entry.actor_handle is None:
                key = (entry.member_id, entry.scope_key, entry.category)
                groups.setdefault(key, []).append(entry)
            elif action in (RetentionAction.PURGE, RetentionAction.SUMMARIZE):
                # Multi-actor memory is not folded into a summary that would no longer
                # carry its handle (and so escape "forget all mentions"): it is purged.
                result = memory_hard_delete(
                    principal=principal,
                    member=member,
                    entry_ids=[entry.entry_id],
                    include_derived=True,
                    reason_code="retention-expired",
                    now=now,
                )
                counts["purged"] += len(result.entry_ids)
            elif action is RetentionAction.REVIEW:
                counts["flagged"] += int(_flag_for_review(principal, member, entry, now))
        for (member_id, _scope_key, _category), raws in groups.items():
            for start in range(0, len(raws), SUMMARY_MAX_SOURCES):
                written, removed = _summarise(
                    principal, members[member_id], raws[start : start + SUMMARY_MAX_SOURCES], now
                )
                counts["summaries"] += written
                counts["summarized"] += removed
        counts["remaining"] = retention_pending(tenant_id, now)
        return counts

    return _record("retention", tenant_id, body)


# ------------------------------------------------------------------------------ purge


def purge_pending(tenant_id: uuid.UUID, now: datetime) -> int:
    return len(forgotten_entries_due(tenant_id=tenant_id, before=now - SOFT_DELETE_GRACE))


def purge_run(
    *, tenant_id: uuid.UUID, batch: int = DEFAULT_BATCH, now: datetime | None = None
) -> JobRun:
    """Hard-delete forgotten entries whose soft-delete grace window has passed, with every
    revision and every summary derived from them (DESIGN invariant 7)."""
    now = now or timezone.now()
    principal = _system("purge", tenant_id)

    def body() -> dict[str, int]:
        counts = {"entries": 0, "revisions": 0}
        due = forgotten_entries_due(
            tenant_id=tenant_id, before=now - SOFT_DELETE_GRACE, limit=batch
        )
        by_member: dict[int, list[uuid.UUID]] = {}
        for member_id, entry_id in due:
            by_member.setdefault(member_id, []).append(entry_id)
        members = _members(tenant_id, by_member)
        for member_id, entry_ids in by_member.items():
            try:
                result = memory_hard_delete(
                    principal=principal,
                    member=members[member_id],
                    entry_ids=entry_ids,
                    include_derived=True,
                    reason_code="soft-delete-grace-expired",
                    now=now,
                )
            except Denied:
                # A check held this member's deletion back (a legal hold): their
                # entries wait, the others go on.
                counts["held"] = counts.get("held", 0) + 1
                continue
            counts["entries"] += len(result.entry_ids)
            counts["revisions"] += result.revision_count
        counts["remaining"] = purge_pending(tenant_id, now)
        return counts

    return _record("purge", tenant_id, body)


# ------------------------------------------------------------------------------ decay

# No inference is stale younger than this, so the database can narrow the scan: usage
# weight is recency (2**-n after n half-lives) times 1..2, so it falls below 0.1 at the
# earliest for a never-used memory, after log2(10) ≈ 3.32 half-lives. 3.3 stays below.
_EARLIEST_STALE = DECAY_HALF_LIFE * 3.3


def _decay_candidates(tenant_id: uuid.UUID, now: datetime) -> QuerySet[MemoryEntry]:
    assert STALE_INFERENCE_THRESHOLD >= 0.1  # the bound above assumes this threshold
    cutoff = now - _EARLIEST_STALE
    return MemoryEntry.objects.filter(
        tenant_id=tenant_id,
        is_current=True,
        lifecycle__in=LIVE,
        origin__in=[o.value for o in INFERRED_ORIGINS],
    ).filter(
        Q(last_referenced_at__lte=cutoff)
        | Q(last_referenced_at__isnull=True, updated_at__lte=cutoff)
    )


def _stale(tenant_id: uuid.UUID, now: datetime, limit: int | None) -> list[MemoryEntry]:
    found: list[MemoryEntry] = []
    for entry in _decay_candidates(tenant_id, now).order_by("updated_at", "entry_id").iterator():
        if is_stale_inference(
            now,
            origin=entry.origin,
            last_referenced_at=entry.last_referenced_at,
            updated_at=entry.updated_at,
            reference_count=entry.reference_count,
        ):
            found.append(entry)
            if limit is not None and len(found) >= limit:
                break
    return found


def decay_pending(tenant_id: uuid.UUID, now: datetime) -> int:
    return len(_stale(tenant_id, now, None))


def decay_run(
    *, tenant_id: uuid.UUID, batch: int = DEFAULT_BATCH, now: datetime | None = None
) -> JobRun:
    """Retire (tombstone, reason `stale-inference`) unconfirmed inferences whose
    usage-weighted recency fell below the threshold. The purge removes their text after
    the grace window like any forgotten memory."""
    now = now or timezone.now()
    principal = _system("decay", tenant_id)

    def body() -> dict[str, int]:
        stale = _stale(tenant_id, now, batch)
        members = _members(tenant_id, (e.member_id for e in stale))
        retired = 0
        for entry in stale:
            try:
                memory_forget(
                    principal=principal,
                    member=members[entry.member_id],
                    entry_id=entry.entry_id,
                    reason_code="stale-inference",
                    now=now,
                )
                retired += 1
            except (Conflict, NotFound):
                # Forgotten or deleted in the meantime: nothing left to retire.
                continue
        return {"retired": retired, "remaining": decay_pending(tenant_id, now)}

    return _record("decay", tenant_id, body)


# ----------------------------------------------------------------------------- expire


def expire_pending(tenant_id: uuid.UUID, now: datetime) -> int:
    from memory.models import PendingConflict

    return PendingConflict.objects.filter(
        tenant_id=tenant_id, status=PendingConflict.Status.OPEN, expires_at__lte=now
    ).count()


def expire_run(
    *, tenant_id: uuid.UUID, batch: int = DEFAULT_BATCH, now: datetime | None = None
) -> JobRun:
    """Close conflict questions the member left unanswered past their expiry."""
    now = now or timezone.now()

    def body() -> dict[str, int]:
        closed = pending_conflicts_expire(
            principal=_system("expire", tenant_id), tenant_id=tenant_id, now=now, batch=batch
        )
        return {"expired": closed, "remaining": expire_pending(tenant_id, now)}

    return _record("expire", tenant_id, body)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Job:
    name: str
    run: Callable[..., JobRun]
    pending: Callable[[uuid.UUID, datetime], int]
    # The count in a run's `counts` that says how many due items the run handled.
    progress_keys: tuple[str, ...]


JOBS: Mapping[str, Job] = {
    job.name: job
    for job in (
        Job("retention", retention_run, retention_pending, ("summarized", "purged", "flagged")),
        Job("purge", purge_run, purge_pending, ("entries",)),
        Job("decay", decay_run, decay_pending, ("retired",)),
        Job("expire", expire_run, expire_pending, ("expired",)),
    )
}


def handled(job: Job, run: JobRun) -> int:
    counts: Mapping[str, Any] = run.counts or {}
    return sum(int(counts.get(key, 0)) for key in job.progress_keys)


__all__ = [
    "CASCADE_BATCH",
    "DEFAULT_BATCH",
    "JOBS",
    "Job",
    "consent_revocation_cascade",
    "decay_run",
    "expire_run",
    "extractive_summary",
    "handled",
    "purge_run",
    "retention_run",
]
