"""The semantic term of recall, selectable by setting: `jaccard`, `lexical` or `hybrid`.

`memory.recall.resolve` takes a `SemanticFn(query, candidate) -> [0, 1]`. Lexical and
hybrid scoring need more than one candidate at a time (corpus statistics, stored vectors,
one query embedding), so each ranker here is a *preparer*: called once per recall with the
query and the candidates, it returns the `SemanticFn` to hand to `resolve`::

    rank = semantic_for(settings.IRIS_RECALL_SEMANTIC)
    semantic = rank(request.query, candidates, corpus=member_corpus, vectors=member_vectors)
    result = resolve(candidates, request, semantic=semantic)

- `jaccard`: the spec's token-set overlap, `memory.recall.jaccard_semantic` itself (returned
  as is, so `resolve` keeps its tokenise-the-query-once shortcut).
- `lexical`: BM25 (`memory.rules.lexical`) of the query against the body, normalised into [0, 1)
  by the query's supremum.
- `hybrid`: `HYBRID_LEXICAL_WEIGHT * lexical + (1 - HYBRID_LEXICAL_WEIGHT) * max(0, cosine)`
  where cosine is between the all-MiniLM-L6-v2 embeddings of the query and of the body (the
  body's vector is the one stored with its revision). The weight was tuned on the dev split
  of `bench/recall_quality.py` (never its test split); docs/performance.md has the figures.
  The default: the model is part of the install. Where it cannot load, the service ranks
  with `lexical` instead and says so (`FALLBACK_RANKER`, docs/decisions/recall.md).

Every value depends only on (query, candidate body or vector, corpus statistics): never on
which other candidates are in the call. So a database fast path that scores a subset of
rows gets the same value for each row as an exhaustive run over all of them, provided both
pass the same `corpus` (the member's corpus statistics, not those of the subset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

from memory.recall.pipeline import Candidate, SemanticFn
from memory.recall.pipeline import jaccard_semantic as jaccard_semantic  # re-exported
from memory.recall.ranking import embedding
from memory.rules.lexical import Bm25Index, CorpusStats, fragments, query_terms, terms

if TYPE_CHECKING:
    import numpy as np

_ENTRY_ID = attrgetter("entry_id")

SETTING_NAME = "IRIS_RECALL_SEMANTIC"
DEFAULT_RANKER = "hybrid"
# What recall ranks with when the default (or an asked-for) hybrid cannot load its model:
# BM25 is the hybrid's own lexical half, so a query still meets the same words.
FALLBACK_RANKER = "lexical"

# Share of the lexical signal in `hybrid`; the rest is the embedding cosine. Tuned on the
# dev split of bench/recall_quality.py (grid 0.0..1.0 by 0.05, best mean of hit@12 and
# nDCG@12 over both sizes); the test split never saw it.
HYBRID_LEXICAL_WEIGHT = 0.5

# The semantic value a memory must exceed to count as matching a question at all
# (`memory.recall.resolve`'s `relevance_floor`). Jaccard and BM25 are 0 exactly when no word
# is shared. The hybrid blend never is (a cosine of unrelated sentences is small, not 0):
# its floor was read off the dev split of bench/recall_quality.py, where it keeps the best
# relevant memory of 99.4 % of the questions at 1k and all of them at 10k while dropping
# nine in ten of the memories that answer something else (docs/decisions/recall.md,
# "Relevance first").
RELEVANCE_FLOORS: Mapping[str, float] = {"jaccard": 0.0, "lexical": 0.0, "hybrid": 0.15}


def relevance_floor(ranker_name: str) -> float:
    """The relevance floor of a ranker (0 for one this module does not name)."""
    return RELEVANCE_FLOORS.get(ranker_name, 0.0)


class Ranker(Protocol):
    def __call__(
        self,
        query: str,
        candidates: Sequence[Candidate],
        *,
        corpus: Bm25Index | CorpusStats | None = None,
        vectors: VectorIndex | Mapping[str, Any] | None = None,
    ) -> SemanticFn: ...


# --------------------------------------------------------------------------------------
# Stored vectors


class VectorIndex:
    """Unit vectors by entry id, as one (n, 384) float32 matrix."""

    __slots__ = ("_rows", "matrix")

    def __init__(self, ids: Sequence[str], matrix: np.ndarray) -> None:
        import numpy as np

        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape != (len(ids), embedding.DIMENSION):
            raise ValueError(f"matrix must be ({len(ids)}, {embedding.DIMENSION})")
        rows = {entry_id: row for row, entry_id in enumerate(ids)}
        if len(rows) != len(ids):
            raise ValueError("duplicate entry id")
        self._rows = rows
        self.matrix = matrix

    @classmethod
    def from_mapping(cls, vectors: Mapping[str, Any]) -> VectorIndex:
        """From `{entry_id: bytes (as stored) or array}`."""
        import numpy as np

        ids = list(vectors)
        matrix = np.empty((len(ids), embedding.DIMENSION), dtype=np.float32)
        for row, entry_id in enumerate(ids):
            value = vectors[entry_id]
            if isinstance(value, bytes | bytearray | memoryview):
                matrix[row] = embedding.from_bytes(value)
            else:
                matrix[row] = value
        return cls(ids, matrix)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._rows

    def row(self, entry_id: str) -> int | None:
        return self._rows.get(entry_id)

    def cosines(self, query_vector: np.ndarray) -> np.ndarray:
        """Cosine of `query_vector` with every row (float32, row order), computed row by row
        (`einsum`), so each value is the same bits `hybrid` uses for that entry. A fast
        path can take its best rows by meaning from this in ~2 ms at 10k rows."""
        import numpy as np

        return np.einsum("ij,j->i", self.matrix, query_vector)

    def rows(self) -> Mapping[str, int]:
        """Row of each entry id (read-only use)."""
        return self._rows


# --------------------------------------------------------------------------------------
# The rankers


def jaccard(
    query: str,
    candidates: Sequence[Candidate],
    *,
    corpus: Bm25Index | CorpusStats | None = None,
    vectors: VectorIndex | Mapping[str, Any] | None = None,
) -> SemanticFn:
    """The spec's token-set Jaccard; needs no preparation."""
    return jaccard_semantic


def lexical(
    query: str,
    candidates: Sequence[Candidate],
    *,
    corpus: Bm25Index | CorpusStats | None = None,
    vectors: VectorIndex | Mapping[str, Any] | None = None,
) -> SemanticFn:
    """Normalised BM25 against `corpus` (an index keyed by entry id, or bare statistics;
    None builds statistics from `candidates`, which a fast path must not rely on)."""
    values = lexical_values(query, candidates, corpus)
    return _prepared(query, values, lambda c: lexical_values(query, [c], corpus)[c.entry_id])


def hybrid(
    query: str,
    candidates: Sequence[Candidate],
    *,
    corpus: Bm25Index | CorpusStats | None = None,
    vectors: VectorIndex | Mapping[str, Any] | None = None,
    encoder: embedding.Encoder | None = None,
    lexical_weight: float = HYBRID_LEXICAL_WEIGHT,
) -> SemanticFn:
    """The documented blend of normalised BM25 and embedding cosine.

    `vectors` holds the stored vector of each candidate's current revision (bytes as
    stored, arrays, or a `VectorIndex`); a candidate without one (written before the model
    was installed) is embedded here, one at a time, which costs ~10 ms each: a backfill
    should store them. Raises `EmbeddingUnavailable` when the model cannot load.
    """
    encoder = encoder or embedding.default_encoder()
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError("lexical_weight must be within [0, 1]")

    def blend(pool: Sequence[Candidate]) -> dict[str, float]:
        import numpy as np

        ids = list(map(_ENTRY_ID, pool))
        lex = lexical_values(query, pool, corpus)
        lexical_part = np.fromiter(map(lex.__getitem__, ids), dtype=np.float64, count=len(ids))
        cosine = cosine_array(query, pool, vectors, encoder).astype(np.float64)
        # elementwise IEEE double, the same operations for one candidate as for ten thousand
        values = lexical_weight * lexical_part + (1.0 - lexical_weight) * np.maximum(cosine, 0.0)
        return dict(zip(ids, values.tolist(), strict=True))

    return _prepared(query, blend(candidates), lambda c: blend([c])[c.entry_id])


RANKERS: Mapping[str, Ranker] = {"jaccard": jaccard, "lexical": lexical, "hybrid": hybrid}


def semantic_for(setting_name: str | None) -> Ranker:
    """The ranker a setting value names (`IRIS_RECALL_SEMANTIC`; empty means hybrid).

    Never degrades by itself: an unknown name is a ValueError, and `hybrid` without the
    model installed raises `EmbeddingUnavailable` with the reason. Falling back to
    `FALLBACK_RANKER`, and saying so, is the recall service's decision
    (`memory.recall.service.ranker_state`).
    """
    name = (setting_name or DEFAULT_RANKER).strip().lower()
    ranker = RANKERS.get(name)
    if ranker is None:
        raise ValueError(
            f"{SETTING_NAME} must be one of {', '.join(RANKERS)}; got {setting_name!r}"
        )
    if name == "hybrid" and not embedding.loaded():
        # Asked at every recall: once the model has loaded, it is there.
        reason = embedding.unavailable_reason()
        if reason is not None:
            raise embedding.EmbeddingUnavailable(f"{SETTING_NAME}=hybrid but {reason}")
    return ranker


# --------------------------------------------------------------------------------------
# Building blocks (also used by bench/recall_quality.py)


def lexical_values(
    query: str, candidates: Sequence[Candidate], corpus: Bm25Index | CorpusStats | None
) -> dict[str, float]:
    """Normalised BM25 of each candidate, by entry id.

    With an index, only the documents that share a term with the query are scored (its
    postings); a candidate the index does not hold is scored from its body with the
    index's statistics.
    """
    q = query_terms(query)
    if corpus is None:
        corpus = Bm25Index((c.entry_id, c.body) for c in candidates)
    out = dict.fromkeys(map(_ENTRY_ID, candidates), 0.0)
    stats = corpus.stats if isinstance(corpus, Bm25Index) else corpus
    upper = stats.upper_bound(q)
    if upper <= 0.0:
        return out
    unindexed: Sequence[Candidate] = candidates
    if isinstance(corpus, Bm25Index):
        for doc_id, raw in corpus.scores(query).items():
            if doc_id in out:
                out[doc_id] = raw / upper
        absent = out.keys() - corpus.document_ids()
        unindexed = [c for c in candidates if c.entry_id in absent] if absent else ()
    frags = fragments(q)
    for c in unindexed:
        body = c.body
        # A plain-ASCII body holding none of the fragments holds none of the terms: its
        # score is 0 without tokenising it (most rows a recall reads, measured at 1k).
        # Other bodies may meet a term through Unicode folding; they are tokenised.
        if body.isascii():
            lowered = body.lower()
            if not any(f in lowered for f in frags):
                continue
        doc = terms(body)
        out[c.entry_id] = stats.score_counts(q, _counts(doc), len(doc)) / upper
    return out


def cosine_array(
    query: str,
    candidates: Sequence[Candidate],
    vectors: VectorIndex | Mapping[str, Any] | None,
    encoder: embedding.Encoder,
) -> np.ndarray:
    """Cosine of the query's embedding and each candidate's, in candidate order (float32).

    Row by row with `einsum`, not BLAS: a BLAS matrix-vector product may sum a row in a
    different order depending on how many rows it is given, and a last-bit difference can
    flip the 6-decimal rounding of a recall score. `einsum` gives each row the same bits
    whatever the batch (tested), so a fast path over a subset agrees with an exhaustive run.
    """
    import numpy as np

    if vectors is not None and not isinstance(vectors, VectorIndex):
        vectors = VectorIndex.from_mapping(
            {c.entry_id: vectors[c.entry_id] for c in candidates if c.entry_id in vectors}
        )
    q = encoder.encode_one(query)
    out = np.zeros(len(candidates), dtype=np.float32)
    if vectors is not None and len(vectors):
        lookup = vectors.rows()
        rows = np.fromiter(
            map(lookup.get, map(_ENTRY_ID, candidates), repeat(-1)),
            dtype=np.int64,
            count=len(candidates),
        )
        have = rows >= 0
        picked = rows[have]
        if len(picked):
            if 2 * len(picked) >= len(vectors):
                out[have] = vectors.cosines(q)[picked]
            else:
                out[have] = np.einsum("ij,j->i", vectors.matrix[picked], q)
        missing = np.flatnonzero(~have).tolist()
    else:
        missing = list(range(len(candidates)))
    # A revision stored before the model was installed: embed it alone (unpadded, so the
    # bits do not depend on its batch-mates) and uncached (bodies stay out of the cache).
    for position in missing:
        vector = encoder.encode_one(candidates[position].body, cache=False)
        out[position] = np.einsum("ij,j->i", vector[None, :], q)[0]
    return out


def cosine_values(
    query: str,
    candidates: Sequence[Candidate],
    vectors: VectorIndex | Mapping[str, Any] | None,
    encoder: embedding.Encoder,
) -> dict[str, float]:
    """`cosine_array` by entry id."""
    sims = cosine_array(query, candidates, vectors, encoder).tolist()
    return {c.entry_id: s for c, s in zip(candidates, sims, strict=True)}


def _counts(doc: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in doc:
        counts[t] = counts.get(t, 0) + 1
    return counts


def _prepared(
    query: str, values: Mapping[str, float], compute: Callable[[Candidate], float]
) -> SemanticFn:
    """A SemanticFn over precomputed values; a candidate outside them is computed alone."""

    def semantic(asked: str, candidate: Candidate) -> float:
        if asked != query:
            raise ValueError("this semantic function was prepared for another query")
        value = values.get(candidate.entry_id)
        return compute(candidate) if value is None else value

    return semantic
