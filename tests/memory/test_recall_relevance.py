"""Relevance first: usage and recency order memories that match a question, and never carry
one that matches nothing of it; the envelope counts every reachable row, on every path."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.enums import Origin, ScopeKind
from memory.models import MemoryEntry
from memory.recall import db as recall_db
from memory.recall import pipeline as recall
from memory.recall import snapshot as recall_snapshot
from memory.recall.ranking import semantic
from memory.recall.service import RecallAsk, build_request, recall_resolve
from tests.factories import as_member, recall_candidate, recall_request
from tests.memory.test_recall_fast_path import _first_revision

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
QUESTION = "what tea do I like"


def _candidate(entry_id: str, body: str, **fields: Any) -> recall.Candidate:
    """An old, inferred profile preference with no provenance: nothing in its favour but
    what it says."""
    old = NOW - timedelta(days=400)
    values: dict[str, Any] = {
        "origin": Origin.MODEL_INFERRED,
        "provenance_chain": (),
        "created_at": old,
        "updated_at": old,
        **fields,
    }
    return recall_candidate(entry_id, now=NOW, body=body, **values)


def _request(query: str = QUESTION, **fields: Any) -> recall.RecallRequest:
    values: dict[str, Any] = {"scope_kind": ScopeKind.PROFILE, "scope_key": "profile:u-1"}
    return recall_request(now=NOW, query=query, **{**values, **fields})


def test_a_question_does_not_get_what_matches_nothing_of_it() -> None:
    rows = [
        _candidate("e-tea", "I like green tea"),
        # fresh, often recalled, said by the member: still nothing to do with tea
        _candidate(
            "e-home",
            "I live in Lisbon",
            origin=Origin.USER_STATED,
            reference_count=50,
            last_referenced_at=NOW,
        ),
    ]
    result = recall.resolve(rows, _request())
    assert [e.candidate.entry_id for e in result.entries] == ["e-tea"]
    assert result.audit_envelope.suppression_counts == {"no-match-for-query": 1}


def test_an_empty_question_asks_for_a_briefing_of_what_matters_most() -> None:
    rows = [
        _candidate("e-tea", "I like green tea"),
        _candidate("e-home", "I live in Lisbon", reference_count=5, last_referenced_at=NOW),
    ]
    for query in ("", "  ", "a b"):  # no word of three letters or more
        result = recall.resolve(rows, _request(query))
        assert [e.candidate.entry_id for e in result.entries] == ["e-home", "e-tea"]
        assert result.audit_envelope.suppression_counts == {}


usage = st.tuples(
    st.integers(0, 10**6),  # references
    st.integers(0, 400 * 24 * 3600),  # seconds since the last reference
    st.sampled_from(list(Origin)),
)


@settings(max_examples=200, deadline=None)
@given(
    matched=st.lists(
        st.tuples(st.sampled_from(["tea", "green tea", "I like tea", "like"]), usage),
        min_size=1,
        max_size=5,
    ),
    unmatched=st.lists(usage, min_size=1, max_size=8),
    bumps=st.lists(st.integers(0, 10**6), min_size=8, max_size=8),
    limit=st.sampled_from([None, 1, 3]),
)
def test_no_number_of_bumps_lifts_an_unmatched_memory_above_a_matched_one(
    matched: list[tuple[str, tuple[int, int, Origin]]],
    unmatched: list[tuple[int, int, Origin]],
    bumps: list[int],
    limit: int | None,
) -> None:
    def row(entry_id: str, body: str, refs: int, age: int, origin: Origin) -> recall.Candidate:
        return _candidate(
            entry_id,
            body,
            reference_count=refs,
            last_referenced_at=NOW - timedelta(seconds=age),
            origin=origin,
        )

    hits = [row(f"m-{i}", body, *u) for i, (body, u) in enumerate(matched)]
    misses = [row(f"u-{i}", "I live in Lisbon", *u) for i, u in enumerate(unmatched)]
    request = _request(limit=limit)
    before = recall.resolve([*hits, *misses], request)
    # Every recall that returned an unmatched row would bump it: as many as you like, now.
    bumped = [
        replace(c, reference_count=c.reference_count + n, last_referenced_at=NOW)
        for c, n in zip(misses, bumps, strict=False)
    ]
    after = recall.resolve([*hits, *bumped], request)
    for result in (before, after):
        returned = [e.candidate.entry_id for e in result.entries]
        assert returned and all(r.startswith("m-") for r in returned)
        assert result.audit_envelope.suppression_counts == {"no-match-for-query": len(misses)}
    assert json.dumps(recall.to_wire(after)) == json.dumps(recall.to_wire(before))


@settings(max_examples=300, deadline=None)
@given(
    better=st.tuples(st.floats(0.05, 1.0), usage),
    worse=st.tuples(st.floats(0.0, 1.0), usage),
    same_time_and_origin=st.booleans(),
)
def test_usage_and_recency_only_order_memories_of_comparable_relevance(
    better: tuple[float, tuple[int, int, Origin]],
    worse: tuple[float, tuple[int, int, Origin]],
    same_time_and_origin: bool,
) -> None:
    """Whatever their usage, recency and origin, a memory matching less than 60 % as well
    never passes the other (`CONTEXT_SHARE`); written and last used at the same time by the
    same origin, fresh, one matching a tenth less never does."""
    (a, (refs_a, age_a, origin_a)), (b, (refs_b, age_b, origin_b)) = better, worse
    if same_time_and_origin:
        age_a = age_b = 0
        origin_b = origin_a = Origin.USER_STATED
        b = min(b, 0.9 * a)
    else:
        b = min(b, 0.59 * a)

    def row(entry_id: str, refs: int, age: int, origin: Origin) -> recall.Candidate:
        stamp = NOW - timedelta(seconds=age)
        return _candidate(
            entry_id,
            "anything",
            reference_count=refs,
            last_referenced_at=stamp,
            updated_at=stamp,
            origin=origin,
        )

    rows = [row("e-better", refs_a, age_a, origin_a), row("e-worse", refs_b, age_b, origin_b)]
    values = {"e-better": a, "e-worse": b}
    result = recall.resolve(rows, _request(), semantic=lambda _q, c: values[c.entry_id])
    returned = [e.candidate.entry_id for e in result.entries]
    assert returned[0] == "e-better"


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=10),
    refs=st.lists(st.integers(0, 10**6), min_size=10, max_size=10),
)
def test_under_a_floor_no_usage_lifts_a_memory_the_ranker_calls_unrelated(
    values: list[float], refs: list[int]
) -> None:
    """The hybrid ranker is never exactly 0: its calibrated floor decides what matches."""
    floor = semantic.relevance_floor("hybrid")
    rows = [
        _candidate(f"e-{i}", "anything", reference_count=n, last_referenced_at=NOW)
        for i, n in zip(range(len(values)), refs, strict=False)
    ]
    by_id = {c.entry_id: v for c, v in zip(rows, values, strict=True)}
    result = recall.resolve(
        rows, _request(), semantic=lambda _q, c: by_id[c.entry_id], relevance_floor=floor
    )
    returned = {e.candidate.entry_id for e in result.entries}
    assert returned == {i for i, v in by_id.items() if v > floor}
    assert result.audit_envelope.suppression_counts.get("no-match-for-query", 0) == sum(
        1 for v in values if v <= floor
    )


def test_among_comparable_matches_usage_still_wins() -> None:
    # The same words, so the same relevance: the spec's blend orders them.
    rows = [
        _candidate("e-old", "green tea every morning"),
        _candidate(
            "e-used",
            "green tea every evening",
            reference_count=8,
            last_referenced_at=NOW - timedelta(days=1),
            origin=Origin.USER_STATED,
        ),
    ]
    result = recall.resolve(rows, _request("green tea"))
    assert [e.candidate.entry_id for e in result.entries] == ["e-used", "e-old"]


# --------------------------------------------------------------------------------------
# The envelope through the service, against the pipeline over every candidate


@pytest.fixture(autouse=True)
def lexical(settings: Any) -> None:
    # The service is compared with `exhaustive_resolve`'s Jaccard reference here; hybrid's
    # equivalence with the pure pipeline is test_recall_snapshot's.
    settings.IRIS_RECALL_SEMANTIC = "jaccard"


def _ask(**fields: Any) -> RecallAsk:
    values: dict[str, Any] = {
        "scope_kind": "profile",
        "scope_identifiers": None,
        "scope_key": None,
        "query": "tea",
        "surface": "assistant",
        "context": "general",
        "destination_tier": "local",
        **fields,
    }
    return RecallAsk(**values)


def _profile_row(member: Any, i: int, body: str, updated: datetime, **extra: Any) -> MemoryEntry:
    uid = str(member.public_id)
    fields: dict[str, Any] = {
        "category": "preference",
        "lifecycle": "active",
        "origin": "user-stated",
        "reference_count": 0,
        "subject": "",
        **extra,
    }
    return _first_revision(
        member,
        i,
        scope_kind="profile",
        scope_key=f"profile:{uid}",
        scope_identifiers={"userId": uid},
        adapter_scope="assistant_profile",
        body=body,
        body_fingerprint=f"{i:064d}",
        consents=[],
        provenance_chain=[],
        created_at=updated,
        updated_at=updated,
        **fields,
    )


def _mixed_rows(member: Any) -> None:
    """Rows of every kind a recall drops: paused, suppressed, forgotten, sensitive, safety,
    superseded by a later row on the same subject, unmatched, and plenty that match."""
    day = timedelta(days=1)
    rows = [_profile_row(member, i, f"tea note {i}", NOW - i * day) for i in range(16)]
    rows += [
        _profile_row(member, 20, "tea I stopped", NOW - day, lifecycle="paused"),
        _profile_row(member, 21, "tea forgotten", NOW - day, lifecycle="tombstoned"),
        _profile_row(
            member,
            22,
            "tea at night",
            NOW - day,
            suppression_reason="user-pause",
            suppression_started_at=NOW - 2 * day,
        ),
        _profile_row(member, 23, "tea and my pills", NOW - day, category="medical"),
        _profile_row(member, 24, "tea with my counsellor", NOW - day, category="mental_health"),
        _profile_row(member, 25, "tea where I feel safe", NOW - day, category="safety"),
        _profile_row(member, 26, "tea green", NOW - 3 * day, subject="drink"),
        _profile_row(member, 27, "tea black now", NOW - day, subject="drink"),
        _profile_row(member, 28, "I live in Lisbon", NOW, reference_count=40),
    ]
    MemoryEntry.objects.bulk_create(rows)


def _both(member: Any, ask: RecallAsk) -> tuple[dict[str, Any], dict[str, Any]]:
    """The service's envelope, and the pure pipeline's over every candidate."""
    request = build_request(principal=as_member(member), member=member, ask=ask, now=NOW)
    full = recall_db.exhaustive_resolve(request, member=member)
    wire = recall_resolve(principal=as_member(member), member=member, ask=ask, now=NOW)
    return wire["auditEnvelope"], recall.to_wire(full)["auditEnvelope"]


@pytest.mark.django_db
def test_a_crisis_frame_recall_counts_every_row_it_held_back(member) -> None:
    _mixed_rows(member)
    envelope, expected = _both(member, _ask(crisis_frame=True, context="crisis"))
    assert envelope == expected
    assert envelope["returnedIds"] == []
    assert envelope["evaluatedCount"] == 25
    assert envelope["suppressionCounts"] == {"crisis-frame": 25}


@pytest.mark.django_db
def test_a_safety_critical_crisis_frame_counts_the_rest_under_their_reasons(member) -> None:
    _mixed_rows(member)
    ask = _ask(crisis_frame=True, safety_critical_context=True, context="crisis")
    envelope, expected = _both(member, ask)
    assert envelope == expected
    assert envelope["evaluatedCount"] == 25
    # the safety row needs its own consent, which this member never gave
    assert envelope["suppressionCounts"] == {
        "crisis-frame": 24,
        "sensitive-category-without-consent": 1,
    }


@pytest.mark.django_db
def test_sensitive_paused_and_unmatched_rows_are_counted_outside_their_context(member) -> None:
    _mixed_rows(member)
    envelope, expected = _both(member, _ask())
    assert envelope == expected
    assert len(envelope["returnedIds"]) == 12
    assert envelope["evaluatedCount"] == 25
    assert envelope["suppressionCounts"] == {
        "lifecycle-paused": 1,
        "lifecycle-tombstoned": 1,
        "no-match-for-query": 1,
        "sensitive-category-without-consent": 3,
        "user-pause": 1,
    }


@pytest.mark.django_db(transaction=True)
def test_a_cached_snapshot_counts_as_the_pipeline_does(require_postgres, member, settings):
    settings.IRIS_RECALL_SNAPSHOT = True
    _mixed_rows(member)
    request = build_request(principal=as_member(member), member=member, ask=_ask(), now=NOW)
    options: dict[str, Any] = {"member": member, "ranker_name": "jaccard"}
    cached = recall_snapshot.resolve_cached(request, **options)
    again = recall_snapshot.resolve_cached(request, **options)
    once = recall_snapshot.resolve_once(request, **options)
    full = recall_db.exhaustive_resolve(request, member=member)
    # same request, same state, same now: the same bytes, whichever path answers
    expected = json.dumps(recall.to_wire(full), sort_keys=True)
    for fast in (cached, again, once):
        assert json.dumps(recall.to_wire(fast.result), sort_keys=True) == expected
        assert fast.result.audit_envelope == full.audit_envelope
    assert full.audit_envelope.over_budget_count == 16 + 1 - 12  # the tea rows past 12
    assert full.audit_envelope.deduped_count == 1
