"""Selectable semantic rankers (memory/recall/ranking/semantic.py) and how they plug into recall.

Hybrid tests need the model: they skip with a reason without it, and fail instead under
IRIS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.enums import ScopeKind
from memory.recall.pipeline import Candidate, RecallRequest, jaccard_semantic, resolve, to_wire
from memory.recall.ranking import embedding, semantic
from memory.rules.lexical import Bm25Index
from tests.conftest import need_service
from tests.factories import recall_candidate, recall_request

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TENANT, MEMBER = "t-1", "u-1"

BODIES = {
    "e-lisbon": "I moved to Lisbon in March for a job at a bakery.",
    "e-porto": "My sister moved to Porto for a job at a bank.",
    "e-desk": "I moved my desk next to the window.",
    "e-cat": "My cat Biscuit sleeps on the sofa all afternoon.",
    "e-coffee": "I always order a flat white with oat milk.",
    "e-train": "I take the 7:42 train to work every weekday.",
    "e-trip": "I am planning a trip to Lisbon in October.",
}


def candidate(entry_id: str, body: str, **overrides: Any) -> Candidate:
    stamp = NOW - timedelta(days=2)
    fields: dict[str, Any] = {"provenance_chain": (), "created_at": stamp, "updated_at": stamp}
    return recall_candidate(entry_id, now=NOW, body=body, **{**fields, **overrides})


CANDIDATES = [candidate(i, b) for i, b in BODIES.items()]


def request(query: str) -> RecallRequest:
    return recall_request(
        now=NOW, scope_kind=ScopeKind.PROFILE, scope_key=f"profile:{MEMBER}", query=query
    )


@pytest.fixture(scope="module")
def encoder() -> embedding.Encoder:
    reason = embedding.unavailable_reason()
    need_service(reason is None, f"embedding model unavailable: {reason}")
    return embedding.Encoder.load()


@pytest.fixture(scope="module")
def stored_vectors(encoder: embedding.Encoder) -> dict[str, bytes]:
    """Vectors as services store them: one per revision, written at write time."""
    matrix = encoder.encode(list(BODIES.values()))
    return {i: embedding.to_bytes(v) for i, v in zip(BODIES, matrix, strict=True)}


# -- selection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "ranker"),
    [
        ("jaccard", semantic.jaccard),
        (" Jaccard ", semantic.jaccard),
        (" Lexical ", semantic.lexical),
        ("LEXICAL", semantic.lexical),
    ],
)
def test_semantic_for_picks_the_named_ranker(setting: str | None, ranker: Any) -> None:
    assert semantic.semantic_for(setting) is ranker


def test_unknown_setting_names_the_setting_and_the_choices() -> None:
    with pytest.raises(ValueError, match="IRIS_RECALL_SEMANTIC must be one of"):
        semantic.semantic_for("vector")


def test_hybrid_without_the_model_refuses_to_start(monkeypatch) -> None:
    monkeypatch.setattr(embedding, "_default", None)
    monkeypatch.setattr(embedding, "unavailable_reason", lambda: "model package missing")
    with pytest.raises(embedding.EmbeddingUnavailable, match="hybrid but model package missing"):
        semantic.semantic_for("hybrid")


def test_hybrid_is_selected_when_the_model_is_installed(encoder: embedding.Encoder) -> None:
    assert semantic.semantic_for("hybrid") is semantic.hybrid


def test_a_loaded_model_is_not_looked_for_on_disk_again(monkeypatch, encoder) -> None:
    # Every recall asks for its ranker; the files were found when the model loaded.
    monkeypatch.setattr(embedding, "_default", encoder)

    def looked(*_: object) -> str:
        raise AssertionError("looked for the model on disk")

    monkeypatch.setattr(embedding, "unavailable_reason", looked)
    assert embedding.loaded()
    assert semantic.semantic_for("hybrid") is semantic.hybrid
    monkeypatch.setattr(embedding, "_default", None)
    with pytest.raises(AssertionError, match="looked for the model on disk"):
        semantic.semantic_for("hybrid")


@pytest.mark.parametrize("setting", [None, "", "hybrid"])
def test_an_unset_ranker_means_hybrid(setting: str | None, encoder: embedding.Encoder) -> None:
    assert semantic.DEFAULT_RANKER == "hybrid"
    assert semantic.semantic_for(setting) is semantic.hybrid


def test_jaccard_is_recalls_own_default() -> None:
    assert semantic.jaccard("anything", CANDIDATES) is jaccard_semantic
    assert semantic.jaccard_semantic is jaccard_semantic


def test_shipped_hybrid_weight_is_a_proper_blend() -> None:
    assert 0.0 < semantic.HYBRID_LEXICAL_WEIGHT < 1.0


# -- lexical ---------------------------------------------------------------------------


def test_lexical_values_are_normalised_bm25() -> None:
    index = Bm25Index(BODIES)
    fn = semantic.lexical("bakery job in Lisbon", CANDIDATES, corpus=index)
    for c in CANDIDATES:
        value = fn("bakery job in Lisbon", c)
        assert 0.0 <= value < 1.0
        assert value == index.normalised_score("bakery job in Lisbon", c.entry_id)
    assert fn("bakery job in Lisbon", CANDIDATES[0]) == max(
        fn("bakery job in Lisbon", c) for c in CANDIDATES
    )


def test_lexical_value_does_not_depend_on_the_other_candidates() -> None:
    """What a database fast path relies on: a subset scores each row as the whole does."""
    stats = Bm25Index(BODIES).stats
    query = "moved for a job"
    whole = semantic.lexical(query, CANDIDATES, corpus=stats)
    for c in CANDIDATES:
        alone = semantic.lexical(query, [c], corpus=stats)
        assert alone(query, c) == whole(query, c)
    index_fn = semantic.lexical(query, CANDIDATES, corpus=Bm25Index(BODIES))
    assert [index_fn(query, c) for c in CANDIDATES] == [whole(query, c) for c in CANDIDATES]


def test_lexical_without_a_corpus_uses_the_candidates() -> None:
    fn = semantic.lexical("oat milk", CANDIDATES)
    assert fn("oat milk", CANDIDATES[4]) > 0.0
    assert fn("oat milk", CANDIDATES[0]) == 0.0


def test_prepared_function_refuses_another_query() -> None:
    fn = semantic.lexical("oat milk", CANDIDATES)
    with pytest.raises(ValueError, match="another query"):
        fn("flat white", CANDIDATES[0])


def test_candidate_outside_the_prepared_set_is_scored_on_demand() -> None:
    stats = Bm25Index(BODIES).stats
    fn = semantic.lexical("oat milk", CANDIDATES[:2], corpus=stats)
    assert fn("oat milk", CANDIDATES[4]) == semantic.lexical(
        "oat milk", [CANDIDATES[4]], corpus=stats
    )("oat milk", CANDIDATES[4])


def test_lexical_ranks_through_recall() -> None:
    query = "what coffee with oat milk do I order"
    fn = semantic.lexical(query, CANDIDATES, corpus=Bm25Index(BODIES))
    result = resolve(CANDIDATES, request(query), semantic=fn)
    assert result.entries[0].candidate.entry_id == "e-coffee"


def test_query_of_stop_words_only_scores_zero_everywhere() -> None:
    fn = semantic.lexical("what is it", CANDIDATES, corpus=Bm25Index(BODIES))
    assert all(fn("what is it", c) == 0.0 for c in CANDIDATES)


# -- vector index ----------------------------------------------------------------------


def test_vector_index_validates_its_shape(encoder: embedding.Encoder) -> None:
    import numpy as np

    with pytest.raises(ValueError, match="matrix must be"):
        semantic.VectorIndex(["a"], np.zeros((1, 10), dtype=np.float32))
    with pytest.raises(ValueError, match="duplicate"):
        semantic.VectorIndex(["a", "a"], np.zeros((2, embedding.DIMENSION), dtype=np.float32))
    index = semantic.VectorIndex.from_mapping({"a": np.ones(embedding.DIMENSION)})
    assert "a" in index and len(index) == 1 and index.row("b") is None


# -- hybrid ----------------------------------------------------------------------------


def test_hybrid_is_the_documented_blend(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    import numpy as np

    query = "which city did I relocate to for work?"
    index = Bm25Index(BODIES)
    fn = semantic.hybrid(query, CANDIDATES, corpus=index, vectors=stored_vectors, encoder=encoder)
    q = encoder.encode_one(query)
    w = semantic.HYBRID_LEXICAL_WEIGHT
    for c in CANDIDATES:
        cosine = float(np.dot(embedding.from_bytes(stored_vectors[c.entry_id]), q))
        expected = w * index.normalised_score(query, c.entry_id) + (1 - w) * max(0.0, cosine)
        assert fn(query, c) == pytest.approx(expected, abs=1e-6)
        assert 0.0 <= fn(query, c) <= 1.0


def test_hybrid_finds_a_paraphrase_that_shares_no_words(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    query = "which city did I relocate to for work?"
    index = Bm25Index(BODIES)
    lexical = semantic.lexical(query, CANDIDATES, corpus=index)
    hybrid = semantic.hybrid(
        query, CANDIDATES, corpus=index, vectors=stored_vectors, encoder=encoder
    )
    by_hybrid = resolve(CANDIDATES, request(query), semantic=hybrid)
    assert by_hybrid.entries[0].candidate.entry_id == "e-lisbon"
    # BM25 sees only "work", which the train memory has and the target lacks
    assert lexical(query, CANDIDATES[0]) < lexical(query, CANDIDATES[5])


def test_hybrid_value_does_not_depend_on_the_other_candidates(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    """Bit-for-bit: a fast path that scores a subset must agree with an exhaustive run."""
    query = "where do I live and work"
    stats = Bm25Index(BODIES).stats
    vectors = semantic.VectorIndex.from_mapping(stored_vectors)
    whole = semantic.hybrid(query, CANDIDATES, corpus=stats, vectors=vectors, encoder=encoder)
    rng = random.Random(7)
    for _ in range(10):
        subset = rng.sample(CANDIDATES, rng.randint(1, len(CANDIDATES)))
        part = semantic.hybrid(query, subset, corpus=stats, vectors=vectors, encoder=encoder)
        for c in subset:
            assert part(query, c) == whole(query, c)
    from_bytes = semantic.hybrid(
        query, CANDIDATES, corpus=stats, vectors=stored_vectors, encoder=encoder
    )
    assert [from_bytes(query, c) for c in CANDIDATES] == [whole(query, c) for c in CANDIDATES]


def test_hybrid_embeds_a_revision_that_has_no_stored_vector(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    query = "what do I drink in the morning"
    stats = Bm25Index(BODIES).stats
    partial = {k: v for k, v in stored_vectors.items() if k != "e-coffee"}
    with_all = semantic.hybrid(
        query, CANDIDATES, corpus=stats, vectors=stored_vectors, encoder=encoder
    )
    without = semantic.hybrid(query, CANDIDATES, corpus=stats, vectors=partial, encoder=encoder)
    nothing = semantic.hybrid(query, CANDIDATES, corpus=stats, vectors=None, encoder=encoder)
    coffee = CANDIDATES[4]
    assert without(query, coffee) == pytest.approx(with_all(query, coffee), abs=1e-6)
    assert nothing(query, coffee) == without(query, coffee)


def test_hybrid_recall_is_byte_identical_over_shuffles(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    query = "tell me about my trip to the Portuguese capital"
    index = Bm25Index(BODIES)
    outputs = set()
    rng = random.Random(3)
    for _ in range(5):
        shuffled = CANDIDATES[:]
        rng.shuffle(shuffled)
        fn = semantic.hybrid(query, shuffled, corpus=index, vectors=stored_vectors, encoder=encoder)
        outputs.add(json.dumps(to_wire(resolve(shuffled, request(query), semantic=fn))))
    assert len(outputs) == 1


def test_hybrid_refuses_a_weight_outside_the_unit_interval(encoder: embedding.Encoder) -> None:
    with pytest.raises(ValueError, match="lexical_weight"):
        semantic.hybrid("x", CANDIDATES, encoder=encoder, lexical_weight=1.5)


def test_hybrid_with_full_lexical_weight_is_lexical(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    query = "oat milk flat white"
    index = Bm25Index(BODIES)
    lexical = semantic.lexical(query, CANDIDATES, corpus=index)
    pure = semantic.hybrid(
        query, CANDIDATES, corpus=index, vectors=stored_vectors, encoder=encoder, lexical_weight=1
    )
    assert [pure(query, c) for c in CANDIDATES] == [lexical(query, c) for c in CANDIDATES]


def test_vector_index_cosines_are_the_bits_hybrid_uses(
    encoder: embedding.Encoder, stored_vectors: dict[str, bytes]
) -> None:
    query = "what do I drink in the morning"
    vectors = semantic.VectorIndex.from_mapping(stored_vectors)
    every = vectors.cosines(encoder.encode_one(query)).tolist()
    subset = semantic.cosine_values(query, CANDIDATES[2:5], vectors, encoder)
    for c in CANDIDATES[2:5]:
        row = vectors.row(c.entry_id)
        assert row is not None and subset[c.entry_id] == every[row]
