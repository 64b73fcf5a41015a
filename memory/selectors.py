"""Reads of memory. Tenant first, then the member, then everything else.

Callers resolve the member (`governance.selectors.member_for`) before calling; these
functions add what the requesting principal may see on top:

- a surface sees only entries in adapter scopes it is an allowed consumer of, and never a
  forgotten (tombstoned) entry: to a surface a forgotten memory is gone;
- the member sees all of their memory, forgotten entries included until the purge, so the
  "recently forgotten" view can say what goes and when.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncMonth

from consent.enums import AdapterScope, Category
from consent.policy import blueprint
from governance import keys, plainsql, vocabulary
from governance.errors import NotFound, ValidationFailed
from governance.keys import text_fingerprint
from governance.models import User
from governance.principal import Principal
from governance.text import check_instant
from memory import picture
from memory.enums import Lifecycle, ScopeKind
from memory.models import MemoryEntry, OffTheRecord, PendingConflict
from memory.recall import pipeline as recall
from memory.rules.conflicts import normalise_subject
from memory.rules.retention import SOFT_DELETE_GRACE
from memory.rules.scopes import ScopeRuleError, parse_scope_key

FINGERPRINT_PURPOSE = keys.TEXT_FINGERPRINT_PURPOSE
DEFAULT_PAGE = 50
MAX_PAGE = 200
QUESTION_QUOTE_MAX = 200


# ------------------------------------------------------------------------ fingerprints


def value_fingerprint(body: str) -> str:
    """The fingerprint of a body's value: case, width and spacing do not count."""
    return text_fingerprint("value\x00" + normalise_subject(body))


def conflict_fingerprint(key: str) -> str:
    return text_fingerprint("conflict-key\x00" + key)


# ------------------------------------------------------------------------- visibility


@lru_cache(maxsize=32)
def surface_adapter_scopes(surface: str | None) -> frozenset[str]:
    """The adapter scopes a surface is an allowed consumer of (consent blueprints)."""
    return frozenset(
        scope.value for scope in AdapterScope if surface in blueprint(scope).allowed_consumers
    )


def actionable_entries(principal: Principal, member: User) -> QuerySet[MemoryEntry]:
    """Every revision of the member's entries that `principal` may act on, tombstones
    included (acting on one is a 409, not a 404)."""
    rows = MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member)
    if principal.kind == "surface":
        rows = rows.filter(adapter_scope__in=surface_adapter_scopes(principal.surface))
    return rows


def _readable(principal: Principal, member: User) -> QuerySet[MemoryEntry]:
    rows = actionable_entries(principal, member)
    if principal.kind == "surface":
        tombstoned = rows.filter(is_current=True, lifecycle=Lifecycle.TOMBSTONED)
        rows = rows.exclude(entry_id__in=tombstoned.values("entry_id"))
    return rows


def _entry_key(entry_id: uuid.UUID | str) -> uuid.UUID:
    try:
        return uuid.UUID(str(entry_id))
    except ValueError:
        raise NotFound("No such memory.") from None


def memory_get(*, principal: Principal, member: User, entry_id: uuid.UUID | str) -> MemoryEntry:
    """The current revision of one entry, or NotFound."""
    entry = (
        _readable(principal, member).filter(entry_id=_entry_key(entry_id), is_current=True).first()
    )
    if entry is None:
        raise NotFound("No such memory.")
    return entry


def memory_history(
    *, principal: Principal, member: User, entry_id: uuid.UUID | str
) -> list[MemoryEntry]:
    """Every revision of one entry, oldest first, or NotFound."""
    rows = list(
        _readable(principal, member).filter(entry_id=_entry_key(entry_id)).order_by("revision")
    )
    if not rows:
        raise NotFound("No such memory.")
    return rows


@dataclass(frozen=True)
class MemoryPage:
    entries: list[MemoryEntry]
    next_cursor: str | None


def _scope_filter(member: User, scope: str) -> Q:
    if ":" not in scope:
        try:
            return Q(scope_kind=ScopeKind(scope).value)
        except ValueError:
            raise ValidationFailed(
                "scope is not a scope kind or a scope key.",
                field="scope",
                rule="invalid_choice",
                allowed=[k.value for k in ScopeKind],
            ) from None
    try:
        _kind, identifiers = parse_scope_key(scope)
    except ScopeRuleError:
        raise ValidationFailed(
            "scope is not a well-formed scope key.", field="scope", rule="malformed"
        ) from None
    if identifiers.get("userId", "").lower() != str(member.public_id):
        raise ValidationFailed("scope names another member.", field="scope", rule="must-be-userId")
    return Q(scope_key=scope)


def _encode_cursor(entry: MemoryEntry) -> str:
    raw = f"{entry.updated_at.isoformat()}|{entry.revision_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, revision = base64.urlsafe_b64decode(padded.encode()).decode().split("|")
        # A crafted cursor at the calendar's edge would overflow in the query.
        moment = check_instant(datetime.fromisoformat(stamp))
        return moment, uuid.UUID(revision)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationFailed("cursor is not valid.", field="cursor", rule="invalid") from None


def memory_list(
    *,
    principal: Principal,
    member: User,
    scope: str | None = None,
    category: str | None = None,
    lifecycle: str | None = None,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE,
) -> MemoryPage:
    """Current revisions, newest change first, a keyset page at a time.

    Without a lifecycle filter, forgotten entries are left out; `lifecycle=tombstoned`
    lists them for the member (a surface gets none). Superseded revisions are never
    current: they are in an entry's history.
    """
    rows = _readable(principal, member).filter(is_current=True)
    if scope:
        rows = rows.filter(_scope_filter(member, scope))
    if category:
        try:
            rows = rows.filter(category=Category(category).value)
        except ValueError:
            raise ValidationFailed(
                "category is not an allowed value.",
                field="category",
                rule="invalid_choice",
                allowed=[c.value for c in Category],
            ) from None
    if lifecycle:
        try:
            rows = rows.filter(lifecycle=Lifecycle(lifecycle).value)
        except ValueError:
            raise ValidationFailed(
                "lifecycle is not an allowed value.",
                field="lifecycle",
                rule="invalid_choice",
                allowed=[lc.value for lc in Lifecycle],
            ) from None
    else:
        rows = rows.exclude(lifecycle=Lifecycle.TOMBSTONED)
    if cursor:
        moment, revision = _decode_cursor(cursor)
        rows = rows.filter(
            Q(updated_at__lt=moment) | Q(updated_at=moment, revision_id__lt=revision)
        )
    size = max(1, min(limit, MAX_PAGE))
    page = list(rows.order_by("-updated_at", "-revision_id")[: size + 1])
    more = len(page) > size
    page = page[:size]
    return MemoryPage(entries=page, next_cursor=_encode_cursor(page[-1]) if more else None)


def recently_forgotten(
    *, principal: Principal, member: User, now: datetime, limit: int = MAX_PAGE
) -> list[MemoryEntry]:
    """The member's forgotten entries that can still be restored (their grace window has
    not passed at `now`), most recently forgotten first. A surface gets none."""
    if principal.kind == "surface":
        return []
    return list(
        _readable(principal, member)
        .filter(
            is_current=True,
            lifecycle=Lifecycle.TOMBSTONED,
            updated_at__gt=now - SOFT_DELETE_GRACE,
        )
        .order_by("-updated_at", "entry_id")[:limit]
    )


def member_notebooks(*, principal: Principal, member: User) -> list[str]:
    """The names of the member's notebooks that hold a live memory, sorted."""
    names = (
        _readable(principal, member)
        .filter(is_current=True, scope_kind=ScopeKind.NOTEBOOK)
        .exclude(lifecycle=Lifecycle.TOMBSTONED)
        .values_list("scope_identifiers", flat=True)
    )
    return sorted({str(ids.get("notebookId", "")) for ids in names} - {""})


# ------------------------------------------------------------------------- conflicts


def _quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > QUESTION_QUOTE_MAX:
        text = text[: QUESTION_QUOTE_MAX - 1].rstrip() + "…"
    return f"“{text}”"


def conflict_question(*, prior_body: str, proposed_body: str) -> str:
    """The question a conflict puts to the member. It quotes the member's own memory back
    to the member (or to the surface acting for them, which may read it anyway); it is
    never written to the audit chain or a log."""
    return (
        f"You mentioned {_quote(prior_body)} earlier — should I update it to "
        f"{_quote(proposed_body)}?"
    )


def pending_conflicts(*, member: User) -> list[PendingConflict]:
    """The member's open questions, oldest first (for the member's pages)."""
    return list(
        PendingConflict.objects.filter(
            tenant_id=member.tenant_id, member=member, status=PendingConflict.Status.OPEN
        ).order_by("created_at")
    )


# ------------------------------------------------------------------- off the record


def off_the_record_for(
    *, member: User, session_id: str | None, surface: str | None
) -> OffTheRecord | None:
    """The toggle that covers a write from this session and surface, if one is on."""
    # Every write asks this: plain SQL (see governance.plainsql).
    rows = plainsql.select(
        OffTheRecord,
        "tenant_id = %s AND member_id = %s AND session_id IN (%s, %s) AND surface IN (%s, %s)",
        [
            plainsql.prep(OffTheRecord, "tenant", member.tenant_id),
            member.pk,
            "",
            session_id or "",
            "",
            surface or "",
        ],
        suffix="ORDER BY since LIMIT 1",
    )
    return rows[0] if rows else None


def off_the_record_toggles(*, member: User) -> list[OffTheRecord]:
    return list(
        OffTheRecord.objects.filter(tenant_id=member.tenant_id, member=member).order_by("since")
    )


def off_the_record_everywhere(*, member: User) -> OffTheRecord | None:
    """The member-wide toggle (every session, every surface), the one the banner shows."""
    return OffTheRecord.objects.filter(
        tenant_id=member.tenant_id, member=member, session_id="", surface=""
    ).first()


# ------------------------------------------------------------------- recall and jobs


def candidate_of(entry: MemoryEntry, *, user_id: str) -> recall.Candidate:
    """A stored revision as the recall pipeline sees it."""
    chain = tuple(
        recall.ProvenanceLink(
            kind=link["kind"],
            ref=link["ref"],
            captured_at=datetime.fromisoformat(link["capturedAt"]),
        )
        for link in entry.provenance_chain
    )
    suppression = None
    if entry.suppression_reason:
        # A suppression has its start (the `memory_suppression_whole` constraint).
        assert entry.suppression_started_at is not None
        suppression = recall.Suppression(
            reason=entry.suppression_reason,
            started_at=entry.suppression_started_at,
            ends_at=entry.suppression_ends_at,
            notes=entry.suppression_notes,
        )
    multi_actor = None
    if entry.actor_handle is not None:
        multi_actor = recall.MultiActor(
            actor_handle=entry.actor_handle,
            relationship_note=entry.relationship_note,
            sensitive_interaction=entry.sensitive_interaction,
        )
    return recall.Candidate(
        entry_id=str(entry.entry_id),
        tenant_id=str(entry.tenant_id),
        user_id=user_id,
        scope_kind=entry.scope_kind,
        scope_key=entry.scope_key,
        category=entry.category,
        body=entry.body,
        subject=entry.subject or None,
        origin=entry.origin,
        lifecycle=entry.lifecycle,
        suppression=suppression,
        multi_actor=multi_actor,
        provenance_chain=chain,
        reference_count=entry.reference_count,
        last_referenced_at=entry.last_referenced_at,
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        revision=entry.revision,
        external=recall.is_external(entry.origin, chain),
        revision_id=str(entry.revision_id),
        supersedes=None if entry.supersedes is None else str(entry.supersedes),
        consents=recall.consent_records(entry.consents),
    )


def recall_candidates(
    *,
    tenant_id: uuid.UUID,
    member: User,
    scope_keys: Iterable[str],
    adapter_scopes: Iterable[str] | None = None,
) -> list[recall.Candidate]:
    """The current revision of every entry in the given scope keys, whatever its
    lifecycle (the pipeline counts what it drops), in a stable order. One query.

    `adapter_scopes` narrows to the scopes the asking surface may consume.
    """
    rows = MemoryEntry.objects.filter(
        tenant_id=tenant_id, member=member, is_current=True, scope_key__in=list(scope_keys)
    )
    if adapter_scopes is not None:
        rows = rows.filter(adapter_scope__in=list(adapter_scopes))
    user_id = str(member.public_id)
    return [candidate_of(e, user_id=user_id) for e in rows.order_by("entry_id")]


def forgotten_entries_due(
    *, tenant_id: uuid.UUID, before: datetime, limit: int = 500
) -> list[tuple[int, uuid.UUID]]:
    """(member pk, entry id) of entries forgotten before `before`, oldest first: what the
    soft-delete purge hard-deletes once the grace window has passed."""
    return list(
        MemoryEntry.objects.filter(
            tenant_id=tenant_id,
            is_current=True,
            lifecycle=Lifecycle.TOMBSTONED,
            updated_at__lt=before,
        )
        .order_by("updated_at", "entry_id")
        .values_list("member_id", "entry_id")[:limit]
    )


def derived_entry_ids(*, member: User, sources: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Entries whose provenance names (by entry id or revision id) one of `sources` or one
    of their revisions, followed transitively: the summaries that quote them, which go
    wherever they go (hard delete, soft delete). Caller has resolved the member."""
    sources = set(sources)
    rows = list(
        MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member).values_list(
            "entry_id", "revision_id", "provenance_chain"
        )
    )
    revisions_of: dict[uuid.UUID, set[str]] = {}
    for entry_id, revision_id, _chain in rows:
        revisions_of.setdefault(entry_id, set()).add(str(revision_id))
    refs_of: dict[uuid.UUID, set[str]] = {}
    for entry_id, _revision_id, chain in rows:
        refs_of.setdefault(entry_id, set()).update(
            str(link.get("ref", "")) for link in chain or () if isinstance(link, dict)
        )
    found = set(sources)
    frontier = set(sources)
    while frontier:
        names: set[str] = set()
        for entry_id in frontier:
            names.add(str(entry_id))
            names |= revisions_of.get(entry_id, set())
        frontier = {e for e, refs in refs_of.items() if e not in found and refs & names}
        found |= frontier
    return found - sources


# ------------------------------------------------------------------- the memory picture

PICTURE_MONTHS = 6


@dataclass(frozen=True)
class MemoryPicture:
    """What Iris remembers now, counted by when it was first remembered: for each of the
    last months, how many of today's memories it already held by the month's end, by
    kind of memory and by topic group (`governance.vocabulary.TOPIC_GROUPS`)."""

    months: list[date]
    by_scope: dict[str, tuple[int, ...]]
    by_topic_group: dict[str, tuple[int, ...]]

    @property
    def total(self) -> int:
        return sum(counts[-1] for counts in self.by_scope.values())


def memory_picture(
    *, principal: Principal, member: User, today: date, months: int = PICTURE_MONTHS
) -> MemoryPicture:
    """One grouped query: current, not forgotten entries by month first written, kind and
    topic; then running totals. Forgotten memories are not counted: Iris no longer uses them."""
    rows = (
        _readable(principal, member)
        .filter(is_current=True)
        .exclude(lifecycle=Lifecycle.TOMBSTONED)
        .annotate(month=TruncMonth("created_at", tzinfo=UTC))
        .values("month", "scope_kind", "category")
        .annotate(n=Count("revision_id"))
        .order_by()
    )
    window = picture.months_ending(today, months)
    scope_counts: dict[str, dict[date, int]] = {}
    group_counts: dict[str, dict[date, int]] = {}
    for row in rows:
        month = row["month"].date() if isinstance(row["month"], datetime) else row["month"]
        group = vocabulary.TOPICS[row["category"]].group
        for table, key in ((scope_counts, row["scope_kind"]), (group_counts, group)):
            bucket = table.setdefault(key, {})
            bucket[month] = bucket.get(month, 0) + row["n"]
    return MemoryPicture(
        months=window,
        by_scope={
            k.value: picture.cumulative(scope_counts[k.value], window)
            for k in ScopeKind
            if k.value in scope_counts
        },
        by_topic_group={
            g: picture.cumulative(group_counts[g], window)
            for g in vocabulary.TOPIC_GROUPS
            if g in group_counts
        },
    )
