"""The semantic term of recall, selectable by setting: `jaccard`, `lexical` or `hybrid`.

`memory.recall.resolve` takes a `SemanticFn(query, candidate) -> [0, 1]`. Lexical and
hybrid scoring need more than one candidate at a time (corpus statistics, stored vectors,
one query embedding), so each ranker here is a *preparer*: called once per recall with the
query and the candidates, it returns the `SemanticFn` to hand to `resolve`::

    rank = semantic_for(settings.IRIS_RECALL_SEMANTIC)
    semantic = rank(request.query, candidates, corpus=member_corpus, vectors=member_vectors)
    result = resolve(candidates, request, semantic=semantic)

- `jaccard`: the spec's default, `memory.recall.jaccard_semantic` itself (returned as is, so
  `resolve` keeps its tokenise-the-query-once shortcut).
- `lexical`: BM25 (`memory.lexical`) of the query against the body, normalised into [0, 1)
  by the query's supremum.
- `hybrid`: `HYBRID_LEXICAL_WEIGHT * lexical + (1 - HYBRID_LEXICAL_WEIGHT) * max(0, cosine)`
  where cosine is between the all-MiniLM-L6-v2 embeddings of the query and of the body (the
  body's vector is the one stored with its revision). The weight was tuned on the dev split
  of `bench/recall_quality.py` (never its test split); docs/performance.md has the figures.

Every value depends only on (query, candidate body or vector, corpus statistics): never on
which other candidates are in the call. So a database fast path that scores a subset of
rows gets the same value for each row as an exhaustive run over all of them, provided both
pass the same `corpus` (the member's corpus statistics, not those of the subset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from memory import embedding
from memory.lexical import Bm25Index, CorpusStats, query_terms, terms
from memory.recall import Candidate, SemanticFn, jaccard_semantic

if TYPE_CHECKING:
    import numpy as np

SETTING_NAME = "IRIS_RECALL_SEMANTIC"
DEFAULT_RANKER = "jaccard"

# Share of the lexical signal in `hybrid`; the rest is the embedding cosine. Tuned on the
# dev split of bench/recall_quality.py (grid 0.0..1.0 by 0.05, best mean of hit@12 and
# nDCG@12 over both sizes); the test split never saw it.
HYBRID_LEXICAL_WEIGHT = 0.5

jaccard_semantic = jaccard_semantic  # re-exported: the spec's default SemanticFn


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
    """Unit vectors by entry id, as one (n, 384) float32 matrix for a single matmul."""

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

    `vectors` holds the stored vector of each candidate's current revision; a candidate
    without one (written before the model was installed) is embedded here, in one batch.
    Raises `EmbeddingUnavailable` when the model cannot load.
    """
    encoder = encoder or embedding.default_encoder()
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError("lexical_weight must be within [0, 1]")

    def blend(pool: Sequence[Candidate]) -> dict[str, float]:
        lex = lexical_values(query, pool, corpus)
        cos = cosine_values(query, pool, vectors, encoder)
        w = lexical_weight
        return {
            c.entry_id: w * lex[c.entry_id] + (1.0 - w) * max(0.0, cos[c.entry_id]) for c in pool
        }

    return _prepared(query, blend(candidates), lambda c: blend([c])[c.entry_id])


RANKERS: Mapping[str, Ranker] = {"jaccard": jaccard, "lexical": lexical, "hybrid": hybrid}


def semantic_for(setting_name: str | None) -> Ranker:
    """The ranker a setting value names (`IRIS_RECALL_SEMANTIC`; empty means jaccard).

    Fails loudly, never silently degrades: an unknown name is a ValueError, and `hybrid`
    without the model installed raises `EmbeddingUnavailable` with the reason, so a
    deployment that asked for embeddings does not start without them.
    """
    name = (setting_name or DEFAULT_RANKER).strip().lower()
    ranker = RANKERS.get(name)
    if ranker is None:
        raise ValueError(
            f"{SETTING_NAME} must be one of {', '.join(RANKERS)}; got {setting_name!r}"
        )
    if name == "hybrid":
        reason = embedding.unavailable_reason()
        if reason is not None:
            raise embedding.EmbeddingUnavailable(f"{SETTING_NAME}=hybrid but {reason}")
    return ranker


# --------------------------------------------------------------------------------------
# Building blocks (also used by bench/recall_quality.py)


def lexical_values(
    query: str, candidates: Sequence[Candidate], corpus: Bm25Index | CorpusStats | None
) -> dict[str, float]:
    """Normalised BM25 of each candidate, by entry id."""
    q = query_terms(query)
    if corpus is None:
        corpus = Bm25Index((c.entry_id, c.body) for c in candidates)
    if isinstance(corpus, Bm25Index):
        index: Bm25Index | None = corpus
        stats = corpus.stats
    else:
        index, stats = None, corpus
    upper = stats.upper_bound(q)
    if upper <= 0.0:
        return dict.fromkeys((c.entry_id for c in candidates), 0.0)
    indexed = index.scores(query) if index is not None else {}
    out: dict[str, float] = {}
    for c in candidates:
        if index is not None and c.entry_id in index:
            raw = indexed.get(c.entry_id, 0.0)
        else:
            doc = terms(c.body)
            raw = stats.score_counts(q, _counts(doc), len(doc))
        out[c.entry_id] = raw / upper
    return out


def cosine_values(
    query: str,
    candidates: Sequence[Candidate],
    vectors: VectorIndex | Mapping[str, Any] | None,
    encoder: embedding.Encoder,
) -> dict[str, float]:
    """Cosine of the query's embedding and each candidate's, by entry id.

    Row by row with `einsum`, not BLAS: a BLAS matrix-vector product may sum a row in a
    different order depending on how many rows it is given, and a last-bit difference can
    flip the 6-decimal rounding of a recall score. `einsum` gives each row the same bits
    whatever the batch, so a fast path over a subset agrees with an exhaustive run.
    """
    import numpy as np

    if vectors is not None and not isinstance(vectors, VectorIndex):
        vectors = VectorIndex.from_mapping(
            {c.entry_id: vectors[c.entry_id] for c in candidates if c.entry_id in vectors}
        )
    q = encoder.encode_one(query)
    out: dict[str, float] = {}
    missing: list[Candidate] = []
    if vectors is not None:
        rows = [vectors.row(c.entry_id) for c in candidates]
        present = [(c, r) for c, r in zip(candidates, rows, strict=True) if r is not None]
        if present:
            picked = np.fromiter((r for _, r in present), dtype=np.int64, count=len(present))
            if 2 * len(present) >= len(vectors):
                sims = np.einsum("ij,j->i", vectors.matrix, q)[picked]
            else:
                sims = np.einsum("ij,j->i", vectors.matrix[picked], q)
            for (c, _), s in zip(present, sims.tolist(), strict=True):
                out[c.entry_id] = s
        missing = [c for c, r in zip(candidates, rows, strict=True) if r is None]
    else:
        missing = list(candidates)
    # A revision stored before the model was installed: embed it alone (unpadded, so the
    # bits do not depend on its batch-mates) and uncached (bodies stay out of the cache).
    for c in missing:
        vector = encoder.encode_one(c.body, cache=False)
        out[c.entry_id] = float(np.einsum("ij,j->i", vector[None, :], q)[0])
    return out


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
