"""The database fast path returns exactly what the exhaustive pure pipeline returns.

Rows are generated straight into the table (the write path is not under test here), with
many ties on time, shared subjects (dedupe), sensitive categories, suppressions, inactive
rows, other scopes and another member, so that every pruning rule of `recall_db` is hit.
`first_chunk=1..3` makes the recency scan stop early wherever its bound allows.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.models import MemoryEntry
from memory.recall import db as recall_db
from memory.recall import pipeline as recall
from memory.recall.ranking import semantic
from memory.rules.lexical import Bm25Index
from tests.factories import recall_request

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
WORDS = [
    "coffee",
    "coffees",
    "tea",
    "party",
    "parties",
    "running",
    "run",
    "berlin",
    "cat",
    "Straße",
]
TIMES = [NOW - timedelta(days=d) for d in (0, 1, 1, 3, 30, 400)]


def _first_revision(member: Any, n: int, **fields: Any) -> MemoryEntry:
    """The first and current revision of the member's entry number `n`."""
    return MemoryEntry(
        revision_id=uuid.uuid4(),
        entry_id=uuid.UUID(int=n + 1),
        revision=1,
        is_current=True,
        tenant_id=member.tenant_id,
        member=member,
        **fields,
    )


def _row(member: Any, draw: Any, n: int) -> MemoryEntry:
    kind_key = draw(st.sampled_from(["profile", "session:s1", "session:s2"]))
    uid = str(member.public_id)
    if kind_key == "profile":
        kind, key, ids = "profile", f"profile:{uid}", {"userId": uid}
    else:
        session = kind_key.split(":")[1]
        kind, key, ids = (
            "session",
            f"session:{uid}:{session}",
            {"userId": uid, "sessionId": session},
        )
    body = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    suppressed = draw(st.sampled_from([None, None, None, "user-pause", "ended"]))
    lifecycle = draw(st.sampled_from(["active"] * 6 + ["paused", "draft"]))
    updated = draw(st.sampled_from(TIMES))
    actor = draw(st.sampled_from([None, None, "h1"]))
    return _first_revision(
        member,
        n,
        scope_kind=kind,
        scope_key=key,
        scope_identifiers=ids,
        adapter_scope="assistant_profile" if kind == "profile" else "session",
        category=draw(st.sampled_from(["preference", "preference", "medical", "safety"])),
        body=body,
        body_fingerprint=hashlib.sha256(body.encode()).hexdigest(),
        subject=draw(st.sampled_from(["", "", "drink", "home"])),
        origin=draw(st.sampled_from(list(recall.ORIGIN_WEIGHTS))),
        lifecycle=lifecycle,
        suppression_reason="user-pause" if suppressed else None,
        suppression_started_at=NOW - timedelta(days=2) if suppressed else None,
        suppression_ends_at=(NOW - timedelta(days=1)) if suppressed == "ended" else None,
        actor_handle=actor,
        relationship_note="my friend" if actor else "",
        sensitive_interaction=bool(actor) and draw(st.booleans()),
        consents=[],
        provenance_chain=[],
        reference_count=draw(st.integers(0, 12)),
        last_referenced_at=draw(st.sampled_from([None, *TIMES])),
        created_at=updated - timedelta(days=1),
        updated_at=updated,
    )


def _request(member: Any, draw: Any) -> recall.RecallRequest:
    uid = str(member.public_id)
    kind, key = draw(
        st.sampled_from([("profile", f"profile:{uid}"), ("session", f"session:{uid}:s1")])
    )
    return recall_request(
        now=NOW,
        tenant_id=str(member.tenant_id),
        user_id=uid,
        scope_kind=kind,
        scope_key=key,
        query=" ".join(draw(st.lists(st.sampled_from([*WORDS, "the", "strasse"]), max_size=3))),
        surface=draw(st.sampled_from(["assistant", "shell", "notebook"])),
        context=draw(st.sampled_from(["general", "health", "safety", "relationship"])),
        crisis_frame=draw(st.booleans()) and draw(st.booleans()),
        safety_critical_context=draw(st.booleans()),
        consented_categories=draw(
            st.sampled_from([frozenset(), frozenset({"medical"}), frozenset({"medical", "safety"})])
        ),
        multi_actor_sensitive_consent=draw(st.booleans()),
        limit=draw(st.sampled_from([None, 0, 1, 2, 3])),
    )


def _entries(result: recall.RecallResult) -> list[dict[str, Any]]:
    return recall.to_wire(result)["entries"]


RANKERS = ["jaccard", "lexical"]


def _generated(examples: int) -> Any:
    """A hypothesis test drawing its data inside a database test, `examples` times."""
    configure = settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    return lambda test: configure(given(data=st.data())(test))


@pytest.mark.django_db
@_generated(40)
def test_fast_path_equals_the_exhaustive_pipeline(member, other_member, data) -> None:
    draw = data.draw
    with transaction.atomic():
        n = draw(st.integers(0, 40))
        rows = [_row(member, draw, i) for i in range(n)]
        rows += [_row(other_member, draw, 1000 + i) for i in range(draw(st.integers(0, 5)))]
        MemoryEntry.objects.bulk_create(rows)
        request = _request(member, draw)
        name = draw(st.sampled_from(RANKERS))
        fast, full = _both_paths(request, member, name, first_chunk=draw(st.integers(1, 3)))
        assert _entries(fast.result) == _entries(full)
        assert fast.result.audit_envelope.returned_ids == full.audit_envelope.returned_ids
        if name == "lexical":
            assert_member_statistics(fast, request, member)
        transaction.set_rollback(True)


def assert_member_statistics(
    fast: recall_db.FastRecall, request: recall.RecallRequest, member: Any
) -> None:
    """BM25's statistics are those of every gated row (Unicode folding included), not of
    the rows a fast path read."""
    gated = recall_db.base_rows(request, member=member)
    exact = Bm25Index((str(e.entry_id), e.body) for e in gated).stats
    assert fast.corpus is not None
    assert fast.corpus.document_count == exact.document_count
    for term in set(exact.document_frequency) & set(fast.corpus.document_frequency):
        assert fast.corpus.document_frequency[term] == exact.document_frequency[term]


def _both_paths(
    request: recall.RecallRequest,
    member: Any,
    name: str,
    *,
    first_chunk: int | None = None,
    vectors: dict[str, bytes] | None = None,
) -> tuple[recall_db.FastRecall, recall.RecallResult]:
    """The fast path and the exhaustive pipeline over the same request and statistics."""
    prepare = semantic.semantic_for(name)
    fast = recall_db.fast_resolve(
        request, member=member, ranker_name=name, prepare=prepare, first_chunk=first_chunk
    )
    full = recall_db.exhaustive_resolve(
        request,
        member=member,
        ranker_name=name,
        prepare=prepare,
        corpus=fast.corpus,
        vectors=vectors,
    )
    return fast, full


def _spread_member(member: Any, hours_apart: int) -> list[MemoryEntry]:
    """400 profile rows, one every `hours_apart` hours back from NOW, one in 40 about
    coffee, with every origin and reference count; stored, and returned."""
    rows = [
        _profile_row(
            member,
            i,
            f"entry {i} about " + ("coffee" if i % 40 == 5 else f"topic{i % 23}"),
            NOW - timedelta(hours=hours_apart * i),
            origin=list(recall.ORIGIN_WEIGHTS)[i % 6],
            reference_count=i % 11,
        )
        for i in range(400)
    ]
    MemoryEntry.objects.bulk_create(rows)
    return rows


def _profile_row(member: Any, i: int, body: str, updated: datetime, **extra: Any) -> MemoryEntry:
    """Row `i` of a member's profile: active, current, one revision."""
    uid = str(member.public_id)
    fields: dict[str, Any] = {
        "origin": "user-stated",
        "reference_count": 0,
        "subject": "",
        "created_at": updated,
        "updated_at": updated,
        **extra,
    }
    return _first_revision(
        member,
        i,
        scope_kind="profile",
        scope_key=f"profile:{uid}",
        scope_identifiers={"userId": uid},
        adapter_scope="assistant_profile",
        category="preference",
        body=body,
        body_fingerprint=f"{i:064d}",
        lifecycle="active",
        consents=[],
        provenance_chain=[],
        **fields,
    )


def _profile_request(member: Any, query: str, surface: str) -> recall.RecallRequest:
    uid = str(member.public_id)
    return recall_request(
        now=NOW,
        tenant_id=str(member.tenant_id),
        user_id=uid,
        scope_kind="profile",
        scope_key=f"profile:{uid}",
        query=query,
        surface=surface,
    )


@pytest.mark.django_db
def test_the_scan_stops_early_on_many_old_rows(member) -> None:
    rows = [
        _profile_row(
            member,
            i,
            f"note number {i}" + (" coffee" if i % 50 == 7 else ""),
            NOW - timedelta(days=i),
        )
        for i in range(300)
    ]
    MemoryEntry.objects.bulk_create(rows)
    request = _profile_request(member, "coffee", "shell")
    fast = recall_db.fast_resolve(request, member=member, first_chunk=8)
    full = recall_db.exhaustive_resolve(request, member=member)
    assert _entries(fast.result) == _entries(full)
    assert fast.examined < 60  # six matches plus a few chunks of recent rows, not 300


@pytest.mark.django_db
def test_a_common_term_is_read_by_walking_recency_and_a_rare_one_by_its_index(
    require_postgres, member
) -> None:
    # recall_db._choose_access: "coffee" is in most rows, so its stream's first chunk walks
    # the recency index testing each row; "tea" is in a few, so its stream asks the term
    # index. Either way the answer must be the exhaustive pipeline's.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = []
    for i in range(240):
        words = ["coffee"] * (i % 5 != 0) + ["tea"] * (i % 40 == 3) + [f"note{i % 17}"]
        rows.append(
            _profile_row(
                member,
                i,
                " ".join(words),
                NOW - timedelta(hours=7 * i),
                origin=list(recall.ORIGIN_WEIGHTS)[i % 6],
                reference_count=i % 13,
                last_referenced_at=NOW - timedelta(hours=5 * ((i * 37) % 240)),
            )
        )
    MemoryEntry.objects.bulk_create(rows)
    prepare = semantic.semantic_for("lexical")
    for query in ("coffee tea", "coffee", "tea note3", "coffee note5 tea"):
        request = _profile_request(member, query, "assistant")
        with CaptureQueriesContext(connection) as seen:
            fast = recall_db.fast_resolve(
                request, member=member, ranker_name="lexical", prepare=prepare, first_chunk=2
            )
        full = recall_db.exhaustive_resolve(
            request, member=member, ranker_name="lexical", prepare=prepare, corpus=fast.corpus
        )
        assert _entries(fast.result) == _entries(full), query
        assert len(_entries(full)) == 12
        if query.startswith("coffee"):
            sql = " ".join(q["sql"] for q in seen.captured_queries)
            assert "strpos(" in sql, query


@pytest.mark.django_db(transaction=True)
def test_the_reads_reuse_generic_plans_and_leave_the_connection_as_it_was(
    require_postgres, member
) -> None:
    # recall_db.fast_resolve: planning was a third of the database's time at 1k.
    from django.db import connection

    rows = [_profile_row(member, i, f"coffee note {i}", NOW - timedelta(days=i)) for i in range(30)]
    MemoryEntry.objects.bulk_create(rows)
    modes: list[str] = []

    def spy(execute, sql, params, many, context):
        modes.append(connection.connection.execute("SHOW plan_cache_mode").fetchone()[0])
        return execute(sql, params, many, context)

    request = _profile_request(member, "coffee", "assistant")
    prepare = semantic.semantic_for("lexical")
    with connection.execute_wrapper(spy):
        fast = recall_db.fast_resolve(
            request, member=member, ranker_name="lexical", prepare=prepare
        )
    assert len(_entries(fast.result)) == 12
    assert modes and set(modes[1:]) == {"force_generic_plan"}, modes  # after the SET LOCAL
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "auto"


@pytest.mark.parametrize(
    ("gated", "ranker", "chunk"),
    [
        (0, "lexical", 24),
        (947, "lexical", 24),
        (4_800, "lexical", 24),
        (9_524, "lexical", 47),
        (20_000, "lexical", 100),
        (47_464, "lexical", 128),
        (10**6, "lexical", 128),
        (947, "hybrid", 24),
        (9_524, "hybrid", 24),
        (20_000, "hybrid", 50),
        (47_464, "hybrid", 118),
        (10**6, "hybrid", 128),
    ],
)
def test_the_first_chunk_grows_with_the_member(gated: int, ranker: str, chunk: int) -> None:
    assert recall_db._first_chunk(gated, ranker) == chunk


@pytest.mark.django_db
def test_hybrid_fast_path_uses_the_stored_vectors(member) -> None:
    # On PostgreSQL the vectors come joined to their rows (`_statement`'s `vectors_of`),
    # elsewhere by a query; either way a stored vector is the one ranked, and a row
    # without one is embedded. One row's stored vector is another text's, on purpose: a
    # path that re-embedded instead would rank it differently from the reference.
    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    encoder = embedding.default_encoder()
    bodies = [
        "I moved to Lisbon in March",
        "My sister lives in Porto",
        "I practise yoga on Mondays",
        "Coffee with oat milk, no sugar",
        "Allergic to peanuts",
        "Working at a bakery near the river",
    ]
    rows = [_profile_row(member, i, body, NOW - timedelta(days=i)) for i, body in enumerate(bodies)]
    MemoryEntry.objects.bulk_create(rows)
    stored = {
        str(r.entry_id): embedding.to_bytes(encoder.encode_one(r.body, cache=False))
        for r in rows[:4]
    }
    stored[str(rows[3].entry_id)] = embedding.to_bytes(
        encoder.encode_one("I relocated to Portugal's capital", cache=False)
    )
    _store_vectors(member, rows[:4], stored)
    prepare = semantic.semantic_for("hybrid")
    request = _profile_request(member, "where did I move to", "assistant")
    fast = recall_db.fast_resolve(
        request, member=member, ranker_name="hybrid", prepare=prepare, encoder=encoder
    )
    full = recall_db.exhaustive_resolve(
        request,
        member=member,
        ranker_name="hybrid",
        prepare=prepare,
        corpus=fast.corpus,
        vectors=stored,
        encoder=encoder,
    )
    assert _entries(fast.result) == _entries(full)
    # the two about moving (one by its stored vector alone); the rest match nothing of it
    assert [e["entry"]["body"] for e in _entries(full)] == [
        "I moved to Lisbon in March",
        "Coffee with oat milk, no sugar",
    ]
    assert full.audit_envelope.suppression_counts == {"no-match-for-query": 4}


@pytest.mark.django_db
def test_a_question_reads_only_its_term_streams_under_bm25(
    require_postgres, member, monkeypatch
) -> None:
    """A row holding no word of the question cannot be returned under BM25, however
    recent or used: with fewer matches than the budget, the recall stops once the term
    streams are read, in one round whatever the all-rows stream's depth."""
    _spread_member(member, hours_apart=20)
    request = _profile_request(member, "coffee", "assistant")
    for factor in (1, 2):
        monkeypatch.setattr(recall_db, "ALL_ROWS_FIRST_CHUNK_FACTOR", factor)
        fast, full = _both_paths(request, member, "lexical")
        assert _entries(fast.result) == _entries(full)
        assert len(_entries(full)) == 10  # one row in 40 is about coffee
        assert full.audit_envelope.suppression_counts == {"no-match-for-query": 390}
        assert fast.rounds == 1


@pytest.mark.django_db
def test_the_hybrid_all_rows_stream_starts_deeper_still(
    require_postgres, member, monkeypatch
) -> None:
    """recall_db.HYBRID_ALL_ROWS_FIRST_CHUNK_FACTOR: with the hybrid ranker a row holding no
    query word may still pass the relevance floor on its cosine, so with fewer matches than
    the budget the all-rows stream is read to its end; the answer is the exhaustive
    pipeline's whatever its depth."""
    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    vectors = _store_unit_vectors(member, _spread_member(member, hours_apart=10), seed=6)
    request = _profile_request(member, "coffee", "assistant")
    rounds = {}
    for factor in (2, 3):
        monkeypatch.setattr(recall_db, "HYBRID_ALL_ROWS_FIRST_CHUNK_FACTOR", factor)
        fast, full = _both_paths(request, member, "hybrid", vectors=vectors)
        assert _entries(fast.result) == _entries(full)
        # random vectors stand in for the bodies': only the coffee rows match
        assert len(_entries(full)) == 10
        rounds[factor] = fast.rounds
    assert rounds[3] <= rounds[2]


STATIC_CASES = [
    # (anchor offset from NOW, reference_count, origin)
    (timedelta(days=2), 0, "user-stated"),  # ahead of the clock: fresh, never fresher
    (timedelta(0), 3, "user-confirmed"),
    (-timedelta(seconds=1), 10, "summarized-from-session"),
    (-timedelta(days=30), 12, "imported"),
    (-timedelta(days=400, microseconds=7), 1, "model-inferred"),
    (-timedelta(days=365 * 2000), 5, "operator-copilot"),  # exp would underflow
]


@pytest.mark.django_db
@pytest.mark.parametrize(("offset", "references", "origin"), STATIC_CASES)
def test_the_sql_bound_scores_a_row_as_the_pipeline_does(
    require_postgres, member, offset, references, origin
) -> None:
    """`recall_db._static_sql` is `recall.score_without_semantic` in SQL: the filter on
    streams read after the first round relies on it never falling below Python's value."""
    from django.db import connection

    row = _profile_row(member, 1, "tea", NOW + offset, origin=origin, reference_count=references)
    MemoryEntry.objects.bulk_create([row])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {recall_db._static_sql()} FROM memory_memoryentry WHERE revision_id = %s",  # noqa: S608
            [NOW, NOW, row.revision_id],
        )
        (in_sql,) = cursor.fetchone()
    from memory.selectors import recall_candidates

    (candidate,) = recall_candidates(
        tenant_id=member.tenant_id, member=member, scope_keys=[f"profile:{member.public_id}"]
    )
    assert in_sql == pytest.approx(recall.score_without_semantic(candidate, NOW), abs=1e-12)


def _recent_row(member: Any, draw: Any, n: int) -> MemoryEntry:
    """A profile row from the last weeks, so that the k-th score is high and the streams
    read after the first round are filtered (`recall_db._reach_filter`)."""
    body = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    updated = NOW - timedelta(hours=draw(st.integers(0, 24 * 60)))
    referenced = draw(
        st.sampled_from([None, None, NOW - timedelta(hours=draw(st.integers(0, 48)))])
    )
    return _profile_row(
        member,
        n,
        body,
        updated,
        origin=draw(st.sampled_from(list(recall.ORIGIN_WEIGHTS))),
        reference_count=draw(st.integers(0, 12)),
        last_referenced_at=referenced,
        subject=draw(st.sampled_from(["", "", "", "drink", "home"])),
    )


@pytest.mark.django_db
@_generated(25)
def test_streams_read_on_under_the_k_th_score_still_equal_the_exhaustive_pipeline(
    require_postgres, member, data
) -> None:
    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    draw = data.draw
    with transaction.atomic():
        rows = [_recent_row(member, draw, i) for i in range(draw(st.integers(20, 90)))]
        MemoryEntry.objects.bulk_create(rows)
        vectors = _store_unit_vectors(member, rows, seed=draw(st.integers(0, 1000)))
        query = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
        request = replace(
            _profile_request(member, query, "assistant"), limit=draw(st.sampled_from([None, 3]))
        )
        name = draw(st.sampled_from(["jaccard", "lexical", "hybrid"]))
        fast, full = _both_paths(
            request, member, name, first_chunk=draw(st.integers(1, 4)), vectors=vectors
        )
        assert _entries(fast.result) == _entries(full)
        transaction.set_rollback(True)


def _store_unit_vectors(member: Any, rows: list[MemoryEntry], *, seed: int) -> dict[str, bytes]:
    """Fixed unit vectors stand in for the bodies' embeddings (the ranker reads stored
    ones); returns them by entry id, as `exhaustive_resolve` takes them."""
    import numpy as np

    from memory.recall.ranking import embedding

    generator = np.random.default_rng(seed)
    vectors = {}
    for r in rows:
        v = generator.standard_normal(embedding.DIMENSION).astype(np.float32)
        vectors[str(r.entry_id)] = embedding.to_bytes(v / np.linalg.norm(v))
    _store_vectors(member, rows, vectors)
    return vectors


def _store_vectors(member: Any, rows: list[MemoryEntry], vectors: dict[str, bytes]) -> None:
    from memory.recall.models import MemoryEmbedding
    from memory.recall.ranking import embedding

    MemoryEmbedding.objects.bulk_create(
        MemoryEmbedding(
            revision_id=r.revision_id,
            tenant_id=member.tenant_id,
            model=embedding.MODEL_NAME,
            vector=vectors[str(r.entry_id)],
            created_at=NOW,
        )
        for r in rows
    )
