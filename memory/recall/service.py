"""Recall, the Django side: from an HTTP request and the ledger to a governed, audited answer.

`memory.recall` decides; this module gathers what it decides on and records what happened:

1. the request: scope key, surface, context, `now`;
2. governance `pre_recall` (run limits, the egress tier check);
3. the consented categories (the ledger's, narrowed by the request, never widened), read
   on the snapshot's catch-up where it has one; then candidates from the member snapshot
   (`memory.recall.snapshot`) and `recall.resolve`;
4. the egress gate: entries whose class may not reach the destination tier are withheld and
   counted by reason in `suppressionCounts`; governance `post_recall` checks what is left;
5. the answer: `recall.to_wire`, bodies scrubbed of credentials, governance `pre_response`;
6. before the answer leaves, in one INSERT: the governance decisions and the
   `iris.memory.recall.resolved` audit event (which names every returned entry);
7. in the same transaction as 6, still before the answer leaves: the surfaced entries'
   `referenceCount`/`lastReferencedAt` and the member's recall history (one statement on
   PostgreSQL). They were once written after the answer, from a per-thread queue that a
   dying worker lost (docs/decisions/hardening-controls.md gives the measured cost).

Surfaces (docs/performance.md and docs/decisions/recall.md): a surface client or the
member's own session may ask for `assistant`, `shell` or `notebook` (every product surface
renders through one of these presentation budgets; what it may *read* is still narrowed to
the adapter scopes its client name consumes). `admin` is the operators' surface and is
reached only through the inspection regime, never through this endpoint: 403.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from consent.enums import CATEGORY_CONSENT_PREFIX, ConsentType
from consent.ledger import LedgerEvent, active_granted
from consent.selectors import active_consent_types, member_ledger_of, member_ledger_sql
from governance import after_response, plainsql
from governance.actions import AuditAction
from governance.audit import audit_record_many
from governance.classify import Classification, Tier, classify_text, strictest
from governance.egress import (
    DEFAULT_TIER,
    egress_filter,
    parse_tier,
    tenant_allows_internal_cloud,
)
from governance.errors import Forbidden, ValidationFailed
from governance.models import User
from governance.pipeline import Effect, Hook, Operation, govern
from governance.principal import Principal
from governance.secrets_screen import scrub_outbound_data
from memory.enums import RecallSurface, ScopeKind
from memory.models import MemoryEntry
from memory.recall import pipeline as recall
from memory.recall import snapshot as recall_snapshot
from memory.recall.models import MemoryEmbedding, RecallEvent
from memory.recall.ranking import embedding, semantic
from memory.rules import scopes
from memory.selectors import surface_adapter_scopes

AUDIT_ACTION = AuditAction.MEMORY_RECALL_RESOLVED
POLICY_ID = "iris-memory-recall-v1"
OPERATION = "memory.recall"

logger = logging.getLogger(__name__)

# What this endpoint serves. `admin` belongs to operators under inspection.
CLIENT_SURFACES: frozenset[str] = frozenset(
    {RecallSurface.ASSISTANT, RecallSurface.SHELL, RecallSurface.NOTEBOOK}
)


# --------------------------------------------------------------------------------------
# The ranker


def ranker_name() -> str:
    """The ranker the deployment asks for (`IRIS_RECALL_SEMANTIC`, hybrid when unset)."""
    raw = getattr(settings, semantic.SETTING_NAME, None) or os.environ.get(semantic.SETTING_NAME)
    return (raw or semantic.DEFAULT_RANKER).strip().lower()


@dataclass(frozen=True)
class RankerState:
    """Which ranker recall uses, and why it is not the configured one when it is not."""

    configured: str
    active: str
    # Why the embedding model is not in use, in words an operator can act on; may name
    # paths on disk, so it goes to `doctor` and the logs, not to anonymous callers.
    reason: str | None = None

    @property
    def fallback(self) -> bool:
        return self.active != self.configured


_logged_fallback: set[str] = set()


def ranker_state() -> RankerState:
    """The configured ranker, or BM25 when the configuration asks for hybrid and the
    embedding model cannot load here. The model is loaded (once per process) to find
    out, so the answer is the one recall acts on."""
    name = ranker_name()
    if name != "hybrid":
        return RankerState(configured=name, active=name)
    reason: str | None = None
    if not embedding.ready():
        reason = embedding.load_failure() or embedding.unavailable_reason() or "no model"
    else:
        try:
            embedding.default_encoder()
        except embedding.EmbeddingUnavailable as exc:
            reason = str(exc)
    if reason is None:
        return RankerState(configured=name, active=name)
    if reason not in _logged_fallback:
        _logged_fallback.add(reason)
        logger.warning(
            "recall ranks with %s: %s=hybrid but %s",
            semantic.FALLBACK_RANKER,
            semantic.SETTING_NAME,
            reason,
        )
    return RankerState(configured=name, active=semantic.FALLBACK_RANKER, reason=reason)


def ranker() -> tuple[str, semantic.Ranker]:
    """The ranker recall uses now (`ranker_state().active`) and its preparer; an unknown
    configured name is a ValueError."""
    name = ranker_state().active
    return name, semantic.semantic_for(name)


# --------------------------------------------------------------------------------------
# The request


@dataclass(frozen=True)
class RecallAsk:
    """What a caller asked, already validated field by field (the API serializer)."""

    scope_kind: str | None
    scope_identifiers: Mapping[str, str] | None
    scope_key: str | None
    query: str
    surface: str
    context: str
    crisis_frame: bool = False
    safety_critical_context: bool = False
    consented_categories: frozenset[str] | None = None
    limit: int | None = None
    destination_tier: str | None = None
    run_id: str | None = None


def _scope_key(ask: RecallAsk, member: User) -> tuple[str, str]:
    user_id = str(member.public_id)
    if ask.scope_key:
        try:
            parsed_kind, identifiers = scopes.parse_scope_key(ask.scope_key)
            kind = parsed_kind.value
        except ValueError:
            raise ValidationFailed(
                "scopeKey is not a valid scope key.", field="scopeKey", rule="format"
            ) from None
        key = ask.scope_key
    else:
        if not ask.scope_kind:
            raise ValidationFailed(
                "Name the scope: scope {kind, ...} or scopeKey.", field="scope", rule="required"
            )
        identifiers = {k: str(v) for k, v in (ask.scope_identifiers or {}).items()}
        identifiers.setdefault("userId", user_id)
        if ask.scope_kind in (ScopeKind.TENANT, ScopeKind.OPERATOR_COPILOT):
            identifiers.setdefault("tenantId", str(member.tenant_id))
        try:
            kind = ScopeKind(ask.scope_kind).value
            key = scopes.key_from(kind, identifiers)
            scopes.parse_scope_key(key)
        except (ValueError, KeyError):
            raise ValidationFailed(
                "scope is missing an identifier or names an unknown kind.",
                field="scope",
                rule="format",
            ) from None
    if identifiers.get("userId") != user_id or identifiers.get(
        "tenantId", str(member.tenant_id)
    ) != str(member.tenant_id):
        raise ValidationFailed(
            "The scope must belong to the member recalled for.", field="scope", rule="member"
        )
    return kind, key


def consented_for(
    member: User, narrowed: frozenset[str] | None, events: list[LedgerEvent] | None = None
) -> tuple[frozenset[str], bool]:
    """(consented categories, multi-actor sensitive consent): the ledger's word, narrowed by
    the request's list when it gives one (bare `medical` and `category:medical` alike).
    `events`: the member's ledger when the caller has read it."""
    if events is None:
        granted = active_consent_types(tenant_id=member.tenant_id, member=member)
    else:
        granted = active_granted(events)
    categories = frozenset(
        t.removeprefix(CATEGORY_CONSENT_PREFIX)
        for t in granted
        if t.startswith(CATEGORY_CONSENT_PREFIX)
    )
    if narrowed is not None:
        categories &= frozenset(c.removeprefix(CATEGORY_CONSENT_PREFIX) for c in narrowed)
    return categories, ConsentType.MULTI_ACTOR_SENSITIVE.value in granted


def build_request(
    *,
    principal: Principal,
    member: User,
    ask: RecallAsk,
    now: datetime,
    valid: Callable[[], object] | None = None,
    read_ledger: bool = True,
) -> recall.RecallRequest:
    """The pipeline's request; `valid` is called once the surface and scope have passed,
    before the consent ledger is read. Without `read_ledger` it consents to nothing yet:
    `_consent` completes it, on the snapshot's round trip where it can."""
    if ask.surface not in CLIENT_SURFACES:
        raise Forbidden(
            "The admin surface is for operators, through an inspection.", code="surface-forbidden"
        )
    kind, key = _scope_key(ask, member)
    if valid is not None:
        valid()
    request = recall.RecallRequest(
        tenant_id=str(member.tenant_id),
        user_id=str(member.public_id),
        scope_kind=kind,
        scope_key=key,
        query=ask.query,
        surface=ask.surface,
        context=ask.context,
        crisis_frame=ask.crisis_frame,
        safety_critical_context=ask.safety_critical_context,
        consented_categories=frozenset(),
        multi_actor_sensitive_consent=False,
        dsar_fulfillment=False,
        limit=ask.limit,
        now=now,
    )
    return _consent(member, ask).apply(request, None) if read_ledger else request


def _consent(member: User, ask: RecallAsk) -> recall_snapshot.Consent:
    """The ledger's read for a request, on the snapshot's round trip where it has one."""

    def apply(
        request: recall.RecallRequest, rows: list[tuple[Any, ...]] | None
    ) -> recall.RecallRequest:
        events = None if rows is None else member_ledger_of(rows, member=member)
        categories, multi_actor = consented_for(member, ask.consented_categories, events)
        return replace(
            request, consented_categories=categories, multi_actor_sensitive_consent=multi_actor
        )

    rider = member_ledger_sql(tenant_id=member.tenant_id, member=member)
    return recall_snapshot.Consent(rider, apply)


def destination_tier(principal: Principal, asked: str | None) -> str:
    """The tier this recall's answer goes to.

    A surface client's is the tier it was registered with (where its model runs); the
    request may narrow it (a local client may ask for cloud) but never widen it: a cloud
    client asking for local is refused, 403. Anyone else (the member's own session) gets
    the tier asked for, or cloud, the stricter one, when none is named.
    """
    asked_tier: str | None = None
    if asked is not None:
        try:
            asked_tier = parse_tier(asked).value
        except ValueError:
            raise ValidationFailed(
                "destinationTier must be local or cloud.", field="destinationTier", rule="choice"
            ) from None
    if principal.kind != "surface":
        return asked_tier or DEFAULT_TIER.value
    # A surface principal built without its client's tier is treated as cloud.
    registered = principal.destination_tier or DEFAULT_TIER.value
    if asked_tier is None or asked_tier == registered:
        return registered
    if asked_tier == Tier.LOCAL.value:
        raise Forbidden(
            "destinationTier may only narrow the surface client's registered tier: this "
            "client is registered as cloud, so it may not ask for local.",
            code="destination-tier-wider-than-client",
            field="destinationTier",
            rule="narrow-only",
            extra={"registeredTier": registered},
        )
    return asked_tier


# --------------------------------------------------------------------------------------
# The service


def _scope_fingerprint(scope_key: str) -> str:
    return hashlib.sha256(scope_key.encode()).hexdigest()[:32]


# A body's class depends only on its text, and the same entries surface turn after turn:
# the credential screen (every detector over the whole text, 5 % of a 1k recall's CPU)
# runs once per text and process. Keyed by a digest, so the cache holds no memory text;
# emptied when full, which bounds it without bookkeeping on every hit.
_BODY_CLASSES: dict[bytes, Classification] = {}
BODY_CLASSES_MAX = 8192


def body_class(body: str) -> Classification:
    key = hashlib.blake2b(body.encode(), digest_size=16).digest()
    found = _BODY_CLASSES.get(key)
    if found is None:
        found = classify_text(body)
        if len(_BODY_CLASSES) >= BODY_CLASSES_MAX:
            _BODY_CLASSES.clear()
        _BODY_CLASSES[key] = found
    return found


def entry_class(c: recall.Candidate) -> Classification:
    """The class of everything an entry would return: its body and every other text
    (subject, scope key, notes, provenance refs). A credential stored in any of them, by
    a write older than the screen of every field, keeps the whole entry in."""
    texts = [c.body, c.subject or "", c.scope_key]
    if c.suppression is not None:
        texts.append(c.suppression.notes or "")
    if c.multi_actor is not None:
        texts.append(c.multi_actor.relationship_note or "")
    texts.extend(link.ref for link in c.provenance_chain)
    return strictest(*(body_class(t) for t in texts if t))


def _withhold(
    result: recall.RecallResult, *, tier: str, internal_to_cloud: bool
) -> tuple[recall.RecallResult, dict[str, int], list[str]]:
    """The egress gate over the returned entries; withheld ones move into the counts."""
    # Each body is scanned for credentials once, not once per use (`body_class`).
    class_of = {e.candidate.entry_id: entry_class(e.candidate) for e in result.entries}
    gated = egress_filter(
        result.entries,
        tier=tier,
        classification_of=lambda e: class_of[e.candidate.entry_id],
        tenant_opted_in_internal_cloud=internal_to_cloud,
    )
    classes = [class_of[e.candidate.entry_id].value for e in gated.allowed]
    if not gated.withheld:
        return result, {}, classes
    envelope = result.audit_envelope
    counts = dict(envelope.suppression_counts)
    for reason, n in gated.withheld.items():
        counts[reason] = counts.get(reason, 0) + n
    kept = tuple(gated.allowed)
    result = recall.RecallResult(
        entries=kept,
        audit_envelope=replace(
            envelope,
            returned_ids=tuple(e.candidate.entry_id for e in kept),
            suppression_counts=MappingProxyType(dict(sorted(counts.items()))),
        ),
    )
    return result, dict(gated.withheld), classes


def recall_resolve(
    *,
    principal: Principal,
    member: User,
    ask: RecallAsk,
    now: datetime | None = None,
) -> dict[str, Any]:
    """One governed recall for `member` (caller has resolved the member for `principal`).

    Returns the wire answer. Writes the governance decisions and one audit event in one
    statement after the answer is built (a denial is still recorded at once, by
    `govern`); the surfaced entries' reference counts and the recall history follow once
    the answer has gone out (at once outside a request).
    """
    now = now or timezone.now()
    name, prepare = ranker()
    # With the hybrid ranker, the query's embedding is computed on a helper thread once the
    # request is known to be well formed, while the ledger and the snapshot are read (ONNX
    # Runtime lets go of the GIL): 0.4-0.6 ms of a hybrid recall's p50 in alternating
    # batches (docs/performance.md).
    started: list[Any] = []

    def embed_query() -> None:
        if name == "hybrid":
            started.append(embedding.prefetch(ask.query))

    tier = destination_tier(principal, ask.destination_tier)
    request = build_request(
        principal=principal, member=member, ask=ask, now=now, valid=embed_query, read_ledger=False
    )
    query_vector = started[0] if started else None
    attributes: dict[str, Any] = {"egress_tier": tier}
    if ask.run_id:
        attributes["run_id"] = ask.run_id

    def operation(**extra: Any) -> Operation:
        return Operation(
            name=OPERATION,
            effect=Effect.READ,
            principal=principal,
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            attributes={**attributes, **extra},
        )

    # Allow decisions are queued and written with the recall's own records: one commit.
    pending: list[dict[str, Any]] = []
    govern(Hook.PRE_RECALL, operation(), pending=pending)

    adapter_scopes = (
        sorted(surface_adapter_scopes(principal.surface)) if principal.kind == "surface" else None
    )
    # The worker's snapshot of the member where it may keep one (memory.recall.snapshot),
    # built on the spot when the worker has none; otherwise (SQLite, inside a transaction)
    # one built for this recall alone. Either returns what `resolve` would over every row,
    # and counts every reachable row in the envelope, which streaming from the table
    # cannot without reading them all (docs/decisions/recall.md, "Envelope counts").
    options: dict[str, Any] = {
        "member": member,
        "adapter_scopes": adapter_scopes,
        "ranker_name": name,
        "prepare": prepare,
        "query_vector": query_vector,
    }
    # The consent ledger is read on the snapshot's round trip when it catches up.
    consent = _consent(member, ask)
    if recall_snapshot.usable():
        fast = recall_snapshot.resolve_cached(request, consent=consent, **options)
        request = fast.request or request
    else:
        request = consent.apply(request, None)
        fast = recall_snapshot.resolve_once(request, **options)
    # Asked once and handed to the egress check, which would otherwise ask at each hook;
    # only the cloud tier consults it (governance.classify.EGRESS_TABLE).
    internal_to_cloud = tier == Tier.CLOUD.value and tenant_allows_internal_cloud(member.tenant_id)
    result, withheld, classes = _withhold(
        fast.result, tier=tier, internal_to_cloud=internal_to_cloud
    )
    checked = {"classifications": classes, "tenant_opted_in_internal_cloud": internal_to_cloud}
    govern(Hook.POST_RECALL, operation(**checked), pending=pending)

    wire = recall.to_wire(result)
    # Said in the answer, not only in the audit event: a caller whose tier held entries
    # back learns that it did, and how many (the reasons are in suppressionCounts).
    wire["destinationTier"] = tier
    wire["withheldByTier"] = sum(withheld.values())
    for item, cls in zip(wire["entries"], classes, strict=True):
        # Scrubbing changes a text exactly when the screen finds a credential in it, which
        # is when `_withhold` classed one of the entry's texts secret: the others need no
        # second scan. Every text of the item is scrubbed, not only the body.
        if cls == Classification.SECRET:
            item.update(scrub_outbound_data(item))
    govern(Hook.PRE_RESPONSE, operation(**checked), pending=pending)

    _record(
        pending=pending,
        principal=principal,
        member=member,
        request=request,
        result=result,
        revision_of=fast.revision_of,
        extra={
            "ranker": name,
            "egressTier": tier,
            "egressWithheld": sum(withheld.values()),
            "examinedCount": fast.examined,
        },
    )
    return wire


def _record(
    *,
    pending: list[dict[str, Any]],
    principal: Principal,
    member: User,
    request: recall.RecallRequest,
    result: recall.RecallResult,
    revision_of: Mapping[str, uuid.UUID],
    extra: Mapping[str, Any],
) -> None:
    # The allow decisions, the recall event and the bookkeeping (usage counters, the
    # member's recall history) commit together, before the answer leaves: a worker that
    # dies once the answer is out loses nothing (docs/decisions/hardening-controls.md).
    revisions = [revision_of[e.candidate.entry_id] for e in result.entries]
    if connection.vendor == "postgresql":
        # All of it one statement, atomic on its own: no BEGIN and COMMIT round trips
        # (docs/decisions/recall.md, "A recall's record, one statement").
        riders = _usage_sql(member, revisions, request, result) if revisions else []
        _record_event(pending, principal, member, request, result, extra, riders=riders)
    else:
        with transaction.atomic(durable=True):
            _record_event(pending, principal, member, request, result, extra)
            if revisions:
                _record_usage(member, revisions, request, result)
    pending.clear()


def _record_event(
    pending: list[dict[str, Any]],
    principal: Principal,
    member: User,
    request: recall.RecallRequest,
    result: recall.RecallResult,
    extra: Mapping[str, Any],
    riders: list[tuple[str, list[Any]]] | None = None,
) -> None:
    envelope = result.audit_envelope
    suppressed = sum(envelope.suppression_counts.values())
    now = request.now
    # One INSERT of the allow decisions and the recall event.
    audit_record_many(
        [
            *pending,
            {
                "actor": principal.actor,
                "action": AUDIT_ACTION,
                "tenant_id": member.tenant_id,
                "policy_id": POLICY_ID,
                "severity": "warning" if suppressed else "info",
                "reason_code": "suppressed" if suppressed else "",
                "subject_ids": [str(member.public_id), *envelope.returned_ids],
                "payload": {
                    "scopeKind": str(request.scope_kind),
                    "scopeKeyHash": _scope_fingerprint(request.scope_key),
                    "surface": str(request.surface),
                    "context": request.context,
                    "returnedIds": list(envelope.returned_ids),
                    "suppressionCounts": dict(envelope.suppression_counts),
                    "evaluatedCount": envelope.evaluated_count,
                    "dedupedCount": envelope.deduped_count,
                    "overBudgetCount": envelope.over_budget_count,
                    **extra,
                },
                "occurred_at": now,
            },
        ],
        riders=riders or (),
    )


def _usage_sql(
    member: User,
    revisions: list[uuid.UUID],
    request: recall.RecallRequest,
    result: recall.RecallResult,
) -> list[tuple[str, list[Any]]]:
    """`_record_usage`'s two statements on PostgreSQL, to ride on another."""
    return [_bump_sql(member, revisions, request.now), _history_sql(member, request, result)]


def _record_usage(
    member: User,
    revisions: list[uuid.UUID],
    request: recall.RecallRequest,
    result: recall.RecallResult,
) -> None:
    """The surfaced entries' counters and the member's recall history, inside the
    caller's transaction (PostgreSQL writes both with the record's statement instead:
    `_usage_sql`)."""
    _bump_references(member, revisions, request.now)
    _record_history(member, request, result)


def _record_history(
    member: User, request: recall.RecallRequest, result: recall.RecallResult
) -> None:
    """The member's recall history: a row per surfaced entry (PostgreSQL: `_history_sql`,
    with the record's statement)."""
    entries, scores, rationales = _history_rows(request, result)
    plainsql.insert(
        RecallEvent,
        [
            RecallEvent(
                tenant_id=member.tenant_id,
                member=member,
                entry_id=entry,
                surface=str(request.surface),
                context=request.context,
                scope_key=request.scope_key,
                score=score,
                rationale=rationale,
                recalled_at=request.now,
            )
            for entry, score, rationale in zip(entries, scores, rationales, strict=True)
        ],
    )


def _history_rows(
    request: recall.RecallRequest, result: recall.RecallResult
) -> tuple[list[uuid.UUID], list[float], list[str]]:
    entries = [uuid.UUID(e.candidate.entry_id) for e in result.entries]
    scores = [e.score for e in result.entries]
    # Without the matched words: the history keeps no query or body text.
    rationales = [recall.explain(e.candidate, request, frozenset()) for e in result.entries]
    return entries, scores, rationales


def _history_sql(
    member: User, request: recall.RecallRequest, result: recall.RecallResult
) -> tuple[str, list[Any]]:
    """The recall history's INSERT on PostgreSQL. Every recall that returns anything
    writes it, so three arrays make one fixed statement (which the server prepares once)
    instead of a fresh VALUES list of 108 parameters."""
    entries, scores, rationales = _history_rows(request, result)
    sql = (
        f"INSERT INTO {RecallEvent._meta.db_table} (tenant_id, member_id, entry_id, "  # noqa: S608
        "surface, context, scope_key, score, rationale, recalled_at) "
        "SELECT %s, %s, e, %s, %s, %s, s, r, %s "
        "FROM unnest(%s::uuid[], %s::float8[], %s::text[]) AS t(e, s, r)"
    )
    params = [
        member.tenant_id,
        member.pk,
        str(request.surface),
        request.context,
        request.scope_key,
        request.now,
        entries,
        scores,
        rationales,
    ]
    return sql, params


# How far a surfaced entry's last referenced time may lag its latest recall: the ranking
# needs no finer time (a minute moves a score by at most 0.4 * (1 - 2^(-60 s / 30 days)),
# 6.4e-6), and the recall history keeps every exact time. No index holds it or the
# reference count (migration 0013), so a bump is a HOT update whether the time moves or not.
LAST_REFERENCED_RESOLUTION = timedelta(minutes=1)


def _bump_references(member: User, revisions: list[uuid.UUID], now: datetime) -> None:
    """One more reference for each surfaced revision that is still current, and its last
    referenced time moved to `now` unless it is already within LAST_REFERENCED_RESOLUTION
    of it (usage counters are the columns a stored revision may change:
    memory.models.MUTABLE_REVISION_FIELDS)."""
    stale = now - LAST_REFERENCED_RESOLUTION
    if connection.vendor != "postgresql":
        # SQLite serialises writers; no row locks to order.
        MemoryEntry.objects.filter(
            tenant_id=member.tenant_id, member=member, revision_id__in=revisions, is_current=True
        ).update(
            reference_count=F("reference_count") + 1,
            last_referenced_at=Case(
                When(
                    Q(last_referenced_at__isnull=True) | Q(last_referenced_at__lt=stale),
                    then=Value(now),
                ),
                default=F("last_referenced_at"),
            ),
        )
        return
    with plainsql.cursor() as cursor:
        cursor.execute(*_bump_sql(member, revisions, now))


def _bump_sql(member: User, revisions: list[uuid.UUID], now: datetime) -> tuple[str, list[Any]]:
    """`_bump_references`'s UPDATE on PostgreSQL. The rows are locked in one fixed order
    first: two concurrent recalls of overlapping entries otherwise lock them in scan order
    and deadlock (seen under 8 clients)."""
    table = MemoryEntry._meta.db_table
    sql = (
        f"UPDATE {table} AS m SET reference_count = m.reference_count + 1, "  # noqa: S608
        "last_referenced_at = CASE WHEN m.last_referenced_at IS NULL "
        "OR m.last_referenced_at < %s THEN %s ELSE m.last_referenced_at END "
        f"FROM (SELECT revision_id FROM {table} WHERE tenant_id = %s AND member_id = %s "
        "AND revision_id = ANY(%s) AND is_current ORDER BY revision_id FOR UPDATE) AS l "
        "WHERE m.revision_id = l.revision_id"
    )
    return sql, [now - LAST_REFERENCED_RESOLUTION, now, member.tenant_id, member.pk, revisions]


# --------------------------------------------------------------------------------------
# Reads for the member's pages


def recent_recalls(
    *, member: User, entry_id: uuid.UUID | str, limit: int = 10
) -> list[RecallEvent]:
    """Where, when and why one of the member's entries was recalled, newest first."""
    return list(
        RecallEvent.objects.filter(
            tenant_id=member.tenant_id, member=member, entry_id=entry_id
        ).order_by("-recalled_at", "-id")[:limit]
    )


# --------------------------------------------------------------------------------------
# Embeddings at write time


def warm_up() -> bool:
    """Load and warm the embedding model when the hybrid ranker is configured, so that no
    request pays for it (a first encode at a new text length cost 50-500 ms). Called when
    the web app starts; returns whether there was anything to warm. A model that cannot
    load does not stop the app: recall falls back to BM25 and `doctor` says why."""
    if ranker_state().active != "hybrid":
        return False
    embedding.default_encoder().warm_up()
    # And the BLAS thread controller the snapshot's cosines run under: finding the loaded
    # BLAS libraries (and importing threadpoolctl) took a worker's first hybrid recall
    # 20-40 ms on a quiet machine (docs/decisions/recall.md, "First recalls").
    with embedding.one_blas_thread():
        pass
    return True


def warm_worker() -> bool:
    """In a forked worker, before its first request: embed a query once on the helper
    thread recall uses, so the thread is started and the model has run in this process
    (a child's first encode took 5.5 ms against 2.5 for the next; docs/decisions/
    recall.md, "A worker's first query"). Returns whether there was anything to warm."""
    if ranker_state().active != "hybrid":
        return False
    embedding.prefetch(WARM_QUERY).result()
    return True


# Not a member's words: a query with no one's data in it, left in the digest-keyed cache.
WARM_QUERY = "what do I like"

# A context whose gates hold nothing sensitive back beyond the member's consent.
REHEARSAL_CONTEXT = "general"

# Who the rehearsal's record names; it is rolled back, so no row ever does.
REHEARSAL_ACTOR = "recall-rehearsal"

# Whether this process has run recall's statements once (`rehearse`).
_REHEARSED: list[bool] = []


def rehearse(member: User) -> bool:
    """Run a recall of `member` in this process without answering anyone or keeping
    anything: what a worker's first recall otherwise pays for on its own (docs/decisions/
    recall.md, "A worker's first recall, rehearsed"). Nothing is disclosed, so there is no
    audit event. Returns whether it ran (once per process, PostgreSQL only).

    The record (the audit event, its outbox row, the usage counters and the recall
    history: the one statement a recall commits) runs twice in a savepoint that is rolled
    back, with the foreign keys checked at once, so the database server compiles the
    change log's trigger, plans the key checks and reads the catalog of every table the
    statement writes (all kept for the session), and Python builds what the record path
    caches. The reads run as a recall's do, before it and three times after it: the
    driver forgets what it prepared at any rollback, and prepares a statement at its third
    run."""
    if _REHEARSED or not recall_snapshot.usable():
        return False
    _REHEARSED.append(True)
    name, prepare = ranker()
    ask = RecallAsk(
        scope_kind=ScopeKind.PROFILE,
        scope_identifiers=None,
        scope_key=None,
        query="",  # a briefing: it returns rows whatever they say, for the bookkeeping
        surface=RecallSurface.ASSISTANT,
        context=REHEARSAL_CONTEXT,
    )

    def read() -> tuple[recall.RecallRequest, Any]:
        request = build_request(
            principal=Principal.system(),
            member=member,
            ask=ask,
            now=timezone.now(),
            read_ledger=False,
        )
        options = {"member": member, "ranker_name": name, "prepare": prepare}
        fast = recall_snapshot.resolve_cached(request, consent=_consent(member, ask), **options)
        return fast.request or request, fast

    request, fast = read()
    with transaction.atomic(durable=True):
        with plainsql.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '200ms'")
        with transaction.atomic():
            with plainsql.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for _ in range(2):
                _record(
                    pending=[],
                    principal=Principal.system(REHEARSAL_ACTOR),
                    member=member,
                    request=request,
                    result=fast.result,
                    revision_of=fast.revision_of,
                    extra={"ranker": name, "examinedCount": fast.examined},
                )
            transaction.set_rollback(True)
    for _ in range(prepared_after()):
        read()
    return True


def prepared_after() -> int:
    """Runs after which the driver has prepared a statement on this connection: its
    `prepare_threshold` (iris_site/settings.py) plus the run that prepares it; 0 when
    it never prepares."""
    connection.ensure_connection()
    threshold = getattr(connection.connection, "prepare_threshold", None)
    return 0 if threshold is None else threshold + 1


def rehearse_latest() -> bool:
    """`rehearse` for the member whose memory changed most recently, if any: for a worker
    before its first request."""
    member = latest_member()
    return rehearse(member) if member is not None else False


def rehearse_again() -> bool:
    """`rehearse_latest` on a connection opened since this process rehearsed: what the
    driver prepared, and what the server process cached, went with the old one (a worker's
    connection renewed for its age, iris_site.warm.renew_connection)."""
    _REHEARSED.clear()
    return rehearse_latest()


def latest_member() -> User | None:
    """The member whose memory changed, or was recalled, most recently (the change log's
    newest note); None when the log is empty or unreadable here (SQLite)."""
    if not recall_snapshot.usable():
        return None
    with plainsql.cursor() as cursor:
        cursor.execute("SELECT member_id FROM memory_recallchange ORDER BY noted_at DESC LIMIT 1")
        row = cursor.fetchone()
    return User.objects.filter(pk=row[0]).first() if row else None


# Members whose snapshots a starting server builds, at most (most recent change first).
WARM_START_MEMBERS = 200


def warm_start() -> int:
    """Build the snapshots of the members whose memory changed, or was recalled, within
    the change log's window (`IRIS_RECALL_CHANGES_KEEP_SECONDS`), most recent first, up to
    a worker's row budget; returns how many rows are held. Called when the web app starts
    (`iris_site/wsgi.py`): under gunicorn --preload, in the master, so after a restart
    (a deploy) every worker starts holding them and the members in the middle of a
    conversation do not each pay a build at their first recall on each worker. A
    database that cannot answer (not migrated, not reachable, or not to be used here)
    skips it: recall builds on demand as before. The master's connections are closed, so
    no worker inherits them."""
    from django.db import connections

    if not recall_snapshot.usable():
        return 0
    try:
        with plainsql.cursor() as cursor:
            cursor.execute(
                "SELECT member_id FROM memory_recallchange GROUP BY member_id "
                "ORDER BY max(noted_at) DESC LIMIT %s",
                [WARM_START_MEMBERS],
            )
            order = [row[0] for row in cursor.fetchall()]
        by_pk = User.objects.in_bulk(order)
        members = [by_pk[pk] for pk in order if pk in by_pk]
        return recall_snapshot.warm_start(members, ranker_state().active)
    except Exception as exc:  # noqa: BLE001  (an optimisation: never what stops a start)
        logger.warning("recall snapshots not built at start: %s", type(exc).__name__)
        return 0
    finally:
        connections.close_all()


def warm_after_change(entry: MemoryEntry) -> None:
    """The entry's member's rows changed in this request: once the answer has gone out,
    bring this worker's snapshot of the member up to date, or build it
    (`recall.snapshot.warm_later`)."""
    member = recall_snapshot.MemberRef(pk=entry.member_id, tenant_id=entry.tenant_id)
    recall_snapshot.warm_later(member, ranker_state().active)
    if (
        not _REHEARSED
        and settings.IRIS_RECALL_SNAPSHOT
        and connection.vendor == "postgresql"
        and after_response.in_request()
    ):
        # A worker's first write of anyone rehearses recall after its answer, so the
        # worker's first recall after a burst of writes does not pay for it either.
        after_response.defer(partial(_rehearse_member, entry.member_id), key="recall-rehearse")


def _rehearse_member(member_pk: int) -> bool:
    if _REHEARSED or not recall_snapshot.usable():
        return False
    member = User.objects.filter(pk=member_pk).first()
    return rehearse(member) if member is not None else False


def encode_ahead(body: str) -> bytes | None:
    """The stored form of `body`'s embedding, computed before a writer takes the member's
    lock; None when the hybrid ranker is not the active one.

    The write path computes it here and hands it to `fresh_embeddings` inside its
    transaction: the encoder is most of a write's CPU (about 9 of 12 ms), and under the
    member's lock one member's writers took turns at it, so eight clients writing one
    member got no more than one core's worth (70 writes/s; docs/decisions/recall.md,
    "Writes with the model on"). The bits are `fresh_embeddings`' own (one text,
    unpadded), so recall ranks a revision the same whichever computed its vector."""
    if ranker_state().active != "hybrid":
        return None
    return embedding.to_bytes(embedding.default_encoder().encode_one(body, cache=False))


def fresh_embeddings(
    entries: Iterable[MemoryEntry],
    *,
    now: datetime | None = None,
    encoded: Mapping[str, bytes] | None = None,
) -> list[MemoryEmbedding]:
    """The embedding rows of revisions the caller is inserting (so none has a vector yet),
    for the caller to write with them; none unless the hybrid ranker is on. `encoded`
    holds vectors already computed by `encode_ahead`, by body."""
    rows = [e for e in entries if e.body]
    if not rows or ranker_state().active != "hybrid":
        return []
    encoder = embedding.default_encoder()
    # One text at a time, unpadded: the stored bits then equal what the ranker computes for
    # a revision without a stored vector, so fast and exhaustive recall agree.
    stamp = now or timezone.now()
    return [
        MemoryEmbedding(
            revision_id=e.revision_id,
            tenant_id=e.tenant_id,
            model=embedding.MODEL_NAME,
            vector=(encoded or {}).get(e.body)
            or embedding.to_bytes(encoder.encode_one(e.body, cache=False)),
            created_at=stamp,
        )
        for e in rows
    ]
