"""Recall's database fast path: fetch only the rows that can reach the top k.

`memory.recall.resolve` stays the single definition of the rules. This module decides
which of a member's rows `resolve` must see so that its *returned entries* equal those of
an exhaustive run over every row (tests/memory/test_recall_fast_path.py proves it):

1. **Database gates** (indexed): tenant, member, the reachable scope keys, current
   revision, lifecycle `active`, no active suppression, the adapter scopes the surface may
   consume, and the crisis frame (only `safety` rows, and only in a safety-critical
   context). Rows failing these could never be returned.
2. **Whole sets**, read once: on PostgreSQL with `lexical`/`hybrid`, the non-ASCII bodies
   (the term index of migration 0004 holds only ASCII bodies' terms, Unicode folding is
   Python's); otherwise every row that may share a word with the query (LIKE
   `%fragment%`, plus every non-ASCII body).
3. **Recency streams**: all gated rows by `COALESCE(last_referenced_at, updated_at)`
   descending, and on PostgreSQL, when a bound needs it, the rows holding one query term in
   the same order (GIN term index). Streams grow in doubling chunks until every term set an
   unseen row could hold is bounded strictly below the k-th score (`_violated`). Once the
   k-th score is known, a chunk read on hands over only rows whose score, bounded row by
   row in SQL, can still reach it (`_reach_filter`). No index holds this order: it would
   hold the usage counters, and every bump would add an entry to each index (migration
   0013). Recall ranks from the member snapshot, so here PostgreSQL sorts the gated rows.
4. **Cluster closure**, in the same statement: every gated row sharing (category, subject)
   with a fetched row and at least as recent, because dedupe keeps the most recent row of
   a cluster whatever its score.

Python gates (sensitive categories and interactions), dedupe, scoring and explaining then
run in `resolve` on the survivors, as they would on every row.

"Evaluated" on this path: `evaluatedCount` and `suppressionCounts` count the rows the
pipeline examined, that is, the rows the database handed over, not every reachable row.
So the service answers from a member snapshot (`memory.recall.snapshot`), which counts
every one; this path stays the bounded reference for what may be returned, and
`inactive_drops` counts the rows no fast path reads. docs/decisions/recall.md,
"Envelope counts", records this.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet

from consent.enums import Category
from governance import plainsql
from memory.enums import Lifecycle, Origin
from memory.models import JACCARD_MARK, MemoryEntry
from memory.recall import pipeline as recall
from memory.recall.models import MemoryEmbedding
from memory.recall.ranking import semantic
from memory.rules.lexical import CorpusStats, fragments, query_terms, shortest, terms

FIRST_CHUNK = 48
MAX_CHUNK = 4096
# BM25's average document length, estimated from characters: exact term counts would need
# every body tokenised. Both paths are handed the same CorpusStats, so ranking is
# identical; the estimate only shifts BM25's length normalisation slightly.
CHARS_PER_TERM = 8.0
# ... over this many of the member's most recently referenced gated rows: an average over
# all of them costs a scan of every row (12 ms at 10k rows), a sample of 256 an index walk.
LENGTH_SAMPLE = 256
# Slack on the BM25 share bound: the bound is exact in real numbers, this covers float
# rounding in the score it bounds.
_BOUND_SLACK = 1e-9

# The best the three non-semantic terms can do for a row with a given anchor: the most
# references and the best origin.
_BEST_REFERENCES = recall.REFERENCE_COUNT_SATURATION
_BEST_ORIGIN = Origin.USER_STATED

# The SQL below is assembled only from fixed fragments, column names and ints; every value
# is a bound parameter (hence the S608 marks).
_TABLE = MemoryEntry._meta.db_table
_EMBEDDINGS = MemoryEmbedding._meta.db_table
_COLUMNS = (
    "entry_id, revision_id, scope_kind, scope_key, category, body, subject, origin, "
    "lifecycle, suppression_reason, suppression_started_at, suppression_ends_at, "
    "suppression_notes, actor_handle, relationship_note, sensitive_interaction, "
    "provenance_chain, reference_count, last_referenced_at, created_at, updated_at, revision, "
    "supersedes, consents"
)
_ANCHOR = "COALESCE(last_referenced_at, updated_at)"
_ORDER = f"{_ANCHOR} DESC, entry_id"
# On PostgreSQL the moments come over as text: Django's timestamptz loader is Python and
# cost ~9 us a value (about 2 ms of every 57-row round), `datetime.fromisoformat` 0.3 us.
_PG_COLUMNS = (
    "entry_id::text, revision_id, scope_kind, scope_key, category, body, subject, origin, "
    "lifecycle, suppression_reason, suppression_started_at::text, suppression_ends_at::text, "
    "suppression_notes, actor_handle, relationship_note, sensitive_interaction, "
    "provenance_chain, reference_count, last_referenced_at::text, created_at::text, "
    "updated_at::text, revision, supersedes::text, consents"
)
# Column positions in a fetched row (`_COLUMNS`, then the anchor and the stream tag).
_ANCHOR_AT = 24
_STREAM_AT = 25
_VECTOR_AT = 26  # with the hybrid ranker on PostgreSQL (`_statement`'s `vectors_of`)
_WHOLE = -1  # rows fetched as a set (lexical matches, non-ASCII bodies)
_CLOSURE = -2  # rows fetched by the cluster closure


@dataclass
class FastRecall:
    result: recall.RecallResult
    examined: int  # rows handed over by the database
    rounds: int  # bound checks
    corpus: CorpusStats | None = None
    revision_of: dict[str, uuid.UUID] = field(default_factory=dict)
    request: recall.RecallRequest | None = None  # the request resolved, when it was completed


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
    that `member` belongs to `request.tenant_id`). The ORM twin of `_gates_sql`, for
    tests and reports."""
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


def _gates_sql(
    request: recall.RecallRequest, *, member: Any, adapter_scopes: Sequence[str] | None
) -> tuple[str, list[Any]] | None:
    """`base_rows` as a WHERE clause and its parameters; None when no row can pass.

    `is_current AND lifecycle = 'active'` is spelled out, not bound, so the planner can
    match the recall indexes' partial predicate.
    """
    if request.crisis_frame and not request.safety_critical_context:
        return None
    ops = connection.ops
    postgres = connection.vendor == "postgresql"
    keys = sorted(recall.reachable_scope_keys(request))
    tenant = uuid.UUID(str(request.tenant_id))
    sql = [
        "tenant_id = %s AND member_id = %s AND is_current AND lifecycle = 'active'",
        _one_of("scope_key", len(keys)),
        "(suppression_reason IS NULL OR (suppression_ends_at IS NOT NULL "
        "AND suppression_ends_at <= %s))",
    ]
    params: list[Any] = [
        tenant if postgres else tenant.hex,
        member.pk,
        *([keys] if postgres else keys),
        ops.adapt_datetimefield_value(request.now),
    ]
    if adapter_scopes is not None:
        scopes = sorted(adapter_scopes)
        if not scopes:
            return None
        sql.append(_one_of("adapter_scope", len(scopes)))
        params += [scopes] if postgres else scopes
    if request.crisis_frame:
        sql.append("category = %s")
        params.append(Category.SAFETY.value)
    return " AND ".join(sql), params


def inactive_drops(
    request: recall.RecallRequest, *, member: Any, adapter_scopes: Sequence[str] | None
) -> dict[str, int]:
    """What `resolve` would count, by reason, for the member's current rows in the
    reachable scope keys that are not active (paused, archived, forgotten...): rows no fast
    path reads, counted in one grouped statement (caller has checked that `member`
    belongs to the request's tenant). Each group's reason is the pipeline's own verdict
    (`recall.reachable_drop_reason`), so the gates' order holds here as in `resolve`."""
    statement = inactive_drops_sql(request, member=member, adapter_scopes=adapter_scopes)
    if statement is None:
        return {}
    return inactive_drops_of(request, _fetch(*statement))


def inactive_drops_sql(
    request: recall.RecallRequest, *, member: Any, adapter_scopes: Sequence[str] | None
) -> tuple[str, list[Any]] | None:
    """`inactive_drops`' statement (None: no row can be reachable), for a caller that asks
    it within another; its rows are (safety category, suppression reason, suppression
    still on, lifecycle, count), for `inactive_drops_of`."""
    postgres = connection.vendor == "postgresql"
    keys = sorted(recall.reachable_scope_keys(request))
    tenant = uuid.UUID(str(request.tenant_id))
    now = connection.ops.adapt_datetimefield_value(request.now)
    sql = (
        f"SELECT category = %s AS safety, suppression_reason, (suppression_ends_at IS NULL "  # noqa: S608
        "OR suppression_ends_at > %s) AS suppressed, lifecycle, COUNT(*) AS n "
        f"FROM {_TABLE} WHERE tenant_id = %s AND member_id = %s AND is_current "
        f"AND lifecycle <> 'active' AND {_one_of('scope_key', len(keys))}"
    )
    params: list[Any] = [
        Category.SAFETY.value,
        now,
        tenant if postgres else tenant.hex,
        member.pk,
        *([keys] if postgres else keys),
    ]
    if adapter_scopes is not None:
        scopes = sorted(adapter_scopes)
        if not scopes:
            return None
        sql += f" AND {_one_of('adapter_scope', len(scopes))}"
        params += [scopes] if postgres else scopes
    return sql + " GROUP BY 1, 2, 3, 4", params


def inactive_drops_of(
    request: recall.RecallRequest, rows: Iterable[Sequence[Any]]
) -> dict[str, int]:
    """`inactive_drops_sql`'s rows, counted by the pipeline's reason."""
    reason_of = recall.reachable_drop_reason(request)
    counts: dict[str, int] = {}
    for safety, reason, on, lifecycle, n in rows:
        category = Category.SAFETY.value if safety else Category.PREFERENCE.value
        # Sensitive categories never decide here: a row that is not active is dropped by
        # the crisis frame, its suppression or its lifecycle first.
        dropped = reason_of(category, reason or None, bool(on), lifecycle, False)
        assert dropped is not None  # a row that is not active never passes
        counts[dropped] = counts.get(dropped, 0) + int(n)
    return counts


def _gate_signature(
    request: recall.RecallRequest, adapter_scopes: Sequence[str] | None
) -> tuple[Any, ...]:
    """What `_gates_sql` depends on, but the clock."""
    return (
        connection.alias,
        str(request.tenant_id),
        request.user_id,
        tuple(sorted(recall.reachable_scope_keys(request))),
        None if adapter_scopes is None else tuple(sorted(adapter_scopes)),
        bool(request.crisis_frame),
    )


def _one_of(column: str, count: int) -> str:
    """`column` is one of a list. On PostgreSQL the list is one array parameter: the gates
    recur in every arm, and a statement of more than 50 parameters is parsed afresh by
    psycopg each time (its cache's limit) and its text varies with the list's length."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)"
    return f"{column} IN ({', '.join(['%s'] * count)})"


def query_fragments(query: str, ranker_name: str = "jaccard") -> list[str]:
    """Substrings that every ASCII body word matching the query must contain.

    Jaccard tokens are case-folded words; a BM25 term is a word's stem, which is a prefix
    of the word except that "-ies"/"-ied" become "y": dropping a final "y" covers that.
    """
    frags = set(recall.tokens(query)) if ranker_name not in ("lexical", "hybrid") else set()
    if ranker_name != "jaccard":
        frags.update(fragments(query_terms(query)))
    return shortest(frags)


def _non_ascii_sql() -> str:
    if connection.vendor == "postgresql":
        return "octet_length(body) <> char_length(body)"
    return "length(CAST(body AS BLOB)) <> length(body)"


def _match_sql(query: str, ranker_name: str) -> tuple[str, list[Any]] | None:
    """Rows that may share a word with `query` (a Jaccard token for `jaccard`, a BM25 term
    otherwise): LIKE `%fragment%` for ASCII bodies, and every non-ASCII body, because
    Unicode case folding and NFKC can make words meet that LIKE would miss."""
    frags = query_fragments(query, ranker_name)
    if not frags:
        return None
    like = "body ILIKE %s" if connection.vendor == "postgresql" else "body LIKE %s"
    sql = "(" + " OR ".join([like] * len(frags)) + f" OR {_non_ascii_sql()})"
    return sql, [f"%{f}%" for f in frags]


def _term_key(member: Any, term: str) -> str:
    # A key of `MemoryEntry.recall_terms` (see `memory.models.recall_term_keys`).
    return f"{member.pk}:{term}"


# The expression of the GIN index `memory_recall_terms` (migration 0004).
_TERM_SQL = "string_to_array(recall_terms, ' ') @> ARRAY[%s]::text[]"
# Rows holding any of a list of keys (Jaccard's query tokens and the non-ASCII key).
_ANY_KEY_SQL = "string_to_array(recall_terms, ' ') && %s::text[]"
_INDEXED_ARMS = (_TERM_SQL, _ANY_KEY_SQL)
# The same rows, tested row by row while walking the recency index (the keys hold no
# spaces, so " key " occurs in " keys " exactly when key is one of them). For a term most
# of a member's rows hold, the index above hands over every one of them to be sorted for
# each chunk (8 ms a round at 10k); the walk reads about chunk / density rows.
_TERM_WALK_SQL = "strpos(' ' || recall_terms || ' ', %s) > 0"
# The rows that index holds (its predicate); the gates test them again.
_TERM_INDEXED = "is_current AND lifecycle = 'active'"


def _bound(anchor: datetime, now: datetime, semantic_bound: float, briefing: bool) -> float:
    """The best score any row whose anchor is at or before `anchor`, and whose semantic
    value is at most `semantic_bound`, can reach."""
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
    return recall.score(probe, now, semantic_bound, briefing=briefing)


def _cap(request: recall.RecallRequest) -> int:
    budget = recall.BUDGETS[recall.RecallSurface(request.surface)].max_entries
    return budget if request.limit is None else min(budget, request.limit)


# --------------------------------------------------------------------------------------
# Rows straight into Candidates


class _Decoder:
    """Raw database values to what `candidate_of` would build from a model instance."""

    def __init__(self, *, tenant_id: str, user_id: str) -> None:
        self.tenant_id = tenant_id
        self.user_id = user_id
        self.postgres = connection.vendor == "postgresql"
        # SQLite hands datetimes over as text; its backend's converter makes them aware.
        self._datetime = getattr(connection.ops, "convert_datetimefield_value", None)

    def entry_id(self, value: Any) -> str:
        # PostgreSQL sends the entry id as text (`_PG_COLUMNS`), already in `str(UUID)`
        # form; SQLite keeps 32 hex digits.
        return value if self.postgres else str(self.uuid(value))

    def uuid(self, value: Any) -> uuid.UUID:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(value)

    def moment(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if self.postgres:
            return datetime.fromisoformat(value)
        if self._datetime is None:
            return value
        return self._datetime(value, None, connection)

    def required_moment(self, value: Any) -> datetime:
        """`moment` of a column that is never NULL (or, as suppression's start, never NULL
        where it is read: the `memory_suppression_whole` constraint)."""
        moment = self.moment(value)
        assert moment is not None
        return moment

    def candidate(self, row: Sequence[Any]) -> recall.Candidate:
        moment = self.moment
        required_moment = self.required_moment
        raw_chain = row[16]
        links = () if raw_chain in ("[]", []) else _chain(raw_chain)
        suppression = None
        if row[9]:
            suppression = recall.Suppression(
                reason=row[9],
                started_at=required_moment(row[10]),
                ends_at=moment(row[11]),
                notes=row[12],
            )
        multi_actor = None
        if row[13] is not None:
            multi_actor = recall.MultiActor(
                actor_handle=row[13], relationship_note=row[14], sensitive_interaction=bool(row[15])
            )
        origin = row[7]
        return recall.Candidate(
            entry_id=self.entry_id(row[0]),
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            scope_kind=row[2],
            scope_key=row[3],
            category=row[4],
            body=row[5],
            subject=row[6] or None,
            origin=origin,
            lifecycle=row[8],
            suppression=suppression,
            multi_actor=multi_actor,
            provenance_chain=links,
            reference_count=row[17],
            last_referenced_at=moment(row[18]),
            created_at=required_moment(row[19]),
            updated_at=required_moment(row[20]),
            revision=row[21],
            external=recall.is_external(origin, links),
            revision_id=str(self.uuid(row[1])),
            supersedes=None if row[22] is None else str(self.uuid(row[22])),
            consents=() if row[23] in ("[]", []) else _consents(row[23]),
        )


def _chain(raw: Any) -> tuple[recall.ProvenanceLink, ...]:
    links = json.loads(raw) if isinstance(raw, str) else raw
    return tuple(
        recall.ProvenanceLink(
            kind=link["kind"],
            ref=link["ref"],
            captured_at=datetime.fromisoformat(link["capturedAt"]),
        )
        for link in links
    )


def _consents(raw: Any) -> tuple[recall.ConsentRecord, ...]:
    return recall.consent_records(json.loads(raw) if isinstance(raw, str) else raw)


# --------------------------------------------------------------------------------------
# Streams: the member's gated rows in recency order, all of them or those holding a term


@dataclass
class _Stream:
    tag: int
    where: str  # "" for every gated row
    params: list[Any]
    chunk: int
    key: str = ""  # a term stream's key (`_term_key`)
    weight: float = 0.0  # the term's share of the query's BM25 supremum
    rows: int = 0  # how many gated rows the stream holds (the term's df)
    after: tuple[Any, Any] | None = None  # raw (anchor, entry_id) of the last row read
    anchor: datetime | None = None
    exhausted: bool = False


def _selected() -> str:
    """The columns, the anchor and (on PostgreSQL) the moments as text."""
    if connection.vendor == "postgresql":
        return f"{_PG_COLUMNS}, ({_ANCHOR})::text AS anchor"
    return f"{_COLUMNS}, {_ANCHOR} AS anchor"


def _arm(
    gates: str,
    tag: int,
    where: str,
    limit: int | None,
    after: tuple[Any, Any] | None,
    extra: str = "",
) -> str:
    source = _TABLE
    if where in _INDEXED_ARMS:
        # A term key names its member, which the planner cannot know: it multiplies the
        # member's and the term's selectivities, expects a few dozen rows and filters the
        # whole member instead of asking the term index. The fence makes it ask the index.
        source = f"(SELECT * FROM {_TABLE} WHERE {where} AND {_TERM_INDEXED} OFFSET 0) AS term_rows"  # noqa: S608
        where = ""
    sql = f"SELECT {_selected()}, {int(tag)} AS stream FROM {source}"  # noqa: S608
    sql += f" WHERE {gates}"
    if where:
        sql += f" AND {where}"
    if extra:
        sql += f" AND {extra}"
    if after is not None:
        # The anchor read back is text on PostgreSQL: say what it is.
        at = "%s::timestamptz" if connection.vendor == "postgresql" else "%s"
        # "After (a, id)" in (anchor desc, entry id) order, spelled so that `anchor <= a` is
        # a range on the recency index: a continued stream walks that index from where it
        # stopped instead of sorting every gated row again (16 ms of a 10k round).
        sql += f" AND {_ANCHOR} <= {at} AND ({_ANCHOR} < {at} OR entry_id > %s)"
    if limit is not None:
        sql += f" ORDER BY {_ORDER} LIMIT %s"
    return sql


# An arm of `_statement`: stream tag, index condition and its parameters, chunk (None: all),
# the raw (anchor, entry id) to read on after, and an extra condition with its parameters.
_ArmSpec = tuple[
    int, str, list[Any], int | None, tuple[Any, Any] | None, tuple[str, list[Any]] | None
]


def _statement(
    gates: tuple[str, list[Any]],
    arms: list[_ArmSpec],
    vectors_of: uuid.UUID | None = None,
) -> tuple[str, list[Any]]:
    """One round trip: the arms, plus the cluster closure of everything they return, and
    with `vectors_of` (the tenant) each row's stored embedding, if it has one.

    Dedupe keeps the most recent row of a (category, actor, subject) cluster whatever its
    score, so an unseen row could knock a fetched one out: every gated row sharing
    (category, subject) with a fetched row and at least as recent is fetched with it. That
    is a superset of what can change a winner (only rows at least as recent as the newest
    surviving row of the cluster can), so the pipeline's dedupe sees every row it must.
    """
    gate_sql, gate_params = gates
    parts: list[str] = []
    params: list[Any] = []
    for i, (tag, where, where_params, limit, after, also) in enumerate(arms):
        extra, extra_params = also or ("", [])
        arm = _arm(gate_sql, tag, where, limit, after, extra)
        parts.append(f"SELECT * FROM ({arm}) AS arm{i}")  # noqa: S608
        # A fenced term arm names the term before the gates (see `_arm`).
        params += (
            [*where_params, *gate_params]
            if where in _INDEXED_ARMS
            else [*gate_params, *where_params]
        )
        params += extra_params
        if after is not None:
            params += [after[0], after[0], after[1]]
        if limit is not None:
            params.append(int(limit))
    # `picked` holds the moments as text on PostgreSQL (`_selected`).
    since = "updated_at::timestamptz" if connection.vendor == "postgresql" else "updated_at"
    pairs = (
        f"(SELECT category AS pc, subject AS ps, MIN({since}) AS since FROM picked "  # noqa: S608
        "WHERE subject <> '' GROUP BY category, subject) AS pairs"
    )
    closure = f"SELECT {_selected()}, {_CLOSURE} AS stream FROM {_TABLE}"  # noqa: S608
    match = "category = pairs.pc AND subject = pairs.ps AND updated_at >= pairs.since"
    if connection.vendor == "postgresql":
        # LATERAL: one probe of memory_conflict_lookup per pair, never a member scan. OFFSET 0
        # keeps the planner from flattening it into a hash join over the member's rows.
        lateral = f"LATERAL ({closure} WHERE {gate_sql} AND {match} OFFSET 0) AS g"  # noqa: S608
        closure = f"SELECT g.* FROM {pairs}, {lateral}"  # noqa: S608
    else:
        closure = f"{closure} JOIN {pairs} ON {match} WHERE {gate_sql}"
    rows = f"SELECT * FROM picked UNION ALL {closure}"  # noqa: S608
    if vectors_of is not None:
        # The vectors come with their rows: fetched apart they were four more round trips
        # a recall at 10k (20 ms) and an ORM query of a few hundred ids each. A scalar
        # subquery is one primary-key probe a row; as a join, the planner hashed every
        # vector of the tenant (22 MB, 78 ms) when it misjudged the rows.
        rows = (
            f"SELECT f.*, (SELECT v.vector FROM {_EMBEDDINGS} AS v "  # noqa: S608
            "WHERE v.tenant_id = %s AND v.revision_id = f.revision_id) "
            f"FROM ({rows}) AS f"
        )
        params.append(vectors_of)  # the select list comes before the closure's gates
    params += gate_params
    return f"WITH picked AS ({' UNION ALL '.join(parts)}) {rows}", params  # noqa: S608


def _fetch(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with plainsql.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _stats(
    gates: tuple[str, list[Any]], term_keys: Sequence[str], *, totals: bool = True
) -> tuple[int, float, list[int]]:
    """(gated rows, estimated average length in terms, rows holding each term key); without
    `totals`, only the term counts (the first two are then 0)."""
    gate_sql, gate_params = gates
    parts: list[str] = []
    params: list[Any] = []
    if totals:
        parts += [
            f"(SELECT COUNT(*) FROM {_TABLE} WHERE {gate_sql})",  # noqa: S608
            f"(SELECT AVG(LENGTH(body)) FROM (SELECT body FROM {_TABLE} WHERE {gate_sql} "  # noqa: S608
            f"ORDER BY {_ORDER} LIMIT {LENGTH_SAMPLE}) AS sample)",
        ]
        params += [*gate_params, *gate_params]
    for key in term_keys:
        # Fenced like a term arm (see `_arm`), so the count asks the term index.
        term_rows = (
            f"(SELECT * FROM {_TABLE} WHERE {_TERM_SQL} AND {_TERM_INDEXED} OFFSET 0) AS term_rows"  # noqa: S608
        )
        parts.append(f"(SELECT COUNT(*) FROM {term_rows} WHERE {gate_sql})")  # noqa: S608
        params += [key, *gate_params]
    if not parts:
        return 0, 0.0, []
    row = _fetch("SELECT " + ", ".join(parts), params)[0]
    if not totals:
        return 0, 0.0, [int(n) for n in row]
    chars = float(row[1] or 0.0)
    return int(row[0] or 0), chars / CHARS_PER_TERM, [int(n) for n in row[2:]]


# BM25's collection statistics, held per process for `IRIS_RECALL_STATS_SECONDS`
# (docs/decisions/recall.md): recounting them was the largest statement of a recall beyond
# 1k rows (each query term's rows are visited to apply the gates: 45 ms at 50k). They only
# weigh the lexical score, never decide what may be returned, and both the fast path and
# the reference pipeline rank with the same snapshot. Keyed by everything the gates depend
# on except the clock (a suppression ending meanwhile shows in them within the period).
_STATS_CACHE: dict[tuple[Any, ...], tuple[Any, float]] = {}
STATS_CACHE_MAX = 20_000
_clock = time.monotonic


def _stats_for(
    gates: tuple[str, list[Any]], signature: tuple[Any, ...], term_keys: Sequence[str]
) -> tuple[int, float, list[int]]:
    """`_stats`, answered from the snapshot where it is fresh; one statement for the rest."""
    period = float(settings.IRIS_RECALL_STATS_SECONDS)
    if period <= 0:
        return _stats(gates, term_keys)
    now = _clock()

    def held(key: tuple[Any, ...]) -> Any:
        found = _STATS_CACHE.get(key)
        return found[0] if found is not None and found[1] > now else None

    totals = held((signature,))
    # Read out now: emptying a full snapshot below must not lose what this recall uses.
    known = {k: held((signature, k)) for k in term_keys}
    missing = [k for k, count in known.items() if count is None]
    if totals is not None and not missing:
        return (*totals, [known[k] for k in term_keys])
    n_rows, avg_len, counts = _stats(gates, missing, totals=totals is None)
    if len(_STATS_CACHE) >= STATS_CACHE_MAX:
        _STATS_CACHE.clear()
    until = now + period
    if totals is None:
        totals = (n_rows, avg_len)
        _STATS_CACHE[(signature,)] = (totals, until)
    for key, count in zip(missing, counts, strict=True):
        known[key] = count
        _STATS_CACHE[(signature, key)] = (count, until)
    return (*totals, [known[k] for k in term_keys])


def fast_resolve(request: recall.RecallRequest, *, member: Any, **options: Any) -> FastRecall:
    """`resolve` over just enough of the member's rows to return what it would over all
    (options: `_fast_resolve`).

    On PostgreSQL the reads run in a transaction whose statements reuse generic plans.
    Planning them was about a third of the database's time for a 1k member (1.2-1.5 ms a
    statement: unions of arms over a table of many indexes), and PostgreSQL kept choosing
    fresh plans because a generic one is estimated for an average member. The statements
    pin their shape themselves (the spelled-out partial-index predicates, the fenced term
    arms, LIMITs over the recency index), so a generic plan is the same plan; measured
    equal at 50k (docs/performance.md). `SET LOCAL` ends with the transaction, so it is
    used only when the transaction is this call's own: nothing else plans differently.
    """
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return _fast_resolve(request, member=member, **options)
    with transaction.atomic():
        with plainsql.cursor() as cursor:
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        return _fast_resolve(request, member=member, **options)


def _fast_resolve(
    request: recall.RecallRequest,
    *,
    member: Any,
    adapter_scopes: Sequence[str] | None = None,
    ranker_name: str = "jaccard",
    prepare: Any = None,
    encoder: Any = None,
    first_chunk: int | None = None,
) -> FastRecall:
    """`prepare(query, candidates, corpus=, vectors=)` is the ranker (`semantic_for`); None
    means Jaccard."""
    effective = ranker_name if prepare is not None else "jaccard"
    bm25 = effective in ("lexical", "hybrid")
    floor = semantic.relevance_floor(effective)
    briefing = recall.is_briefing(request.query)
    gates = _gates_sql(request, member=member, adapter_scopes=adapter_scopes)
    if gates is None:
        return FastRecall(
            result=recall.resolve([], request, relevance_floor=floor),
            examined=0,
            rounds=1,
            corpus=CorpusStats(0, 0.0, {}) if bm25 else None,
        )

    decoder = _Decoder(tenant_id=str(request.tenant_id), user_id=str(member.public_id))
    fetched: dict[str, recall.Candidate] = {}
    revision_of: dict[str, uuid.UUID] = {}
    examined = 0
    everything = _Stream(tag=0, where="", params=[], chunk=1)
    streams = [everything]
    # Rows fetched as one set in the first round: with the term index, the non-ASCII
    # bodies it does not hold; without it, every row that may share a word with the query.
    whole: tuple[str, list[Any]] | None = None
    qterms = query_terms(request.query) if bm25 else ()
    by_terms = bm25 and connection.vendor == "postgresql"

    corpus: CorpusStats | None = None
    df: dict[str, int] = {}
    n_rows = 0
    avg_len = 0.0
    if by_terms:
        keys = [_term_key(member, t) for t in qterms]
        n_rows, avg_len, counts = _stats_for(gates, _gate_signature(request, adapter_scopes), keys)
        df = {t: n for t, n in zip(qterms, counts, strict=True) if n}
        if qterms:
            # The non-ASCII bodies, which the index keys as "<member>:" (migration 0004).
            whole = (_TERM_SQL, [_term_key(member, "")])
        for i, (t, key) in enumerate(zip(qterms, keys, strict=True)):
            if df.get(t):
                streams.append(
                    _Stream(tag=i + 1, where=_TERM_SQL, params=[key], chunk=1, key=key, rows=df[t])
                )
    elif effective == "jaccard" and connection.vendor == "postgresql":
        # Every row sharing a Jaccard token with the query, from the term index (which
        # also keys the tokens, migration 0006), plus the non-ASCII bodies.
        qtokens = recall.tokens(request.query)
        if qtokens:
            token_keys = [_term_key(member, "")]
            token_keys += [_term_key(member, JACCARD_MARK + t) for t in sorted(qtokens)]
            whole = (_ANY_KEY_SQL, [token_keys])
    else:
        whole = _match_sql(request.query, effective)
        if bm25:
            n_rows, avg_len, _ = _stats_for(gates, _gate_signature(request, adapter_scopes), ())
    if first_chunk is not None:
        chunk = max(1, first_chunk)
    else:
        chunk = _first_chunk(n_rows, effective) if by_terms else FIRST_CHUNK
    for s in streams:
        s.chunk = chunk
    if first_chunk is None and by_terms:
        factor = (
            HYBRID_ALL_ROWS_FIRST_CHUNK_FACTOR
            if effective == "hybrid"
            else ALL_ROWS_FIRST_CHUNK_FACTOR
        )
        everything.chunk = factor * chunk

    # Stored embeddings by entry id: on PostgreSQL they come with their rows.
    vectors: dict[str, bytes] = {}
    tenant = uuid.UUID(str(request.tenant_id))
    inline_vectors = effective == "hybrid" and connection.vendor == "postgresql"

    def take(rows: list[tuple[Any, ...]]) -> list[recall.Candidate]:
        nonlocal examined
        examined += len(rows)
        fresh: list[recall.Candidate] = []
        for row in rows:
            key = decoder.entry_id(row[0])
            if key not in fetched:
                c = decoder.candidate(row)
                fetched[key] = c
                revision_of[key] = decoder.uuid(row[1])
                if inline_vectors and row[_VECTOR_AT] is not None:
                    vectors[key] = bytes(row[_VECTOR_AT])
                fresh.append(c)
        return fresh

    def advance(stream: _Stream, rows: list[tuple[Any, ...]]) -> None:
        mine = [r for r in rows if r[_STREAM_AT] == stream.tag]
        if len(mine) < stream.chunk:
            stream.exhausted = True
        if mine:
            # The arm's order is anchor descending, then entry id: its last row is the
            # least in that order (UNION ALL does not promise to keep the arm's order).
            anchors = [decoder.required_moment(r[_ANCHOR_AT]) for r in mine]
            oldest = min(anchors)
            least = max(
                (r for r, a in zip(mine, anchors, strict=True) if a == oldest), key=lambda r: r[0]
            )
            # The raw value goes back as the next round's bound.
            stream.after = (least[_ANCHOR_AT], least[0])
            stream.anchor = oldest
        stream.chunk = min(stream.chunk * 2, MAX_CHUNK)

    def vectors_for(fresh: list[recall.Candidate]) -> dict[str, Any]:
        if not inline_vectors:
            by_revision = {revision_of[c.entry_id]: c.entry_id for c in fresh}
            for rev, blob in MemoryEmbedding.objects.filter(
                tenant_id=tenant, revision_id__in=list(by_revision)
            ).values_list("revision_id", "vector"):
                vectors[by_revision[rev]] = bytes(blob)
        return {c.entry_id: vectors[c.entry_id] for c in fresh if c.entry_id in vectors}

    prepared = SemanticValues(
        request.query,
        ranker_name=ranker_name,
        prepare=prepare,
        encoder=encoder,
        vectors_for=vectors_for,
    )

    cap = _cap(request)
    nonmatch = nonmatch_semantic_bound(effective)
    # Every term stream starts in the first round: until a term's stream has started, an
    # unseen row may hold it, and the bound almost never lets the scan stop without them
    # (a second round trip and pass of `resolve` on most recalls). A first chunk is cheap
    # either way: a common term's walks the recency index (`_choose_access`), a rare
    # term's reads its few rows from the term index.
    grow: list[_Stream] = list(streams)
    rounds = 0
    # Once the k-th score is known, streams read on only rows that can still reach it
    # (`_reach_filter`); that needs the term index to say which query words a row holds.
    filters = connection.vendor == "postgresql" and (by_terms or effective == "jaccard")
    beyond: tuple[str, list[Any]] | None = None
    while True:
        arms: list[_ArmSpec] = []
        if rounds == 0 and whole is not None:
            arms.append((_WHOLE, whole[0], whole[1], None, None, None))
        for s in grow:
            if s.key:
                _choose_access(s, n_rows)
            arms.append((s.tag, s.where, s.params, s.chunk, s.after, beyond))
        sql, params = _statement(gates, arms, tenant if inline_vectors else None)
        rows = _fetch(sql, params)
        fresh = take(rows)
        for s in grow:
            advance(s, rows)
        if rounds == 0 and bm25:
            # Document frequencies: the index counted the ASCII bodies; Python counts the
            # rest (without the index, every body that may hold a query term).
            # Every gated row holding a term arrives in this first round (the set arm is a
            # superset of them), so counting over its fresh rows is exact.
            wanted = set(qterms)
            extra: dict[str, int] = {}
            for c in fresh:
                if by_terms and c.body.isascii():
                    continue
                for t in wanted.intersection(terms(c.body)):
                    extra[t] = extra.get(t, 0) + 1
            for t, n in extra.items():
                df[t] = df.get(t, 0) + n
            corpus = CorpusStats(
                document_count=n_rows, average_length=avg_len, document_frequency=df
            )
        rounds += 1
        pool = sorted(fetched.values(), key=lambda c: c.entry_id)
        result = recall.resolve(
            pool, request, semantic=prepared.semantic(pool, corpus), relevance_floor=floor
        )
        if cap == 0 or everything.exhausted:
            # Every gated row has been read (or none may be returned).
            break
        kth: float | None = None
        if len(result.entries) == cap:
            kth = result.entries[-1].score
        elif briefing:
            grow = [everything]
            continue
        # Short of the budget, a question still reads only the streams that may hold a row
        # matching it: a row sharing no word with it cannot be returned under Jaccard or
        # BM25, however recent or used.
        grow = _violated(
            streams, kth, request.now, effective, corpus, qterms, nonmatch, briefing, floor
        )
        if not grow:
            break
        beyond = None
        if filters and kth is not None:
            base, held = _held_keys(member, effective, streams, corpus, qterms, request.query)
            beyond = _reach_filter(
                threshold=kth, now=request.now, base=base, held=held, briefing=briefing
            )
    return FastRecall(
        result=result, examined=examined, rounds=rounds, corpus=corpus, revision_of=revision_of
    )


class SemanticValues:
    """The ranker's value of each row read, prepared once per row however many rounds a
    recall reads: a row's semantic value depends only on (query, row, corpus), never on
    the pool (memory.recall.ranking.semantic). `vectors_for(rows)` gives the stored
    vectors it has, by entry id; a row without one is embedded by the ranker."""

    def __init__(
        self,
        query: str,
        *,
        ranker_name: str,
        prepare: Any,
        encoder: Any,
        vectors_for: Callable[[list[recall.Candidate]], Mapping[str, Any]],
    ) -> None:
        self.query = query
        self.ranker_name = ranker_name
        self.prepare = prepare
        self.encoder = encoder
        self.vectors_for = vectors_for
        self.values: dict[str, float] = {}

    def semantic(
        self, pool: list[recall.Candidate], corpus: CorpusStats | None
    ) -> recall.SemanticFn:
        if self.prepare is None or self.ranker_name == "jaccard":
            return recall.jaccard_semantic
        values = self.values
        fresh = [c for c in pool if c.entry_id not in values]
        if fresh:
            kwargs: dict[str, Any] = {"corpus": corpus}
            if self.ranker_name == "hybrid":
                kwargs["vectors"] = self.vectors_for(fresh)
                if self.encoder is not None:
                    kwargs["encoder"] = self.encoder
            fn = self.prepare(self.query, fresh, **kwargs)
            for c in fresh:
                values[c.entry_id] = fn(self.query, c)

        def cached(query: str, candidate: recall.Candidate) -> float:
            return values[candidate.entry_id]

        return cached


# The all-rows stream bounds every row holding no query word, and its bound falls only with
# recency, so it must reach deeper than a term stream before the scan can stop: at 1k rows
# a first chunk of 24 never let a recall stop after one round, 48 always did (measured in
# docs/performance.md, "Fourth pass").
ALL_ROWS_FIRST_CHUNK_FACTOR = 2
# With the hybrid ranker a row holding no query word may still add up to (1 - w) = 0.5 of
# the semantic weight on its cosine, so that stream's bound falls later still: three times
# a term stream's chunk cut a hybrid recall by 13-18 % at 1k and 10k against two, in
# alternating batches in one process; four and six were slower than three
# (docs/performance.md, "Sixth pass").
HYBRID_ALL_ROWS_FIRST_CHUNK_FACTOR = 3


def _first_chunk(gated_rows: int, ranker_name: str = "lexical") -> int:
    """The first chunk of each stream, from the member's gated rows: a small member's
    recall stops after one small round, a large one's after fewer rounds if the first is
    larger. One row in 200, between 24 and 128: the best of 24, 48, 73, 96 and 128
    measured at 1k, 10k and 50k (docs/performance.md).

    One row in 400 with the hybrid ranker: each of its rows brings a vector, and since
    rounds after the first read only rows that can still reach the k-th score
    (`_reach_filter`), a smaller first round did better at 10k (33.9 ms mean against 38.6
    and 40.8 for one in 200; one in 300 and 600 in between and alike)."""
    per = HYBRID_ROWS_PER_FIRST_CHUNK_ROW if ranker_name == "hybrid" else ROWS_PER_FIRST_CHUNK_ROW
    return max(24, min(128, gated_rows // per))


ROWS_PER_FIRST_CHUNK_ROW = 200
HYBRID_ROWS_PER_FIRST_CHUNK_ROW = 400


def _choose_access(stream: _Stream, gated_rows: int) -> None:
    """Term index or recency walk for a term stream's next chunk.

    The index reads every gated row holding the term (its df); a walk from the top reads
    about chunk / density = chunk * gated rows / df of them when the term is spread evenly
    over time. Only a stream's first chunk walks: further down, the rows recall has just
    referenced (which hold the words recalls ask for) are behind, the term is sparser
    than on average, and continued walks cost more than the index (measured at 50k).
    """
    if stream.after is None and stream.rows * stream.rows > stream.chunk * gated_rows:
        stream.where, stream.params = _TERM_WALK_SQL, [f" {stream.key} "]
    else:
        stream.where, stream.params = _TERM_SQL, [stream.key]


def _started_anchor(stream: _Stream) -> datetime:
    # Only for streams that have read a row, so have an anchor.
    assert stream.anchor is not None
    return stream.anchor


def _violated(
    streams: list[_Stream],
    kth: float | None,
    now: datetime,
    ranker_name: str,
    corpus: CorpusStats | None,
    qterms: Sequence[str],
    nonmatch: float,
    briefing: bool,
    floor: float,
) -> list[_Stream]:
    """The streams to read further, none when no unseen row can reach the k-th score
    (`kth`; None while fewer than the budget are held: any row that may be returned).

    An unseen row comes after the last row read from the all-rows stream, and after the
    last row read from the stream of every started term it holds (anchor order); a term
    whose stream is exhausted is held by no unseen row. Its BM25 share is below the sum of
    its terms' weights (`idf / sum(idf)`: each term adds `idf * tf(k1+1)/(tf+norm)`, less
    than `idf * (k1+1)`). Sorting the live term streams by anchor (unstarted ones first,
    as if at the top), the worst term sets are the prefixes; for each prefix whose bound
    is not strictly below the k-th score, the rarest term's stream is read further (the
    all-rows stream for the empty prefix), which pushes the bound down fastest per row.
    For a question, a term set whose semantic value cannot exceed the relevance floor
    needs no reading: its rows are dropped as matching nothing.
    """
    everything = streams[0]
    assert everything.anchor is not None
    live = [s for s in streams[1:] if not s.exhausted]
    for s in live:
        s.weight = _weight(s, corpus, qterms)
    unstarted = sorted((s for s in live if s.anchor is None), key=lambda s: (-s.rows, s.tag))
    started = [s for s in live if s.anchor is not None]
    started.sort(key=_started_anchor, reverse=True)
    live = unstarted + started
    grow: dict[int, _Stream] = {}
    share = 0.0
    anchor = everything.anchor
    for j in range(len(live) + 1):
        if j:
            s = live[j - 1]
            share += s.weight
            if s.anchor is not None and s.anchor < anchor:
                anchor = s.anchor
        if ranker_name == "lexical":
            reach = share
            bound = share + _BOUND_SLACK
        elif ranker_name == "hybrid":
            weight = semantic.HYBRID_LEXICAL_WEIGHT
            reach = weight * share + (1.0 - weight)
            bound = weight * (share + _BOUND_SLACK) + (1.0 - weight)
        else:
            reach = bound = nonmatch
        if not briefing and not reach > floor:
            continue
        if kth is None or _bound(anchor, now, min(bound, 1.0), briefing) >= kth:
            pick = min(live[:j], key=lambda s: (s.rows, s.tag)) if j else everything
            grow[pick.tag] = pick
    return list(grow.values())


def _held_keys(
    member: Any,
    ranker_name: str,
    streams: list[_Stream],
    corpus: CorpusStats | None,
    qterms: Sequence[str],
    query: str,
) -> tuple[float, list[tuple[str, float]]]:
    """`_violated`'s semantic bound, per row: (what a row holding no query key may reach,
    [(term index key, what holding it may add)]). A non-ASCII body may hold any word (the
    index keys it as "<member>:"), so it may reach anything."""
    anything = [(_term_key(member, ""), 1.0)]
    if ranker_name == "jaccard":
        tokens = sorted(recall.tokens(query))
        return 0.0, [*anything, *((_term_key(member, JACCARD_MARK + t), 1.0) for t in tokens)]
    shares = [(s.key, _weight(s, corpus, qterms)) for s in streams[1:]]
    if ranker_name == "hybrid":
        weight = semantic.HYBRID_LEXICAL_WEIGHT
        base = weight * _BOUND_SLACK + (1.0 - weight)
        return base, [*anything, *((key, weight * share) for key, share in shares)]
    return _BOUND_SLACK, [*anything, *shares]


def _literal(value: float) -> str:
    # A number this module computed, as an SQL float literal (never caller text).
    return f"{float(value)!r}::float8"


def _static_sql() -> str:
    """`recall.score_without_semantic` in SQL; parameters: now, now."""
    origins = " ".join(
        f"WHEN '{origin.value}' THEN {_literal(weight)}"
        for origin, weight in recall.ORIGIN_WEIGHTS.items()
    )
    best = _literal(max(recall.ORIGIN_WEIGHTS.values()))
    # exp() raises on underflow; a row that old scores 0 on recency either way.
    recency = (
        f"CASE WHEN {_ANCHOR} >= %s::timestamptz THEN 1.0::float8 ELSE exp(GREATEST(-700.0, "
        f"-EXTRACT(EPOCH FROM (%s::timestamptz - {_ANCHOR}))::float8 "
        f"* {_literal(recall.RECENCY_RATE)})) END"
    )
    saturation = _literal(recall.REFERENCE_COUNT_SATURATION)
    return (
        f"({_literal(recall.WEIGHTS['recency'])} * ({recency}) "
        f"+ {_literal(recall.WEIGHTS['reference_count'])} "
        f"* LEAST(1.0::float8, GREATEST(reference_count, 0)::float8 / {saturation}) "
        f"+ {_literal(recall.WEIGHTS['origin'])} * (CASE origin {origins} ELSE {best} END))"
    )


# Scores are rounded to 6 places; the filter keeps rows this far under the k-th score too,
# which covers that and float noise between SQL and Python.
_REACH_MARGIN = 1e-5


def _reach_filter(
    *,
    threshold: float,
    now: datetime,
    base: float,
    held: Sequence[tuple[str, float]],
    briefing: bool = False,
) -> tuple[str, list[Any]] | None:
    """A condition every row that can still score `threshold` (the k-th score so far)
    meets: recency, references and origin exact, the semantic term at most `base` plus `c`
    for each (key, c) in `held` whose key the row's `recall_terms` holds (at most 1), and
    an anchor no older than the best such row could have.

    A stream read on under it hands over only rows that can still reach the top k, and
    stops where they stop: the rows it passes over cannot beat the k-th score now, nor
    later (the k-th score only rises as rows are added, since the cluster closure already
    holds every row that could knock a fetched one out). So the stream's position and
    "exhausted" keep their meaning for `_violated`. None when the anchor is unbounded (an
    open walk could read every row of the member): the stream then reads on unfiltered.
    """
    cut = threshold - _REACH_MARGIN
    best = min(1.0, base + sum(c for _, c in held))
    rest = cut - _bound(datetime.min.replace(tzinfo=now.tzinfo), now, best, briefing)
    if rest <= 0.0:
        return None
    # For a question the recency term is scaled by the semantic value (`recall.score`).
    weight = recall.WEIGHTS["recency"] * (1.0 if briefing else best * recall.QUESTION_SLOPE)
    # The oldest anchor that can still make it, a second early: read a row more, never fewer.
    age = -math.log(rest / weight) / recall.RECENCY_RATE if rest < weight else 0.0
    floor = now - timedelta(seconds=age + 1.0)
    # The per-query numbers are parameters, so the text repeats from one recall to the
    # next and PostgreSQL plans it once (as literals, every round 2 was planned afresh).
    holds = (
        " + (CASE WHEN strpos(' ' || recall_terms || ' ', %s) > 0 THEN %s::float8 "
        "ELSE 0.0::float8 END)"
    ) * len(held)
    shares = [value for key, c in held for value in (f" {key} ", c)]
    semantic_sql = f"LEAST(1.0::float8, %s::float8{holds})"
    if briefing:
        sql = (
            f"{_ANCHOR} >= %s::timestamptz AND {_static_sql()} "
            f"+ {_literal(recall.WEIGHTS['semantic'])} * {semantic_sql} >= %s::float8"
        )
        return sql, [floor, now, now, base, *shares, cut]
    # `recall.score` for a question: the semantic value times its factor.
    sql = (
        f"{_ANCHOR} >= %s::timestamptz AND {semantic_sql} "
        f"* ({_literal(recall.QUESTION_BASE)} + {_literal(recall.QUESTION_SLOPE)} "
        f"* {_static_sql()}) >= %s::float8"
    )
    return sql, [floor, base, *shares, now, now, cut]


def _weight(stream: _Stream, corpus: CorpusStats | None, qterms: Sequence[str]) -> float:
    if corpus is None:
        return 1.0
    total = sum(corpus.idf(t) for t in qterms)
    return corpus.idf(qterms[stream.tag - 1]) / total if total > 0.0 else 1.0


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
    effective = ranker_name if prepare is not None else "jaccard"
    return recall.resolve(
        candidates, request, semantic=fn, relevance_floor=semantic.relevance_floor(effective)
    )
