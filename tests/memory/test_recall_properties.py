"""Recall invariants over generated multi-tenant, multi-member, multi-scope memory.

The checks below restate the rules independently of `memory.recall`'s internals, so a bug
in the pipeline cannot hide behind the same bug in the test.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from consent.enums import SENSITIVE_CATEGORIES, Category
from memory.enums import (
    SCOPE_IDENTIFIERS,
    Lifecycle,
    Origin,
    ProvenanceKind,
    RecallSurface,
    ScopeKind,
    SuppressionReason,
)
from memory.recall.pipeline import (
    BUDGETS,
    DROP_REASONS,
    SURFACING_CONTEXTS,
    Candidate,
    MultiActor,
    ProvenanceLink,
    RecallRequest,
    Suppression,
    max_possible_score,
    resolve,
    to_wire,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
TENANTS = ["t-a", "t-b"]
MEMBERS = ["u-a", "u-b"]
IDENTIFIER_VALUES = {
    "sessionId": ["s-1", "s-2"],
    "sceneId": ["sc-1", "sc-2"],
    "poseId": ["p-1"],
    "notebookId": ["n-1", "n-2"],
    "operatorId": ["op-1", "op-2"],
}
WORDS = ["coffee", "tea", "morning", "run", "doctor", "rent", "sister", "prayer", "court", "in"]

# The rules, written out again from the spec rather than imported.


def words_of(text: str) -> set[str]:
    """Jaccard's words: runs of letters and digits, case-folded, longer than two."""
    return {w for w in re.findall(r"[^\W_]+", text.casefold()) if len(w) > 2}


REACH = {
    "profile": {"profile"},
    "session": {"session", "profile"},
    "scene": {"scene", "session", "profile"},
    "pose": {"pose", "scene", "session", "profile"},
    "notebook": {"notebook", "profile"},
    "tenant": {"tenant"},
    "crisis": {"crisis", "session", "profile"},
    "operator-copilot": {"operator-copilot"},
}
_H = {"health", "safety", "crisis"}
_L = {"legal", "safety", "crisis"}
_F = {"financial", "safety", "crisis"}
_R = {"relationship", "safety", "crisis"}
_I = {"identity", "safety", "crisis"}
ALLOWED_CONTEXTS = {
    "pose_alignment": _H,
    "biometric": _H,
    "medical": _H,
    "physical_health": _H,
    "mental_health": _H,
    "substance_use": _H,
    "sexuality": _I,
    "gender_identity": _I,
    "spiritual": {"spiritual"},
    "religion_user_redacted": {"spiritual"},
    "financial": _F,
    "financial_distress": _F,
    "legal": _L,
    "legal_jeopardy": _L,
    "immigration_status": _L,
    "abuse_history": _R,
    "relationship_violence": _R,
    "sexual": {"health", "relationship", "safety", "crisis"},
    "safety": {"safety", "crisis"},
}
SENSITIVE_VALUES = sorted(c.value for c in SENSITIVE_CATEGORIES)
ALL_CATEGORIES = [c.value for c in Category]
# a few categories drawn often, so conflict clusters and sensitive rows are common
COMMON_CATEGORIES = ["preference", "preference", "relationship", "medical", "safety"]
ALL_KINDS = [k.value for k in ScopeKind]


def key_of(kind: str, ids: dict[str, str]) -> str:
    return ":".join([kind, *(ids[n] for n in SCOPE_IDENTIFIERS[ScopeKind(kind)])])


# Generation is kept cheap (one plain draw per field, values precomputed): these tests run
# hundreds of examples of up to 40 rows each.
IDENTIFIER_COMBOS = [
    dict(zip(IDENTIFIER_VALUES, values, strict=True))
    for values in itertools.product(*IDENTIFIER_VALUES.values())
]
BODIES = [" ".join(words) for n in (1, 2, 3) for words in itertools.combinations(WORDS[:6], n)]
SUPPRESSIONS = [None] * 24 + [
    Suppression(reason, NOW - timedelta(days=3), ends_at)
    for reason in SuppressionReason
    for ends_at in (None, NOW - timedelta(days=1), NOW, NOW + timedelta(hours=1))
]
ACTORS = [None] * 4 + [
    MultiActor(handle, "friend", sensitive) for handle in ("h-1", "h-2") for sensitive in (0, 1)
]
times = st.integers(min_value=-2 * 86400, max_value=200 * 86400).map(
    lambda s: NOW - timedelta(seconds=s)
)


# Strategies are built once: constructing one per draw costs more than the draw itself.
NEAR = st.sampled_from([True] * 9 + [False])  # near the request nine times in ten
ANY_TENANT = st.sampled_from(TENANTS)
ANY_MEMBER = st.sampled_from(MEMBERS)
ANY_KIND = st.sampled_from(ALL_KINDS)
ANY_COMBO = st.sampled_from(IDENTIFIER_COMBOS)
ANY_ORIGIN = st.sampled_from(list(Origin))
ANY_LIFECYCLE = st.sampled_from(list(Lifecycle))
CATEGORY = st.sampled_from(COMMON_CATEGORIES * 3 + ALL_CATEGORIES)
BODY = st.sampled_from(BODIES)
SUBJECT = st.sampled_from([None, "", "coffee", "coffee", "job"])
SUPPRESSION = st.sampled_from(SUPPRESSIONS)
ACTOR = st.sampled_from(ACTORS)
REFERENCE_COUNT = st.integers(min_value=0, max_value=30)
LAST_REFERENCED = st.none() | times
ROW_COUNT = st.integers(0, 40)
# the kinds a row is drawn from: reachable ones most of the time, any kind otherwise
ROW_KIND = {
    kind: st.sampled_from(
        sorted(REACH[kind] | ({"tenant"} if kind == "notebook" else set())) * 8 + ALL_KINDS
    )
    for kind in ALL_KINDS
}


def key_of_combo(kind: str, tenant: str, member: str, combo: dict[str, str]) -> str:
    return key_of(kind, {"tenantId": tenant, "userId": member, **combo})


@st.composite
def requests(draw: st.DrawFn) -> RecallRequest:
    tenant = draw(ANY_TENANT)
    member = draw(ANY_MEMBER)
    kind = draw(ANY_KIND)
    return RecallRequest(
        tenant_id=tenant,
        user_id=member,
        scope_kind=kind,
        scope_key=key_of_combo(kind, tenant, member, draw(ANY_COMBO)),
        query=draw(st.sampled_from(["", *WORDS, *BODIES])),
        surface=draw(st.sampled_from(list(RecallSurface))),
        context=draw(st.sampled_from(sorted(SURFACING_CONTEXTS))),
        crisis_frame=not draw(NEAR),
        safety_critical_context=draw(st.booleans()),
        consented_categories=frozenset(draw(st.sets(st.sampled_from(SENSITIVE_VALUES)))),
        multi_actor_sensitive_consent=draw(st.booleans()),
        dsar_fulfillment=draw(st.booleans()),
        limit=None if draw(NEAR) else draw(st.integers(0, 30)),
        now=NOW,
        tenant_policy_allows_notebook_tenant=draw(st.booleans()),
    )


@st.composite
def candidate_fields(draw: st.DrawFn, req: RecallRequest) -> dict[str, Any]:
    """A row near the request most of the time (so gates past the first ones get exercised),
    from another tenant, member or scope some of the time."""
    tenant = req.tenant_id if draw(NEAR) else draw(ANY_TENANT)
    member = req.user_id if draw(NEAR) else draw(ANY_MEMBER)
    kind = draw(ROW_KIND[str(req.scope_kind)])
    combo = draw(ANY_COMBO)
    if draw(NEAR):  # share the request's session, scene, notebook...
        names = SCOPE_IDENTIFIERS[ScopeKind(req.scope_kind)]
        request_ids = dict(zip(names, req.scope_key.split(":")[1:], strict=True))
        combo = {name: request_ids.get(name, value) for name, value in combo.items()}
    # the key's own tenant and member usually agree with the row's, not always
    key_tenant = tenant if draw(NEAR) else draw(ANY_TENANT)
    key_member = member if draw(NEAR) else draw(ANY_MEMBER)
    updated_at = draw(times)
    origin = draw(ANY_ORIGIN)
    return {
        "tenant_id": tenant,
        "user_id": member,
        "scope_kind": kind if draw(NEAR) else draw(ANY_KIND),
        "scope_key": key_of_combo(kind, key_tenant, key_member, combo),
        "category": draw(CATEGORY),
        "body": draw(BODY),
        "subject": draw(SUBJECT),
        "origin": origin,
        "lifecycle": Lifecycle.ACTIVE if draw(NEAR) else draw(ANY_LIFECYCLE),
        "suppression": draw(SUPPRESSION),
        "multi_actor": draw(ACTOR),
        "provenance_chain": (ProvenanceLink(ProvenanceKind.SESSION_TURN, "turn", updated_at),),
        "reference_count": draw(REFERENCE_COUNT),
        "last_referenced_at": draw(LAST_REFERENCED),
        "created_at": updated_at - timedelta(days=1),
        "updated_at": updated_at,
        "revision": 1,
        "external": origin == Origin.IMPORTED,
    }


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Candidate], RecallRequest]:
    req = draw(requests())
    # a drawn length, not st.lists: its lists are short on average, and budgets need many
    fields = [draw(candidate_fields(req)) for _ in range(draw(ROW_COUNT))]
    # ids are unique per entry (the caller's contract); their order is drawn, not given
    numbers = draw(st.permutations(range(len(fields))))
    rows = [Candidate(entry_id=f"e-{n:03d}", **f) for n, f in zip(numbers, fields, strict=True)]
    return rows, req


def reachable_keys(req: RecallRequest) -> set[str]:
    ids: dict[str, str] = {"tenantId": req.tenant_id}
    names = SCOPE_IDENTIFIERS[ScopeKind(req.scope_kind)]
    ids.update(zip(names, req.scope_key.split(":")[1:], strict=True))
    kinds = set(REACH[str(req.scope_kind)])
    if req.scope_kind == "notebook" and req.tenant_policy_allows_notebook_tenant:
        kinds.add("tenant")
    return {key_of(k, ids) for k in kinds}


def sensitive_contexts(req: RecallRequest, allowed: set[str]) -> set[str]:
    if req.surface == RecallSurface.ADMIN and not req.dsar_fulfillment:
        return allowed & {"safety", "crisis"}
    return allowed


def passes_every_gate(c: Candidate, req: RecallRequest) -> bool:
    """The spec's gates, restated."""
    if c.tenant_id != req.tenant_id or c.user_id != req.user_id:
        return False
    if c.scope_kind in ("tenant", "operator-copilot") and c.scope_key.split(":")[1] != (
        req.tenant_id
    ):
        return False
    if c.scope_key not in reachable_keys(req) or c.scope_key.split(":")[0] != c.scope_kind:
        return False
    if req.crisis_frame and not (req.safety_critical_context and c.category == "safety"):
        return False
    s = c.suppression
    if s is not None and (s.ends_at is None or s.ends_at > req.now):
        return False
    if c.lifecycle != "active":
        return False
    if c.category in ALLOWED_CONTEXTS and not (
        c.category in req.consented_categories
        and req.context in sensitive_contexts(req, ALLOWED_CONTEXTS[c.category])
    ):
        return False
    actor = c.multi_actor
    if actor is not None and actor.sensitive_interaction:
        allowed = sensitive_contexts(req, {"relationship", "safety", "crisis"})
        if not (req.multi_actor_sensitive_consent and req.context in allowed):
            return False
    return True


@settings(max_examples=250, deadline=None)
@given(scenario=scenarios())
def test_recall_never_returns_what_the_gates_forbid(
    scenario: tuple[list[Candidate], RecallRequest],
) -> None:
    rows, req = scenario
    result = resolve(rows, req)
    by_id = {c.entry_id: c for c in rows}
    for entry in result.entries:
        original = by_id[entry.candidate.entry_id]
        assert passes_every_gate(original, req)
        # spelled out, for the reader of a failure
        assert original.tenant_id == req.tenant_id
        assert original.user_id == req.user_id
        assert original.scope_key in reachable_keys(req)
        assert original.lifecycle == "active"
        if req.crisis_frame:
            assert original.category == "safety" and req.safety_critical_context


@settings(max_examples=200, deadline=None)
@given(scenario=scenarios())
def test_budgets_redaction_and_accounting_hold(
    scenario: tuple[list[Candidate], RecallRequest],
) -> None:
    rows, req = scenario
    result = resolve(rows, req)
    envelope = result.audit_envelope
    cap = BUDGETS[RecallSurface(req.surface)].max_entries
    if req.limit is not None:
        cap = min(cap, req.limit)
    assert len(result.entries) <= cap

    if req.surface == RecallSurface.ADMIN and not req.dsar_fulfillment:
        assert all(e.candidate.multi_actor is None for e in result.entries)
        assert all(e["entry"]["multiActor"] is None for e in to_wire(result)["entries"])
    else:
        by_id = {c.entry_id: c for c in rows}
        assert all(e.candidate == by_id[e.candidate.entry_id] for e in result.entries)

    assert set(envelope.suppression_counts) <= DROP_REASONS
    assert list(envelope.suppression_counts) == sorted(envelope.suppression_counts)
    assert envelope.evaluated_count == len(rows)
    assert envelope.evaluated_count == (
        sum(envelope.suppression_counts.values())
        + envelope.deduped_count
        + envelope.over_budget_count
        + len(envelope.returned_ids)
    )
    # nothing the rules allow is lost except to dedupe, to matching nothing of the
    # question, or to the budget
    survivors = [c for c in rows if passes_every_gate(c, req)]
    unmatched = envelope.suppression_counts.get("no-match-for-query", 0)
    assert len(survivors) == (
        envelope.deduped_count + unmatched + envelope.over_budget_count + len(envelope.returned_ids)
    )
    # with a question, everything returned shares a word with it
    asked = words_of(req.query)
    if asked:
        assert all(words_of(e.candidate.body) & asked for e in result.entries)
    else:
        assert unmatched == 0
    assert envelope.returned_ids == tuple(e.candidate.entry_id for e in result.entries)
    assert len(set(envelope.returned_ids)) == len(envelope.returned_ids)


@settings(max_examples=150, deadline=None)
@given(scenario=scenarios())
def test_ranking_dedupe_and_score_bound(scenario: tuple[list[Candidate], RecallRequest]) -> None:
    rows, req = scenario
    result = resolve(rows, req)
    scores = [e.score for e in result.entries]
    assert scores == sorted(scores, reverse=True)

    survivors = [c for c in rows if passes_every_gate(c, req)]
    seen: set[tuple[str, str, str]] = set()
    for entry in result.entries:
        c = entry.candidate
        assert entry.score <= max_possible_score(c, NOW)
        if not c.subject:
            continue
        original = next(r for r in rows if r.entry_id == c.entry_id)
        handle = original.multi_actor.actor_handle if original.multi_actor else ""
        key = (str(c.category), handle, c.subject)
        assert key not in seen
        seen.add(key)
        # most recent wins within its conflict cluster
        rivals = [
            r
            for r in survivors
            if r.subject == c.subject
            and str(r.category) == str(c.category)
            and (r.multi_actor.actor_handle if r.multi_actor else "") == handle
        ]
        newest = min(rivals, key=lambda r: (NOW - r.updated_at, r.entry_id))
        assert newest.entry_id == c.entry_id


@settings(max_examples=100, deadline=None)
@given(scenario=scenarios(), data=st.data())
def test_output_is_byte_identical_for_any_candidate_order(
    scenario: tuple[list[Candidate], RecallRequest], data: st.DataObject
) -> None:
    rows, req = scenario
    expected = json.dumps(to_wire(resolve(rows, req)), sort_keys=True)
    shuffled = data.draw(st.permutations(rows))
    assert json.dumps(to_wire(resolve(shuffled, req)), sort_keys=True) == expected
    assert json.dumps(to_wire(resolve(rows, req)), sort_keys=True) == expected


@settings(max_examples=100, deadline=None)
@given(scenario=scenarios())
def test_prefiltering_by_the_gates_does_not_change_the_answer(
    scenario: tuple[list[Candidate], RecallRequest],
) -> None:
    rows, req = scenario
    """What a database fast path relies on: dropping gated rows early changes only counts."""
    full = resolve(rows, req)
    prefiltered = resolve([c for c in rows if passes_every_gate(c, req)], req)
    assert prefiltered.entries == full.entries
