"""The recall pipeline: which memories a surface may see for one turn, ranked and explained.

Spec 000, "Recall-Resolution Algorithm". This module is the single definition of the rules:
a database fast path may pre-filter or bound scores, but whatever it returns is run through
`resolve`, which decides. Pure Python, no Django; decisions are in docs/decisions/recall.md.

Gates, in the spec's order, each drop counted under its exact reason:

1. tenant boundary                       `tenant-mismatch`
2. member and scope reachability         `scope-mismatch`
3. crisis frame                          `crisis-frame`
4. active suppression, then lifecycle    the suppression reason · `lifecycle-<state>`
5. sensitive category / interaction      `sensitive-category-without-consent`,
                                         `sensitive-category-outside-relevant-context`

then conflict dedupe, relevance (with a question, a memory that matches nothing of it is
dropped: `no-match-for-query`), scoring, the per-surface budget and admin redaction of
`multiActor`.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, cast

from consent.enums import CATEGORY_CONSENT_PREFIX, SENSITIVE_CATEGORIES, Category
from governance.envelope import wrap_external
from memory.enums import (
    Lifecycle,
    Origin,
    ProvenanceKind,
    RecallSurface,
    ScopeKind,
    SuppressionReason,
)
from memory.rules import scopes

# --------------------------------------------------------------------------------------
# Drop reasons (the keys of `suppressionCounts`, spelled as in the spec)

TENANT_MISMATCH = "tenant-mismatch"
SCOPE_MISMATCH = "scope-mismatch"
CRISIS_FRAME = "crisis-frame"
SENSITIVE_WITHOUT_CONSENT = "sensitive-category-without-consent"
SENSITIVE_OUTSIDE_CONTEXT = "sensitive-category-outside-relevant-context"
LIFECYCLE_DROP_PREFIX = "lifecycle-"
# Not a gate: a memory that passed every gate but matches nothing of a non-empty question.
NO_MATCH = "no-match-for-query"

_LIFECYCLE_DROPS: dict[str, str] = {
    state: f"{LIFECYCLE_DROP_PREFIX}{state.value}"
    for state in Lifecycle
    if state is not Lifecycle.ACTIVE
}

# Every reason `resolve` can count under, for dashboards and tests.
DROP_REASONS: frozenset[str] = frozenset(
    {TENANT_MISMATCH, SCOPE_MISMATCH, CRISIS_FRAME, SENSITIVE_WITHOUT_CONSENT}
    | {SENSITIVE_OUTSIDE_CONTEXT, NO_MATCH}
    | {r.value for r in SuppressionReason}
    | set(_LIFECYCLE_DROPS.values())
)

# --------------------------------------------------------------------------------------
# Scope reachability: the one table is memory.rules.scopes.REACHABLE_KINDS.

# Kinds whose key carries its own tenant id; the tenant gate checks it as well as the row's.
_TENANT_KEYED_KINDS: frozenset[str] = frozenset({ScopeKind.TENANT, ScopeKind.OPERATOR_COPILOT})

# --------------------------------------------------------------------------------------
# Surfacing contexts and the sensitive allow-lists (spec: "Privacy-Aware Suppression")

SURFACING_CONTEXTS: frozenset[str] = frozenset(
    {
        "general",  # anything not about a sensitive area: briefings, chit-chat, work, study
        "health",
        "identity",
        "financial",
        "legal",
        "relationship",
        "spiritual",
        "safety",
        "crisis",
    }
)

_HEALTH = frozenset({"health", "safety", "crisis"})
_IDENTITY = frozenset({"identity", "safety", "crisis"})
_SPIRITUAL = frozenset({"spiritual"})
_FINANCIAL = frozenset({"financial", "safety", "crisis"})
_LEGAL = frozenset({"legal", "safety", "crisis"})
_RELATIONSHIP = frozenset({"relationship", "safety", "crisis"})

SENSITIVE_CONTEXTS: Mapping[Category, frozenset[str]] = MappingProxyType(
    {
        # the spec's table
        Category.POSE_ALIGNMENT: _HEALTH,
        Category.BIOMETRIC: _HEALTH,
        Category.MEDICAL: _HEALTH,
        Category.PHYSICAL_HEALTH: _HEALTH,
        Category.MENTAL_HEALTH: _HEALTH,
        Category.SUBSTANCE_USE: _HEALTH,
        Category.SEXUALITY: _IDENTITY,
        Category.GENDER_IDENTITY: _IDENTITY,
        Category.SPIRITUAL: _SPIRITUAL,
        Category.FINANCIAL: _FINANCIAL,
        Category.LEGAL: _LEGAL,
        Category.IMMIGRATION_STATUS: _LEGAL,
        Category.ABUSE_HISTORY: _RELATIONSHIP,
        Category.RELATIONSHIP_VIOLENCE: _RELATIONSHIP,
        # ours (docs/decisions/recall.md): each follows its nearest sibling above
        Category.SEXUAL: frozenset({"health", "relationship", "safety", "crisis"}),
        Category.SAFETY: frozenset({"safety", "crisis"}),
        Category.RELIGION_USER_REDACTED: _SPIRITUAL,
        Category.FINANCIAL_DISTRESS: _FINANCIAL,
        Category.LEGAL_JEOPARDY: _LEGAL,
    }
)

# An entry about a sensitive interaction with another person (multiActor.sensitiveInteraction).
MULTI_ACTOR_SENSITIVE_CONTEXTS: frozenset[str] = _RELATIONSHIP

# Sensitive memory reaches operators only through a data-rights fulfilment or a
# safety-critical exception (spec: "Privacy-Aware Suppression", recall gate).
OPERATOR_SENSITIVE_CONTEXTS: frozenset[str] = frozenset({"safety", "crisis"})

# --------------------------------------------------------------------------------------
# Scoring (spec: DEFAULT_WEIGHTS)

WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"recency": 0.4, "semantic": 0.35, "reference_count": 0.15, "origin": 0.1}
)
ORIGIN_WEIGHTS: Mapping[Origin, float] = MappingProxyType(
    {
        Origin.USER_STATED: 1.0,
        Origin.USER_CONFIRMED: 0.9,
        Origin.SUMMARIZED_FROM_SESSION: 0.75,
        Origin.IMPORTED: 0.7,
        Origin.MODEL_INFERRED: 0.5,
        Origin.OPERATOR_COPILOT: 0.4,
    }
)
# The spec calls 30 days a half-life; its code computes exp(-age / 30 d), which gives 1/e
# there. Iris keeps the half-life (`RECENCY_RATE`).
RECENCY_SCALE = timedelta(days=30)
REFERENCE_COUNT_SATURATION = 10
SCORE_DECIMALS = 6

_W_RECENCY = WEIGHTS["recency"]
_W_SEMANTIC = WEIGHTS["semantic"]
_W_REFERENCES = WEIGHTS["reference_count"]
_W_ORIGIN = WEIGHTS["origin"]
# A true half-life (DESIGN, issue 6): 0.5 at 30 days. The source's exp(-age/30d) gives
# 1/e there; docs/decisions/recall.md records the choice.
RECENCY_RATE = math.log(2) / RECENCY_SCALE.total_seconds()

# The most the semantic term can add; a fast path may skip a row whose
# `score_without_semantic` plus this cannot beat the k-th score it already holds.
SEMANTIC_UPPER_BOUND = _W_SEMANTIC
# The most recency, references and origin can add together.
STATIC_MAX = _W_RECENCY + _W_REFERENCES + _W_ORIGIN * max(ORIGIN_WEIGHTS.values())
# For a question, the share of a memory's score that recency, references and origin can
# move; the rest is relevance alone. So they decide among memories within about a tenth of
# each other's relevance, and a memory recalled for every question cannot crowd out one
# that matches better (docs/decisions/recall.md, "Usage within a band").
CONTEXT_SHARE = 0.4
QUESTION_BASE = 1.0 - CONTEXT_SHARE
QUESTION_SLOPE = CONTEXT_SHARE / STATIC_MAX

# --------------------------------------------------------------------------------------
# Per-surface budgets


@dataclass(frozen=True, slots=True)
class SurfaceBudget:
    max_entries: int
    rationale_visible: bool


BUDGETS: Mapping[RecallSurface, SurfaceBudget] = MappingProxyType(
    {
        RecallSurface.ASSISTANT: SurfaceBudget(max_entries=12, rationale_visible=True),
        # three continuation cards: no room for prose; the member's page explains them
        RecallSurface.SHELL: SurfaceBudget(max_entries=3, rationale_visible=False),
        RecallSurface.NOTEBOOK: SurfaceBudget(max_entries=25, rationale_visible=True),
        # operators must be able to say why they saw each entry
        RecallSurface.ADMIN: SurfaceBudget(max_entries=50, rationale_visible=True),
    }
)

# Provenance kinds whose text came from outside Iris (an import, an attached document).
EXTERNAL_PROVENANCE_KINDS: frozenset[str] = frozenset(
    {ProvenanceKind.MANUAL_IMPORT, ProvenanceKind.NOTEBOOK_ATTACHMENT}
)

# --------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class Suppression:
    reason: SuppressionReason | str
    started_at: datetime
    ends_at: datetime | None
    notes: str = ""


@dataclass(frozen=True, slots=True)
class MultiActor:
    actor_handle: str
    relationship_note: str
    sensitive_interaction: bool


@dataclass(frozen=True, slots=True)
class ProvenanceLink:
    kind: ProvenanceKind | str
    ref: str
    captured_at: datetime


@dataclass(frozen=True, slots=True)
class ConsentRecord:
    """A ConsentEntry a revision carries, as the consent ledger gave it at the write (its
    moments already RFC 3339 UTC text)."""

    category: str
    granted_at: str
    revoked_at: str | None
    source: str


def consent_records(stored: Iterable[Mapping[str, Any]]) -> tuple[ConsentRecord, ...]:
    """A revision's stored `consents` (ConsentEntry wire dicts) as recall's values."""
    return tuple(
        ConsentRecord(
            category=str(item["category"]),
            granted_at=str(item["grantedAt"]),
            revoked_at=None if item["revokedAt"] is None else str(item["revokedAt"]),
            source=str(item["source"]),
        )
        for item in stored
    )


@dataclass(frozen=True, slots=True)
class Candidate:
    """The current revision of one memory entry, as recall sees it.

    Caller's contract: at most one candidate per `entry_id`; aware datetimes. The last
    three fields only reach the wire (no gate or score reads them); the database paths
    always load them, pure tests may leave them out.
    """

    entry_id: str
    tenant_id: str
    user_id: str
    scope_kind: ScopeKind | str
    scope_key: str
    category: Category | str
    body: str
    subject: str | None
    origin: Origin | str
    lifecycle: Lifecycle | str
    suppression: Suppression | None
    multi_actor: MultiActor | None
    provenance_chain: tuple[ProvenanceLink, ...]
    reference_count: int
    last_referenced_at: datetime | None
    created_at: datetime
    updated_at: datetime
    revision: int
    external: bool
    revision_id: str = ""
    supersedes: str | None = None
    consents: tuple[ConsentRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """One recall. `consented_categories` is the member's ledger-derived set, already
    narrowed by the request (a request never widens it); bare categories (`medical`) and
    consent types (`category:medical`) are both accepted.
    """

    tenant_id: str
    user_id: str
    scope_kind: ScopeKind | str
    scope_key: str
    query: str
    surface: RecallSurface | str
    context: str
    crisis_frame: bool
    safety_critical_context: bool
    consented_categories: frozenset[str]
    multi_actor_sensitive_consent: bool
    dsar_fulfillment: bool
    limit: int | None
    now: datetime
    tenant_policy_allows_notebook_tenant: bool = False

    def __post_init__(self) -> None:
        if self.now.tzinfo is None or self.now.utcoffset() is None:
            raise ValueError("now must be timezone-aware")
        if self.context not in SURFACING_CONTEXTS:
            raise ValueError(f"unknown surfacing context {self.context!r}")
        RecallSurface(self.surface)
        ScopeKind(self.scope_kind)
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")


@dataclass(frozen=True, slots=True)
class RecalledEntry:
    candidate: Candidate  # multi_actor already redacted where the surface requires it
    score: float
    surface_rationale: str  # "" on surfaces whose budget hides rationale
    provenance_chain: tuple[ProvenanceLink, ...]


@dataclass(frozen=True, slots=True)
class AuditEnvelope:
    """Counts and ids only, never content (DESIGN invariant 4).

    `evaluated_count == sum(suppression_counts) + deduped_count + over_budget_count
    + len(returned_ids)`. The last two are not on the spec's wire shape; the audit event
    carries them.
    """

    scope_key: str
    returned_ids: tuple[str, ...]
    suppression_counts: Mapping[str, int]  # sorted by reason
    evaluated_count: int
    deduped_count: int = 0
    over_budget_count: int = 0


@dataclass(frozen=True, slots=True)
class RecallResult:
    entries: tuple[RecalledEntry, ...]
    audit_envelope: AuditEnvelope


SemanticFn = Callable[[str, Candidate], float]

# --------------------------------------------------------------------------------------
# Semantic similarity (the spec's default: token-set Jaccard)

_TOKEN = re.compile(r"[^\W_]+")  # runs of Unicode letters and digits


def tokens(text: str) -> frozenset[str]:
    """Lower-cased word tokens longer than two characters."""
    return frozenset(t for t in _TOKEN.findall(text.casefold()) if len(t) > 2)


def _jaccard(query_tokens: frozenset[str], body: str) -> float:
    if not query_tokens:
        return 0.0
    body_tokens = tokens(body)
    shared = len(query_tokens & body_tokens)
    if not shared:
        return 0.0
    return shared / (len(query_tokens) + len(body_tokens) - shared)


def jaccard_semantic(query: str, candidate: Candidate) -> float:
    """Token-set Jaccard of the query and the entry body, in [0, 1]."""
    return _jaccard(tokens(query), candidate.body)


# --------------------------------------------------------------------------------------
# Scoring


def recency(candidate: Candidate, now: datetime) -> float:
    anchor = candidate.last_referenced_at or candidate.updated_at
    age = (now - anchor).total_seconds()
    # A timestamp ahead of `now` (clock skew) counts as fresh, never as more than fresh:
    # the term stays in [0, 1], which the fast path's bound relies on.
    return 1.0 if age <= 0 else math.exp(-age * RECENCY_RATE)


def score_without_semantic(candidate: Candidate, now: datetime) -> float:
    """Recency, reference and origin terms, unrounded. Falls monotonically with the time
    since the last reference, so a scan in that order can stop early."""
    references = min(1.0, max(0, candidate.reference_count) / REFERENCE_COUNT_SATURATION)
    return (
        _W_RECENCY * recency(candidate, now)
        + _W_REFERENCES * references
        # An Origin hashes and compares as its value, so a plain origin string finds it.
        + _W_ORIGIN * ORIGIN_WEIGHTS[cast(Origin, candidate.origin)]
    )


def _clamp_unit(value: float) -> float:
    # An injected ranker may return NaN or stray outside [0, 1]; the bound must still hold.
    if not value > 0.0:
        return 0.0
    return 1.0 if value > 1.0 else value


def is_briefing(query: str) -> bool:
    """Whether a query asks for a briefing (what matters most) rather than a question: it
    holds no word (`tokens`), so nothing can match it and relevance cannot rank."""
    return not tokens(query)


def score(
    candidate: Candidate, now: datetime, semantic_value: float, *, briefing: bool = False
) -> float:
    """The blended score, rounded so float noise cannot reorder results.

    For a question, the semantic value times a factor that recency, references and origin
    move within `CONTEXT_SHARE`: they order memories that are comparably relevant, a
    memory matching nothing gets nothing from them, and one matching a tenth less needs
    more than every bump there is to pass. For a briefing they count in full, as the
    spec's blend has it.
    """
    value = _clamp_unit(semantic_value)
    static = score_without_semantic(candidate, now)
    if briefing:
        return round(_W_SEMANTIC * value + static, SCORE_DECIMALS)
    return round(value * question_factor(static), SCORE_DECIMALS)


def question_factor(static: Any) -> Any:
    """What a question's semantic value is multiplied by: 1 - `CONTEXT_SHARE` plus the share
    recency, references and origin (`static`, a float or a numpy array of them) earn."""
    return QUESTION_BASE + QUESTION_SLOPE * static


def max_possible_score(candidate: Candidate, now: datetime) -> float:
    """An upper bound on `score` whatever the semantic term and the query (rounding is
    monotone; a question's score is highest with a semantic value of 1)."""
    static = score_without_semantic(candidate, now)
    return round(
        max(static + SEMANTIC_UPPER_BOUND, question_factor(static)),
        SCORE_DECIMALS,
    )


# --------------------------------------------------------------------------------------
# Scopes


def reachable_scope_keys(request: RecallRequest) -> dict[str, ScopeKind]:
    """Every scope key the request may read, mapped to its kind.

    All of them belong to the request's member (and tenant); a database fast path can
    filter on exactly these keys.
    """
    kind = ScopeKind(request.scope_kind)
    _, identifiers = scopes.parse_scope_key(request.scope_key, kind)
    if identifiers["userId"] != request.user_id:
        raise ValueError("scope key names another member")
    if identifiers.setdefault("tenantId", request.tenant_id) != request.tenant_id:
        raise ValueError("scope key names another tenant")
    kinds = scopes.reachable_kinds(
        kind, tenant_policy_allows=request.tenant_policy_allows_notebook_tenant
    )
    return {scopes.key_from(k, identifiers): k for k in sorted(kinds)}


def _key_tenant(scope_key: str) -> str:
    parts = scope_key.split(":", 2)
    return parts[1] if len(parts) > 1 else ""


def is_external(origin: Origin | str, provenance_chain: Iterable[ProvenanceLink]) -> bool:
    """Whether an entry's text came from outside Iris (the caller sets `Candidate.external`)."""
    return origin == Origin.IMPORTED or any(
        link.kind in EXTERNAL_PROVENANCE_KINDS for link in provenance_chain
    )


# --------------------------------------------------------------------------------------
# Gates


class _Gates:
    """The request's gates, precomputed once so each candidate costs a few lookups."""

    __slots__ = (
        "tenant_id",
        "user_id",
        "scopes",
        "crisis_frame",
        "crisis_keeps_safety",
        "now",
        "category_verdicts",
        "multi_actor_verdict",
    )

    def __init__(self, request: RecallRequest) -> None:
        self.tenant_id = request.tenant_id
        self.user_id = request.user_id
        self.scopes = reachable_scope_keys(request)
        self.crisis_frame = request.crisis_frame
        self.crisis_keeps_safety = request.safety_critical_context
        self.now = request.now
        consented = frozenset(
            c.removeprefix(CATEGORY_CONSENT_PREFIX) for c in request.consented_categories
        )
        operator_restricted = (
            RecallSurface(request.surface) is RecallSurface.ADMIN and not request.dsar_fulfillment
        )
        context = request.context

        def verdict(has_consent: bool, allowed: frozenset[str]) -> str | None:
            if not has_consent:
                return SENSITIVE_WITHOUT_CONSENT
            if operator_restricted:
                allowed = allowed & OPERATOR_SENSITIVE_CONTEXTS
            return None if context in allowed else SENSITIVE_OUTSIDE_CONTEXT

        # Keyed by the plain value so a `str` category looks up the same as a `Category`.
        self.category_verdicts: dict[str, str | None] = {
            c.value: verdict(c.value in consented, SENSITIVE_CONTEXTS[c])
            for c in SENSITIVE_CATEGORIES
        }
        self.multi_actor_verdict = verdict(
            request.multi_actor_sensitive_consent, MULTI_ACTOR_SENSITIVE_CONTEXTS
        )

    def drop_reason(self, c: Candidate) -> str | None:
        if c.tenant_id != self.tenant_id:
            return TENANT_MISMATCH
        kind = c.scope_kind
        if kind in _TENANT_KEYED_KINDS and _key_tenant(c.scope_key) != self.tenant_id:
            return TENANT_MISMATCH
        # Another member's row is a scope miss, not a tenant one: every scope key carries
        # its member, and `tenant-mismatch` stays reserved for the cross-tenant alarm.
        if c.user_id != self.user_id or self.scopes.get(c.scope_key) != kind:
            return SCOPE_MISMATCH
        if self.crisis_frame and not (self.crisis_keeps_safety and c.category == Category.SAFETY):
            return CRISIS_FRAME
        suppression = c.suppression
        if suppression is not None and (
            suppression.ends_at is None or suppression.ends_at > self.now
        ):
            return str(suppression.reason)
        if c.lifecycle != Lifecycle.ACTIVE:
            return _LIFECYCLE_DROPS.get(c.lifecycle) or f"{LIFECYCLE_DROP_PREFIX}{c.lifecycle}"
        verdict = self.category_verdicts.get(c.category)
        actor = c.multi_actor
        if actor is not None and actor.sensitive_interaction:
            # Both rules apply; a missing consent outranks a wrong context.
            other = self.multi_actor_verdict
            if other is not None and (verdict is None or other == SENSITIVE_WITHOUT_CONSENT):
                verdict = other
        return verdict


GateFacts = Callable[[str, str | None, bool, str, bool], str | None]


def reachable_drop_reason(request: RecallRequest) -> GateFacts:
    """The gates' verdict on a candidate of the request's member in a reachable scope key,
    from the only facts they then read: `(category, suppression reason or None, whether
    that suppression is still on, lifecycle, whether it records a sensitive interaction
    with someone else)`. A fast path counts the rows it never reads with this, by the same
    rules `resolve` applies to the rows it does."""
    gates = _Gates(request)
    key, kind = next(iter(gates.scopes.items()))
    now = request.now

    def reason(
        category: str,
        suppression_reason: str | None,
        suppression_on: bool,
        lifecycle: str,
        sensitive_interaction: bool,
    ) -> str | None:
        probe = Candidate(
            entry_id="",
            tenant_id=request.tenant_id,
            user_id=request.user_id,
            scope_kind=kind,
            scope_key=key,
            category=category,
            body="",
            subject=None,
            origin=Origin.USER_STATED,
            lifecycle=lifecycle,
            suppression=None
            if not suppression_reason
            else Suppression(
                reason=suppression_reason,
                started_at=now,
                ends_at=None if suppression_on else now,
            ),
            multi_actor=MultiActor("", "", True) if sensitive_interaction else None,
            provenance_chain=(),
            reference_count=0,
            last_referenced_at=None,
            created_at=now,
            updated_at=now,
            revision=1,
            external=False,
        )
        return gates.drop_reason(probe)

    return reason


# --------------------------------------------------------------------------------------
# Resolution

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _dedupe(survivors: list[Candidate]) -> list[Candidate]:
    """Most recent `updated_at` wins within a conflict cluster; ties go to the lower id.

    The key is a tuple, so a '::' inside a subject cannot merge two keys. An entry without
    a subject is its own cluster: an unknown subject is no evidence of a conflict.
    """
    if len({c.entry_id for c in survivors}) != len(survivors):
        raise ValueError("candidates must hold one revision per entry")
    winners: dict[object, Candidate] = {}
    for c in survivors:
        if c.subject:
            actor = c.multi_actor
            key: object = (str(c.category), actor.actor_handle if actor else "", c.subject)
        else:
            key = c.entry_id
        held = winners.get(key)
        if (
            held is None
            or c.updated_at > held.updated_at
            or (c.updated_at == held.updated_at and c.entry_id < held.entry_id)
        ):
            winners[key] = c
    return list(winners.values())


def resolve(
    candidates: Iterable[Candidate],
    request: RecallRequest,
    *,
    semantic: SemanticFn = jaccard_semantic,
    relevance_floor: float = 0.0,
) -> RecallResult:
    """Gate, dedupe, score, budget and explain `candidates` for `request`.

    With a question (`is_briefing` false), a winner whose semantic value is not above
    `relevance_floor` matches nothing of it and is dropped (`NO_MATCH`): 0 for Jaccard and
    BM25, which are 0 exactly when no word is shared; the ranker's calibrated floor for
    one that never gives 0 (`memory.recall.ranking.semantic.RELEVANCE_FLOORS`).

    Deterministic: the same candidates (in any order) and request give the same result.
    """
    gates = _Gates(request)
    drop_reason = gates.drop_reason
    counts: dict[str, int] = {}
    survivors: list[Candidate] = []
    evaluated = 0
    for c in candidates:
        evaluated += 1
        reason = drop_reason(c)
        if reason is None:
            survivors.append(c)
        else:
            counts[reason] = counts.get(reason, 0) + 1

    # Dedupe before scoring: it keys on updated_at, not score, so the outcome is the same
    # and losers never pay for the (possibly expensive) semantic call. Before relevance
    # too: the most recent word on a subject supersedes older ones even when it does not
    # match the question, so an older, matching, superseded memory never comes back.
    winners = _dedupe(survivors)

    now = request.now
    query_tokens = tokens(request.query)
    if semantic is jaccard_semantic:
        # Tokenise the query once per request, not once per candidate.
        semantic_values = [_jaccard(query_tokens, c.body) for c in winners]
    else:
        query = request.query
        semantic_values = [semantic(query, c) for c in winners]
    briefing = not query_tokens
    scored: list[tuple[float, float, Candidate]] = []
    unmatched = 0
    for c, s in zip(winners, semantic_values, strict=True):
        if not briefing and not _clamp_unit(s) > relevance_floor:
            unmatched += 1
            continue
        scored.append((score(c, now, s, briefing=briefing), s, c))
    if unmatched:
        counts[NO_MATCH] = unmatched

    surface = RecallSurface(request.surface)
    budget = BUDGETS[surface]
    cap = budget.max_entries if request.limit is None else min(budget.max_entries, request.limit)
    # Score desc, then updated_at desc, then id asc: a total order, so ties cannot flap.
    top = heapq.nsmallest(
        cap, scored, key=lambda t: (-t[0], _EPOCH - t[2].updated_at, t[2].entry_id)
    )

    redact = surface is RecallSurface.ADMIN and not request.dsar_fulfillment
    entries = tuple(
        RecalledEntry(
            candidate=replace(c, multi_actor=None) if redact and c.multi_actor else c,
            score=value,
            surface_rationale=(
                explain(c, request, query_tokens, semantic_value, redact_actor=redact)
                if budget.rationale_visible
                else ""
            ),
            provenance_chain=c.provenance_chain,
        )
        for value, semantic_value, c in top
    )
    return RecallResult(
        entries=entries,
        audit_envelope=AuditEnvelope(
            scope_key=request.scope_key,
            returned_ids=tuple(e.candidate.entry_id for e in entries),
            suppression_counts=MappingProxyType(dict(sorted(counts.items()))),
            evaluated_count=evaluated,
            deduped_count=len(survivors) - len(winners),
            over_budget_count=len(scored) - len(entries),
        ),
    )


# --------------------------------------------------------------------------------------
# Rationale: why an entry surfaced, in words the member can read. Never the body itself.

_ORIGIN_PHRASES: dict[str, str] = {
    Origin.USER_STATED: "you said this yourself",
    Origin.USER_CONFIRMED: "you confirmed this",
    Origin.SUMMARIZED_FROM_SESSION: "summarised from one of your conversations",
    Origin.IMPORTED: "imported from something you shared",
    Origin.MODEL_INFERRED: "the assistant inferred this and you have not confirmed it",
    Origin.OPERATOR_COPILOT: "noted by a support operator's assistant",
}
_SCOPE_PHRASES: dict[str, str] = {
    ScopeKind.PROFILE: "from your profile",
    ScopeKind.SESSION: "from this conversation",
    ScopeKind.SCENE: "from this scene",
    ScopeKind.POSE: "from this pose session",
    ScopeKind.NOTEBOOK: "from this notebook",
    ScopeKind.TENANT: "from your organisation's space",
    ScopeKind.CRISIS: "from this conversation's safety notes",
    ScopeKind.OPERATOR_COPILOT: "from support notes about your account",
}
_MAX_MATCHED_WORDS = 3
_RELATED_MEANING = 0.5  # an injected ranker's score above which "related" is worth saying


def _ago(delta: timedelta) -> str:
    days = delta.days
    if days < 1:
        return "today"
    if days < 2:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    if days < 365:
        months = days // 30
        return "a month ago" if months == 1 else f"{months} months ago"
    years = days // 365
    return "a year ago" if years == 1 else f"{years} years ago"


def explain(
    candidate: Candidate,
    request: RecallRequest,
    query_tokens: frozenset[str] | None = None,
    semantic_value: float = 0.0,
    *,
    redact_actor: bool = False,
) -> str:
    """The `surfaceRationale` of one surfaced entry, e.g. "From your profile; you said this
    yourself; mentioned 4 times; last came up 3 days ago; matches 'coffee'"."""
    if query_tokens is None:
        query_tokens = tokens(request.query)
    parts = [
        _SCOPE_PHRASES.get(candidate.scope_kind, "from your memory"),
        _ORIGIN_PHRASES.get(candidate.origin, "source unknown"),
    ]
    n = max(0, candidate.reference_count)
    if n == 0:
        parts.append("not brought up before")
    else:
        parts.append("mentioned once" if n == 1 else f"mentioned {n} times")
    if candidate.last_referenced_at is not None:
        parts.append(f"last came up {_ago(request.now - candidate.last_referenced_at)}")
    else:
        parts.append(f"last updated {_ago(request.now - candidate.updated_at)}")
    if query_tokens:
        body_tokens = tokens(candidate.body)
        # In the order the member asked, so the phrase reads naturally and is deterministic.
        matched = [
            t
            for t in dict.fromkeys(_TOKEN.findall(request.query.casefold()))
            if t in query_tokens and t in body_tokens
        ]
        if matched:
            parts.append("matches " + ", ".join(f"'{w}'" for w in matched[:_MAX_MATCHED_WORDS]))
        elif semantic_value >= _RELATED_MEANING:
            parts.append("related to what you asked")
    if candidate.category in SENSITIVE_CATEGORIES:
        label = str(candidate.category).replace("_", " ")
        parts.append(f"you allowed {label} memories in {request.context} conversations")
    actor = candidate.multi_actor
    if actor is not None and actor.sensitive_interaction and not redact_actor:
        parts.append("involves someone else; you allowed that here")
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


# --------------------------------------------------------------------------------------
# Wire shape (DESIGN: "Wire contract"): camelCase, enum values as spelled, RFC 3339 UTC.


def rfc3339(moment: datetime) -> str:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("naive datetime on the wire")
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _optional_time(moment: datetime | None) -> str | None:
    return None if moment is None else rfc3339(moment)


def _external_source(c: Candidate) -> str:
    for link in c.provenance_chain:
        if link.kind in EXTERNAL_PROVENANCE_KINDS:
            return f"{link.kind}:{link.ref}"
    return str(c.origin)


def provenance_to_wire(chain: Iterable[ProvenanceLink]) -> list[dict[str, Any]]:
    return [
        {"kind": str(link.kind), "ref": link.ref, "capturedAt": rfc3339(link.captured_at)}
        for link in chain
    ]


def entry_to_wire(c: Candidate, *, envelope_external: bool = True) -> dict[str, Any]:
    """The MemoryEntry on the wire, the one shape every route gives (docs/decisions/layout.md,
    "One entry shape"): the memory API renders each revision through it, recall each
    surfaced entry. `memory.serializers.MemoryEntryOut` is its OpenAPI schema.

    Recall hands third-party text over inside the external-content envelope; the memory API
    gives the member's stored text back as stored (`envelope_external=False`).
    """
    s = c.suppression
    actor = c.multi_actor
    # The scope object is read back from the key, so every route names the identifiers in
    # the one order `memory.rules.scopes` builds keys in.
    _, identifiers = scopes.parse_scope_key(c.scope_key)
    external = envelope_external and c.external
    return {
        "id": c.entry_id,
        "revisionId": c.revision_id,
        "tenantId": c.tenant_id,
        "userId": c.user_id,
        "scope": {"kind": str(c.scope_kind), **identifiers},
        "scopeKey": c.scope_key,
        "category": str(c.category),
        "body": wrap_external(c.body, source=_external_source(c)) if external else c.body,
        "subject": c.subject or None,
        "origin": str(c.origin),
        "lifecycle": str(c.lifecycle),
        "suppression": None
        if s is None
        else {
            "reason": str(s.reason),
            "startedAt": rfc3339(s.started_at),
            "endsAt": _optional_time(s.ends_at),
            "notes": s.notes,
        },
        "multiActor": None
        if actor is None
        else {
            "actorHandle": actor.actor_handle,
            "relationshipNote": actor.relationship_note,
            "sensitiveInteraction": actor.sensitive_interaction,
        },
        "consents": [
            {
                "category": consent.category,
                "grantedAt": consent.granted_at,
                "revokedAt": consent.revoked_at,
                "source": consent.source,
            }
            for consent in c.consents
        ],
        "provenanceChain": provenance_to_wire(c.provenance_chain),
        "referenceCount": c.reference_count,
        "lastReferencedAt": _optional_time(c.last_referenced_at),
        "createdAt": rfc3339(c.created_at),
        "updatedAt": rfc3339(c.updated_at),
        "revision": c.revision,
        "supersedes": c.supersedes,
    }


def to_wire(result: RecallResult) -> dict[str, Any]:
    envelope = result.audit_envelope
    return {
        "entries": [
            {
                "entry": entry_to_wire(e.candidate),
                "score": e.score,
                "surfaceRationale": e.surface_rationale,
                "provenanceChain": provenance_to_wire(e.provenance_chain),
            }
            for e in result.entries
        ],
        "auditEnvelope": {
            "scopeKey": envelope.scope_key,
            "returnedIds": list(envelope.returned_ids),
            "suppressionCounts": dict(envelope.suppression_counts),
            "evaluatedCount": envelope.evaluated_count,
        },
    }
