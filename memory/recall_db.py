"""Recall's database fast path: fetch only the rows that can reach the top k.

`memory.recall.resolve` stays the single definition of the rules. This module decides
which of a member's rows `resolve` must see so that its *returned entries* equal those of
an exhaustive run over every row (tests/memory/test_recall_fast_path.py proves it):

1. **Database gates** (indexed): tenant, member, the reachable scope keys, current
   revision, lifecycle `active`, no active suppression, the adapter scopes the surface may
   consume, and the crisis frame (only `safety` rows, and only in a safety-critical
   context). Rows failing these could never be returned.
2. **Lexical matches**: every row whose body may share a word with the query. LIKE
   `%word%` is a superset for ASCII bodies (a stemmed term, less a final "y", is a
   substring of the word it came from); bodies with any non-ASCII character are always
   included, because Unicode case folding and NFKC can make words meet that LIKE would
   miss. For `jaccard` and `lexical` every other row has semantic value 0; for `hybrid`
   at most `1 - HYBRID_LEXICAL_WEIGHT` (the cosine share).
3. **Recency scan**: the remaining rows by `COALESCE(last_referenced_at, updated_at)`
   descending, in growing chunks. A row not yet seen scores at most
   `0.4·recency(anchor of the last row seen) + 0.15 + 0.1 + 0.35·(its semantic bound)`;
   the scan stops as soon as that bound is strictly below the k-th score `resolve` gives
   over the rows seen so far (strictly: an equal score could still win the tie-break).
4. **Cluster closure**: dedupe keeps the most recent row of a (category, actor, subject)
   cluster, whatever its score, so an unseen low-scoring row could knock a returned one out.
   Every row sharing (category, subject) with a seen row is fetched before each bound check.

Python gates (sensitive categories and interactions), dedupe, scoring and explaining then
run in `resolve` on the survivors, as they would on every row.

"Evaluated" on the fast path: `evaluatedCount` and `suppressionCounts` count the rows the
pipeline examined, that is, the rows the database handed over. Rows the database gated out
(another scope, paused, inactive) are not counted, because counting them by reason would
cost a scan of every row of the member, which is what the fast path exists to avoid. The
exhaustive path (`selectors.recall_candidates` + `resolve`) remains for audits that need
the full counts. docs/performance.md, "Recall latency", records this.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Avg, Count, Q, QuerySet
from django.db.models.functions import Coalesce, Length

from consent.enums import Category
from memory import recall, semantic
from memory.enums import Lifecycle, Origin
from memory.lexical import CorpusStats, query_terms, terms
from memory.models import MemoryEntry
from memory.recall_models import MemoryEmbedding
from memory.selectors import candidate_of

FIRST_CHUNK = 48
MAX_CHUNK = 4096
# BM25's average document length, estimated from characters: exact term counts would need
# every body tokenised. Both paths are handed the same CorpusStats, so ranking is
# identical; the estimate only shifts BM25's length normalisation slightly.
CHARS_PER_TERM = 8.0

# The best the three non-semantic terms can do for a row with a given anchor: the most
# references and the best origin.
_BEST_REFERENCES = recall.REFERENCE_COUNT_SATURATION
_BEST_ORIGIN = Origin.USER_STATED


@dataclass
class FastRecall:
    result: recall.RecallResult
    examined: int  # rows handed over by the database
    rounds: int  # bound checks
    corpus: CorpusStats | None = None
    revision_of: dict[str, uuid.UUID] = field(default_factory=dict)


def nonmatch_semantic_bound(ranker_name: str) -> float:
    """The most the semantic value can be for a row sharing no word with the query."""
    if ranker_name in ("jaccard", "lexical"):
        return 0.0
    if ranker_name == "hybrid":
        return 1.0 - semantic.HYBRID_LEXICAL_WEIGHT
    return 1.0


def base_rows(
    request: recall.RecallRequest, *, member: Any, adapter_scopes: Sequence[str] | None = None
) -> QuerySet[MemoryEntry]:
    """The member's rows that pass every gate the database can apply (caller has checked
    that `member` belongs to `request.tenant_id`)."""
    keys = recall.reachable_scope_keys(request)
    now = request.now
    rows = MemoryEntry.objects.filter(
        tenant_id=request.tenant_id,
        member=member,
        is_current=True,
        lifecycle=Lifecycle.ACTIVE,
        scope_key__in=sorted(keys),
    ).filter(
        Q(suppression_reason__isnull=True)
        | Q(suppression_ends_at__isnull=False, suppression_ends_at__lte=now)
    )
    if adapter_scopes is not None:
        rows = rows.filter(adapter_scope__in=sorted(adapter_scopes))
    if request.crisis_frame:
        if not request.safety_critical_context:
            return rows.none()
        rows = rows.filter(category=Category.SAFETY)
    return rows


def query_fragments(query: str, ranker_name: str = "jaccard") -> list[str]:
    """Substrings that every ASCII body word matching the query must contain.

    Jaccard tokens are case-folded words; a BM25 term is a word's stem, which is a prefix
    of the word except that "-ies"/"-ied" become "y": dropping a final "y" covers that.
    """
    frags = set(recall.tokens(query)) if ranker_name not in ("lexical", "hybrid") else set()
    for term in query_terms(query) if ranker_name != "jaccard" else ():
        frags.add(term[:-1] if term.endswith("y") and len(term) > 1 else term)
    # A fragment inside another is implied by it; keep the shorter one only.
    kept = [f for f in frags if not any(o != f and o in f for o in frags)]
    return sorted(kept)


def lexical_filter(
    rows: QuerySet[MemoryEntry], member_id: int, query: str, ranker_name: str = "jaccard"
) -> list[Any]:
    """Querysets whose union holds every row that may share a word with `query` (a Jaccard
    token for `jaccard`, a BM25 term for `lexical` and `hybrid`)."""
    frags = query_fragments(query, ranker_name)
    if not frags:
        return []
    if connection.vendor == "postgresql":
        # member_id repeated per arm so each arm is one scan of the (member_id, body) GIN
        # trigram index; the arms are OR-ed by a BitmapOr.
        arm = "(member_id = %s AND body ILIKE %s)"
        # Only the fixed arm text is joined; every pattern and id is a bound parameter.
        like = rows.extra(  # noqa: S610
            where=["(" + " OR ".join([arm] * len(frags)) + ")"],
            params=[p for f in frags for p in (member_id, f"%{f}%")],
        )
        wide = rows.extra(where=["octet_length(body) <> char_length(body)"])
        return [like, wide]
    arm = "body LIKE %s"
    return [
        rows.extra(  # noqa: S610  (fixed SQL, bound patterns)
            where=[
                "("
                + " OR ".join([arm] * len(frags))
                + " OR length(CAST(body AS BLOB)) <> length(body))"
            ],
            params=[f"%{f}%" for f in frags],
        )
    ]


def corpus_stats(rows: QuerySet[MemoryEntry], query: str, matches: Sequence[str]) -> CorpusStats:
    """BM25 statistics of the gated rows: count and average length from one aggregate,
    document frequencies of the query's terms from `matches` (bodies of every row that may
    contain one of them)."""
    agg = rows.aggregate(n=Count("pk"), chars=Avg(Length("body")))
    n = agg["n"] or 0
    avg_len = float(agg["chars"] or 0.0) / CHARS_PER_TERM
    q = set(query_terms(query))
    df: dict[str, int] = {}
    for body in matches:
        for t in q.intersection(terms(body)):
            df[t] = df.get(t, 0) + 1
    return CorpusStats(document_count=n, average_length=avg_len, document_frequency=df)


def _bound(anchor: datetime, now: datetime, semantic_bound: float) -> float:
    """The best score any row whose anchor is at or before `anchor` can reach."""
    probe = recall.Candidate(
        entry_id="",
        tenant_id="",
        user_id="",
        scope_kind="profile",
        scope_key="",
        category="preference",
        body="",
        subject=None,
        origin=_BEST_ORIGIN,
        lifecycle="active",
        suppression=None,
        multi_actor=None,
        provenance_chain=(),
        reference_count=_BEST_REFERENCES,
        last_referenced_at=anchor,
        created_at=anchor,
        updated_at=anchor,
        revision=1,
        external=False,
    )
    return recall.score(probe, now, semantic_bound)


def _cap(request: recall.RecallRequest) -> int:
    budget = recall.BUDGETS[recall.RecallSurface(request.surface)].max_entries
    return budget if request.limit is None else min(budget, request.limit)


def fast_resolve(
    request: recall.RecallRequest,
    *,
    member: Any,
    adapter_scopes: Sequence[str] | None = None,
    ranker_name: str = "jaccard",
    prepare: Any = None,
    encoder: Any = None,
    first_chunk: int = FIRST_CHUNK,
) -> FastRecall:
    """`resolve` over just enough of the member's rows to return what it would over all.

    `prepare(query, candidates, corpus=, vectors=)` is the ranker (`semantic_for`); None
    means Jaccard.
    """
    rows = base_rows(request, member=member, adapter_scopes=adapter_scopes)
    user_id = str(member.public_id)
    fetched: dict[str, recall.Candidate] = {}
    revision_of: dict[str, uuid.UUID] = {}
    examined = 0

    def take(queryset: QuerySet[MemoryEntry]) -> list[MemoryEntry]:
        nonlocal examined
        got = list(queryset)
        examined += len(got)
        for entry in got:
            key = str(entry.entry_id)
            if key not in fetched:
                fetched[key] = candidate_of(entry, user_id=user_id)
                revision_of[key] = entry.revision_id
        return got

    effective = ranker_name if prepare is not None else "jaccard"
    for queryset in lexical_filter(rows, member.pk, request.query, effective):
        take(queryset)
    # Bodies of every row that may hold a query term, once each: document frequencies.
    match_bodies = {k: c.body for k, c in fetched.items()}

    corpus: CorpusStats | None = None
    if effective in ("lexical", "hybrid"):
        corpus = corpus_stats(rows, request.query, list(match_bodies.values()))

    vectors: dict[str, bytes] = {}
    # A row's semantic value depends only on (query, row, corpus), never on the pool
    # (memory.semantic), so each row is prepared once, however many rounds the scan takes.
    values: dict[str, float] = {}

    def semantic_fn(pool: list[recall.Candidate]) -> recall.SemanticFn:
        if prepare is None or ranker_name == "jaccard":
            return recall.jaccard_semantic
        fresh = [c for c in pool if c.entry_id not in values]
        if fresh:
            kwargs: dict[str, Any] = {"corpus": corpus}
            if ranker_name == "hybrid":
                missing = [revision_of[c.entry_id] for c in fresh if c.entry_id not in vectors]
                by_revision = {revision_of[c.entry_id]: c.entry_id for c in fresh}
                for rev, blob in MemoryEmbedding.objects.filter(
                    revision_id__in=missing
                ).values_list("revision_id", "vector"):
                    vectors[by_revision[rev]] = bytes(blob)
                kwargs["vectors"] = {k: vectors[k] for k in by_revision.values() if k in vectors}
                if encoder is not None:
                    kwargs["encoder"] = encoder
            fn = prepare(request.query, fresh, **kwargs)
            for c in fresh:
                values[c.entry_id] = fn(request.query, c)

        def cached(query: str, candidate: recall.Candidate) -> float:
            return values[candidate.entry_id]

        return cached

    closed: set[tuple[str, str]] = set()

    passes = recall.gatekeeper(request)

    def close_clusters() -> None:
        # Only a cluster row at least as recent as the newest *surviving* row seen can
        # change which row wins (or tie with it), so older ones are never fetched. A pair
        # with no survivor yet stays open: an unseen survivor there cannot reach the top k
        # (the bound), nor knock a seen survivor out (there is none).
        while True:
            newest: dict[tuple[str, str], datetime] = {}
            for c in fetched.values():
                if c.subject and (str(c.category), c.subject) not in closed and passes(c) is None:
                    pair = (str(c.category), c.subject)
                    if pair not in newest or c.updated_at > newest[pair]:
                        newest[pair] = c.updated_at
            if not newest:
                return
            closed.update(newest)
            match = Q()
            for (category, subject), since in sorted(newest.items()):
                match |= Q(category=category, subject=subject, updated_at__gte=since)
            take(rows.filter(match))

    cap = _cap(request)
    semantic_bound = nonmatch_semantic_bound(effective)
    scan = rows.annotate(anchor=Coalesce("last_referenced_at", "updated_at")).order_by(
        "-anchor", "entry_id"
    )
    last: tuple[datetime, uuid.UUID] | None = None
    chunk = max(1, first_chunk)
    exhausted = cap == 0
    rounds = 0
    while True:
        close_clusters()
        pool = sorted(fetched.values(), key=lambda c: c.entry_id)
        result = recall.resolve(pool, request, semantic=semantic_fn(pool))
        rounds += 1
        if exhausted:
            break
        if last is not None and len(result.entries) == cap:
            if _bound(last[0], request.now, semantic_bound) < result.entries[-1].score:
                break
        page = scan
        if last is not None:
            page = scan.filter(Q(anchor__lt=last[0]) | Q(anchor=last[0], entry_id__gt=last[1]))
        got = take(page[:chunk])
        if len(got) < chunk:
            exhausted = True
        if got:
            tail = got[-1]
            last = (tail.last_referenced_at or tail.updated_at, tail.entry_id)
        chunk = min(chunk * 2, MAX_CHUNK)
    return FastRecall(
        result=result, examined=examined, rounds=rounds, corpus=corpus, revision_of=revision_of
    )


def exhaustive_resolve(
    request: recall.RecallRequest,
    *,
    member: Any,
    adapter_scopes: Sequence[str] | None = None,
    ranker_name: str = "jaccard",
    prepare: Any = None,
    corpus: CorpusStats | None = None,
    vectors: Mapping[str, bytes] | None = None,
    encoder: Any = None,
) -> recall.RecallResult:
    """The reference: every current row of the reachable keys through `resolve`."""
    from memory.selectors import recall_candidates

    candidates = recall_candidates(
        tenant_id=uuid.UUID(str(request.tenant_id)),
        member=member,
        scope_keys=recall.reachable_scope_keys(request),
        adapter_scopes=adapter_scopes,
    )
    fn: recall.SemanticFn = recall.jaccard_semantic
    if prepare is not None and ranker_name != "jaccard":
        kwargs: dict[str, Any] = {"corpus": corpus}
        if ranker_name == "hybrid":
            kwargs["vectors"] = vectors
            if encoder is not None:
                kwargs["encoder"] = encoder
        fn = prepare(request.query, candidates, **kwargs)
    return recall.resolve(candidates, request, semantic=fn)
