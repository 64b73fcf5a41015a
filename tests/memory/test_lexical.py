"""BM25 lexical scoring (memory/rules/lexical.py): the tokeniser's rules and the scorer's maths."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.rules.lexical import K1, B, Bm25Index, CorpusStats, fragments, query_terms, stem, terms

DOCS = {
    "d1": "I moved to Lisbon in March for a job at a bakery.",
    "d2": "My sister moved to Porto for a job at a bank.",
    "d3": "The bakery near the station sells custard tarts.",
    "d4": "I take the 7:42 train to work every weekday.",
}


# -- tokeniser -------------------------------------------------------------------------


def test_terms_case_fold_and_normalise_unicode() -> None:
    assert terms("STRASSE Straße") == ["strass", "strass"]
    assert terms("ｆｕｌｌ-width") == ["full", "width"]  # NFKC folds full-width letters


def test_terms_drop_stop_words_and_single_letters_but_keep_digits() -> None:
    assert terms("I am at the 7 o'clock class in 2019") == ["7", "clock", "class", "2019"]


def test_terms_split_on_apostrophes_and_punctuation() -> None:
    assert terms("My mum's café, isn't it?") == ["mum", "café"]


@pytest.mark.parametrize(
    ("words", "same"),
    [
        (["moved", "moves", "moving", "move"], True),
        (["cities", "city"], True),
        (["classes", "class"], True),
        (["boxes", "box"], True),
        (["running", "run"], True),
        (["planned", "plan"], True),
        (["studies", "studied", "study"], True),
        (["bakery", "bake"], False),  # derivations stay apart
        (["relocation", "relocate"], False),
    ],
)
def test_stem_folds_inflections_not_derivations(words: list[str], same: bool) -> None:
    assert (len({stem(w) for w in words}) == 1) is same


@pytest.mark.parametrize("word", ["need", "kiss", "bus", "gas", "focus", "analysis", "2019", "ok"])
def test_stem_leaves_words_it_has_no_rule_for(word: str) -> None:
    assert stem(word) == word


def test_query_terms_are_distinct_in_first_seen_order() -> None:
    assert query_terms("bakery job, bakery LISBON job") == ("bakery", "job", "lisbon")


# -- scoring ---------------------------------------------------------------------------


def test_bm25_matches_a_hand_computation() -> None:
    index = Bm25Index(DOCS)
    lengths = {d: len(terms(t)) for d, t in DOCS.items()}
    avg = sum(lengths.values()) / len(lengths)
    n = len(DOCS)

    def idf(df: int) -> float:
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def part(tf: int, length: int, df: int) -> float:
        return idf(df) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))

    # "bakery" is in d1 and d3; "lisbon" only in d1
    expected = part(1, lengths["d1"], 2) + part(1, lengths["d1"], 1)
    assert index.score("Lisbon bakery", "d1") == pytest.approx(expected, rel=1e-12)
    assert index.score("Lisbon bakery", "d3") == pytest.approx(part(1, lengths["d3"], 2))


def test_idf_is_never_negative_even_for_a_term_in_every_document() -> None:
    index = Bm25Index({"a": "coffee", "b": "coffee", "c": "coffee tea"})
    assert index.stats.idf("coffee") > 0
    assert index.stats.idf("tea") > index.stats.idf("coffee")
    assert index.stats.idf("absent") > index.stats.idf("tea")


def test_rarer_terms_weigh_more() -> None:
    index = Bm25Index(DOCS)
    # both contain "moved" and "job"; only d1 has the rare "lisbon"
    assert index.score("moved job Lisbon", "d1") > index.score("moved job Lisbon", "d2")


def test_repeating_a_query_word_does_not_change_the_score() -> None:
    index = Bm25Index(DOCS)
    assert index.score("bakery bakery bakery", "d3") == index.score("bakery", "d3")


def test_shorter_document_with_the_same_match_scores_higher() -> None:
    index = Bm25Index({"short": "bakery Lisbon", "long": "bakery " + "word " * 30})
    assert index.score("bakery", "short") > index.score("bakery", "long")


def test_no_shared_term_scores_zero_and_unknown_id_is_an_error() -> None:
    index = Bm25Index(DOCS)
    assert index.score("violin lessons", "d1") == 0.0
    assert index.score("", "d1") == 0.0
    with pytest.raises(KeyError):
        index.score("bakery", "nope")


def test_duplicate_document_id_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Bm25Index([("a", "x"), ("a", "y")])


def test_empty_index_scores_nothing() -> None:
    index = Bm25Index({})
    assert len(index) == 0
    assert index.scores("anything") == {}
    assert index.normalised_scores("anything") == {}


def test_search_orders_by_score_then_id() -> None:
    index = Bm25Index({"b": "coffee tea", "a": "coffee tea", "c": "coffee"})
    assert [d for d, _ in index.search("coffee", 3)] == ["c", "a", "b"]  # shortest first
    assert len(index.search("coffee", 1)) == 1


def test_score_text_with_index_stats_equals_indexed_score() -> None:
    index = Bm25Index(DOCS)
    for doc_id, text in DOCS.items():
        assert index.stats.score_text("moved bakery job", text) == index.score(
            "moved bakery job", doc_id
        )


# -- normalisation ---------------------------------------------------------------------


def test_normalised_score_is_below_one_and_keeps_the_order() -> None:
    index = Bm25Index(DOCS)
    query = "moved to Lisbon for a bakery job"
    raw = {d: index.score(query, d) for d in DOCS}
    norm = {d: index.normalised_score(query, d) for d in DOCS}
    assert all(0.0 <= v < 1.0 for v in norm.values())
    assert sorted(raw, key=raw.__getitem__) == sorted(norm, key=norm.__getitem__)
    assert norm == pytest.approx(index.normalised_scores(query) | {"d4": 0.0})


def test_normalisation_depends_only_on_query_and_corpus_stats() -> None:
    stats = Bm25Index(DOCS).stats
    q = query_terms("bakery Lisbon")
    alone = stats.normalise(stats.score_text("bakery Lisbon", DOCS["d1"]), q)
    assert alone == Bm25Index(DOCS).normalised_score("bakery Lisbon", "d1")


def test_query_without_terms_normalises_to_zero() -> None:
    stats = CorpusStats(document_count=0, average_length=0.0, document_frequency={})
    assert stats.normalise(0.0, ()) == 0.0
    assert stats.score_counts(("x",), {}, 0) == 0.0


# -- properties ------------------------------------------------------------------------

_words = st.sampled_from(
    "coffee tea lisbon porto bakery bank moved moving job jobs train cat cats the a my".split()
)
_texts = st.lists(_words, min_size=0, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(_texts, min_size=1, max_size=12), query=_texts)
def test_inverted_index_scores_equal_direct_scores_exactly(docs: list[str], query: str) -> None:
    index = Bm25Index({f"d{i}": t for i, t in enumerate(docs)})
    fast = index.scores(query)
    for i in range(len(docs)):
        direct = index.score(query, f"d{i}")
        assert fast.get(f"d{i}", 0.0) == direct
        assert direct >= 0.0
    for value in index.normalised_scores(query).values():
        assert 0.0 <= value < 1.0


_ROOTS = ["stud", "plan", "run", "cop", "agre", "bak", "carr", "mov", "fly", "box", "7", "y"]
_SUFFIXES = ["", "s", "es", "y", "ies", "ied", "ed", "ing", "e", "ning", "ned", "ee", "ss"]
_ascii_word = st.builds(
    lambda r, s, upper: (r + s).upper() if upper else r + s,
    st.sampled_from(_ROOTS),
    st.sampled_from(_SUFFIXES),
    st.booleans(),
)
_ascii_text = st.lists(_ascii_word, max_size=6).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(body=_ascii_text, query=_ascii_text)
def test_an_ascii_body_without_a_fragment_holds_no_query_term(body: str, query: str) -> None:
    # memory.recall.ranking.semantic.lexical_values skips tokenising such bodies: their score is 0.
    q = query_terms(query)
    if not any(f in body.lower() for f in fragments(q)):
        assert not set(terms(body)) & set(q)


def test_fragments_drop_a_final_y_and_keep_the_shorter_of_nested_ones() -> None:
    assert fragments(["study", "stud", "box"]) == ["box", "stud"]
    assert fragments(["7", "plan"]) == ["7", "plan"]
