"""Hard deletion: an entry, everything derived from it, and its traces."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from consent.enums import (
    Category,
)
from governance.actions import AuditAction
from governance.effects import run_destructive
from governance.models import User
from governance.pipeline import (
    Effect,
)
from governance.principal import Principal
from memory.models import (
    ForgottenValue,
    MemoryEntry,
)
from memory.selectors import derived_entry_ids
from memory.services.common import (
    _all_revisions,
    _audit,
    _audited_category,
    _enum,
    _forget_traces,
    _invalid,
    _lock_member,
    _operation,
    _uuid_or_none,
)
from memory.services.types import HardDeleteResult

# ------------------------------------------------------------------------- hard delete


def memory_hard_delete(
    *,
    principal: Principal,
    member: User,
    entry_ids: Iterable[uuid.UUID | str] | None = None,
    category: str | None = None,
    sensitive_interactions: bool = False,
    include_derived: bool = True,
    reason_code: str = "member-request",
    limit: int | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> HardDeleteResult:
    """Remove entries for good: every revision row, now (DESIGN invariant 7).

    Selects the member's entries named in `entry_ids`, every entry any revision of which
    is in `category`, and (with `sensitive_interactions`) every entry any revision of
    which records a sensitive interaction; with `include_derived`, also every entry whose
    provenance names one of those (a summary of them), transitively. Their open
    questions, inference counts and stored API answers go too; keyed fingerprints of the
    values stay so that nothing re-creates them silently, and the audit keeps ids,
    revision counts and fingerprints. Ids that are not this member's are ignored.

    Destructive: governed at `pre_destructive` (a member's or a surface's call waits for
    the owner's approval; Iris's own jobs, as a system principal, do not) and run behind
    its side-effect ledger row. For jobs: `limit` bounds one call (one transaction) and
    `remaining` says to call again; a second call finds nothing and deletes nothing.
    Used by the consent-revocation cascade (`reason_code="consent-revoked"`) and the
    soft-delete purge (`reason_code="soft-delete-grace-expired"`).
    """
    ids: set[uuid.UUID] = set()
    for value in entry_ids or ():
        key = _uuid_or_none(value)
        if key is None:
            raise _invalid("entryIds", "invalid", "entryIds must be UUIDs.")
        ids.add(key)
    if category is not None:
        category = _enum(category, Category, "category").value
    if not ids and category is None and not sensitive_interactions:
        raise _invalid(
            "entryIds", "required", "Name entries, a category or sensitive interactions."
        )
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise _invalid("limit", "min_value", "limit must be at least 1.")
    arguments = {
        "entryIds": sorted(str(i) for i in ids),
        "category": category,
        "sensitiveInteractions": sensitive_interactions,
        "includeDerived": include_derived,
        "reasonCode": reason_code,
        "limit": limit,
    }
    op = _operation(
        name="memory.hard_delete",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=sorted(str(i) for i in ids),
        arguments=arguments,
    )
    return run_destructive(
        op,
        _hard_delete,
        principal,
        member,
        ids=ids,
        category=category,
        sensitive_interactions=sensitive_interactions,
        include_derived=include_derived,
        reason_code=reason_code,
        limit=limit,
        now=now or timezone.now(),
    )


def _hard_delete(
    principal: Principal,
    member: User,
    *,
    ids: set[uuid.UUID],
    category: str | None,
    sensitive_interactions: bool,
    include_derived: bool,
    reason_code: str,
    limit: int | None,
    now: datetime,
) -> HardDeleteResult:
    with transaction.atomic(durable=True):
        _lock_member(member)
        mine = MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member)
        selection = Q(entry_id__in=ids) if ids else Q(pk__in=[])
        if category is not None:
            selection |= Q(category=category)
        if sensitive_interactions:
            selection |= Q(sensitive_interaction=True)
        targets = set(mine.filter(selection).values_list("entry_id", flat=True))
        if include_derived and targets:
            targets |= derived_entry_ids(member=member, sources=targets)
        ordered = sorted(targets)
        batch = ordered if limit is None else ordered[:limit]
        revisions = _all_revisions(member, batch)
        if revisions:
            _forget_traces(member, revisions, now=now, reason=ForgottenValue.Reason.HARD_DELETED)
            by_entry: dict[uuid.UUID, list[MemoryEntry]] = {}
            for revision in revisions:
                by_entry.setdefault(revision.entry_id, []).append(revision)
            for entry_id, rows in by_entry.items():
                _audit(
                    principal,
                    member,
                    AuditAction.MEMORY_ENTRY_HARD_DELETED,
                    subject_ids=[entry_id, *(r.revision_id for r in rows)],
                    reason_code=reason_code,
                    payload={
                        "entryId": str(entry_id),
                        "revisionCount": len(rows),
                        "category": _audited_category(rows[-1].category),
                        "bodyFingerprints": sorted({r.body_fingerprint for r in rows}),
                    },
                )
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id, member=member, entry_id__in=batch
            ).delete()
    return HardDeleteResult(
        entry_ids=tuple(batch),
        revision_count=len(revisions),
        remaining=len(ordered) > len(batch),
    )
