"""Recall from a member snapshot: rank in worker memory, read only the few best rows.

The fast path of `memory.recall.db` streams a member's rows out of PostgreSQL in recency
order until no unread row can reach the k-th score. At 1k rows its reads were half of a
recall, at 10k two thirds. Here each worker keeps, per member, what ranking needs about
every live row (is current and active): scope, adapter scope, category, conflict cluster,
suppression end, anchor time, reference count, origin, the body's BM25 terms or Jaccard
tokens and length, and with the hybrid ranker the stored embedding. Never the body.

A recall then:

1. brings the snapshot up to date in one round trip: the revisions the change log
   (migration 0008) noted since the last look, re-read row by row;
2. applies the database's gates (the same as `recall_db._gates_sql`) and scores every
   gated row at once with numpy: the three static terms exactly, the semantic term exactly
   (BM25 over the snapshot's terms with the member's exact statistics) or, for a row
   without a stored vector, bounded by 1;
3. reads the best rows, and every row that could win their conflict cluster, back from
   the table through the same gates (`revision_id = ANY(...)`), and runs `recall.resolve`
   on them, as the streaming fast path does;
4. stops when every unread row scores below the k-th returned score (less a margin for
   rounding), else reads on; with a question, a row whose semantic value cannot exceed the
   ranker's relevance floor is never read (it could not be returned);
5. counts the envelope over every reachable row (`Snapshot.census`, plus the rows not
   active, counted by `recall_db.inactive_drops`), as `resolve` would over all of them.

The database stays the last gate: a row is only ever returned as the table holds it when
it is read back, so a snapshot that is behind can rank wrongly until its next look, never
return a forgotten, paused or suppressed memory. Snapshots are rebuilt after
`IRIS_RECALL_SNAPSHOT_SECONDS` and dropped when unused for as long; the least recently used
are dropped beyond `IRIS_RECALL_SNAPSHOT_ROWS` rows per worker. A row that leaves the live
set leaves the snapshot at the next look, with its terms.

Only on PostgreSQL and outside a transaction: a snapshot built from rows a transaction
has not committed could outlive a rollback. `resolve_once` builds a throwaway one anywhere
(tests).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import numpy.ma  # noqa: F401  (np.union1d imports it on first use: here, not in a request)
from django.conf import settings
from django.db import connection

from consent.enums import Category
from governance import after_response, plainsql
from memory.models import WORDS_SPLIT, recall_words
from memory.recall import db as recall_db
from memory.recall import pipeline as recall
from memory.recall.models import MemoryEmbedding
from memory.recall.ranking import embedding, semantic
from memory.rules.lexical import CorpusStats, query_terms

if TYPE_CHECKING:
    from django.db.backends.sqlite3.operations import DatabaseOperations as SQLiteOperations

logger = logging.getLogger(__name__)

_TABLE = recall_db._TABLE
_CHANGES = "memory_recallchange"
# Rows read back in the first round beyond the budget: room for rows the pipeline's own
# gates drop (sensitive categories without consent or context). More rounds follow when
# that is not enough; each row read costs its decoding (docs/decisions/recall.md).
FIRST_READ_SPARE = 4
# Scores are rounded to 6 places; rows this close under the k-th score are read too.
_MARGIN = 1e-5
_INF = float("inf")
_ORIGIN = {str(origin): weight for origin, weight in recall.ORIGIN_WEIGHTS.items()}
_BEST_ORIGIN = max(recall.ORIGIN_WEIGHTS.values())

# What a snapshot row is built from. Moments as epoch seconds (PostgreSQL) or as stored
# (SQLite); the words and vector are read only for revisions the snapshot has not seen.
_LIGHT = (
    "{p}revision_id, {p}entry_id, {p}is_current AND {p}lifecycle = 'active', {p}scope_key, "
    "{p}adapter_scope, {p}category, {p}subject, {p}origin, {p}suppression_reason, "
    "{ends}, {p}reference_count, {anchor}, {updated}, {p}actor_handle, {p}sensitive_interaction"
)
# Where `_rows_sql` puts, after the `_light` columns, the stored `recall_words`, the body
# where no words are stored, and the stored vector.
_WORDS_AT = 15
_NO_SLOTS = np.zeros(0, dtype=np.int64)
# The per-row codes the gates and dedupe read (all of them; usage is in `floats`).
_GATE_INTS = ("scope", "adapter", "category", "cluster", "reason", "sensitive")
# How many reaches a snapshot keeps (one per set of scopes asked: a session each), and
# dedupe answers per reach, so a member asking from many sessions between two writes does
# not grow them without end.
_GATE_MEMO_MAX = 64
_NO_POSTING = (_NO_SLOTS, np.zeros(0))


def _light(prefix: str = "") -> str:
    columns = {
        "ends": f"{prefix}suppression_ends_at",
        "anchor": f"COALESCE({prefix}last_referenced_at, {prefix}updated_at)",
        "updated": f"{prefix}updated_at",
    }
    if connection.vendor == "postgresql":
        columns = {k: f"EXTRACT(EPOCH FROM {v})::float8" for k, v in columns.items()}
    return _LIGHT.format(p=prefix, **columns)


def _seconds(value: Any) -> float | None:
    """A moment as epoch seconds: PostgreSQL sends them so, SQLite sends stored text."""
    if value is None or isinstance(value, float):
        return value
    # Not a float, so SQLite's stored text: only SQLite's operations are asked to convert it.
    ops = cast("SQLiteOperations", connection.ops)
    moment = ops.convert_datetimefield_value(value, None, connection)
    assert moment is not None  # converted from a value that is not None
    return moment.timestamp()


class Reach:
    """The rows one set of scopes reaches (`mask`, by slot, read-only), and what the census
    worked out over them: the grouping, valid for any moment in `window` [from, to), and
    the dedupe answer of each pattern of passing groups. The snapshot keeps it until a
    row's gate facts change; a usage bump changes none."""

    __slots__ = ("grouped", "mask", "window", "winners")

    def __init__(self, mask: np.ndarray) -> None:
        mask.flags.writeable = False
        self.mask = mask
        self.window = (_INF, -_INF)  # holds no moment: nothing grouped yet
        self.grouped: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None = None
        self.winners: dict[bytes, tuple[np.ndarray, int]] = {}


class MemberRef(NamedTuple):
    """What a snapshot needs of a member (a `User` has both), without loading one."""

    pk: int
    tenant_id: uuid.UUID


class _Codes(dict[str, int]):
    """Small integer codes for repeated strings (scope keys, categories, clusters)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def of(self, value: str) -> int:
        code = self.get(value)
        if code is None:
            code = self[value] = len(self)
            self.names.append(value)
        return code


class Snapshot:
    """One member's live rows, by slot. Slots are never reused: a row that leaves is
    marked dead and its data dropped; `_compact` rebuilds when half the slots are dead."""

    def __init__(self, ranker_name: str) -> None:
        self.ranker_name = ranker_name
        self.lexical = ranker_name in ("lexical", "hybrid")
        self.hybrid = ranker_name == "hybrid"
        # Which writers the last look could not see (xid8s as text): those still running
        # then, and every one from `unseen_from` on. Their changes are read at the next.
        self.unseen_from = "0"
        self.unseen: list[str] = []
        # `looked`: when it last read the change log (or was built); the log keeps its
        # notes for at least two lifetimes, so a look within one lifetime misses none.
        self.built = self.used = self.looked = time.monotonic()
        self.codes = _Codes()
        self.slot: dict[uuid.UUID, int] = {}
        self.size = 0
        self.capacity = 0
        self.live = np.zeros(0, dtype=bool)
        # Codes (`codes`), -1 for a row without a conflict subject or suppression; and
        # whether the row records a sensitive interaction with someone else (0 or 1).
        self.ints = {
            k: np.zeros(0, dtype=np.int32)
            for k in ("scope", "adapter", "category", "cluster", "reason", "sensitive")
        }
        # Epoch seconds (`ends`: +inf for a suppression without end, -inf for none), the
        # reference and origin terms before weighting, the body's terms.
        self.floats = {
            k: np.zeros(0) for k in ("ends", "anchor", "updated", "refs", "origin", "length")
        }
        self.vectors = np.zeros((0, embedding.DIMENSION), dtype=np.float32)
        self.has_vector = np.zeros(0, dtype=bool)
        # UUIDs, which order as their text does (fixed-width hex): ties go to the lower.
        self.entry_ids: list[uuid.UUID | None] = []
        self.revisions: list[uuid.UUID | None] = []
        # Each BM25 term's (or Jaccard token's) rows: (slots ascending, counts).
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # Each row's distinct words, so that a row that leaves takes its words along: the
        # rows of the last build or compaction as one index (offsets by slot, word ids,
        # words), the rows added one by one since then by slot.
        self._index: tuple[np.ndarray, np.ndarray, list[str]] = (_NO_SLOTS, _NO_SLOTS, [])
        self._added: dict[int, tuple[str, ...]] = {}
        # (slot, count) of rows added one by one, by word, not yet in `postings`: merged
        # when the word is next looked up, so that a catch-up of many new rows copies each
        # posting once at most, and only for the words a question asks about.
        self._appended: dict[str, list[tuple[int, float]]] = {}
        self.dead = 0
        # `keyed_by_recency`, and each `Reach`, by scope codes, until a fact the gates or
        # dedupe read changes (`_gate_facts`): a usage bump changes none.
        self._keyed_order: np.ndarray | None = None
        self._reaches: dict[tuple[Any, ...], Reach] = {}

    # -- keeping it current ---------------------------------------------------------

    def _grow(self, at_least: int = 0) -> None:
        self._reallocate(max(64, self.capacity * 2, at_least), slice(0, self.size))

    def _reallocate(self, capacity: int, rows: slice | np.ndarray) -> None:
        """Every per-row array at `capacity` rows, holding `rows` of the old ones first."""

        def moved(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity, *a.shape[1:]), dtype=a.dtype)
            kept = a[rows]
            out[: len(kept)] = kept
            return out

        self.live = moved(self.live)
        self.ints = {k: moved(v) for k, v in self.ints.items()}
        self.floats = {k: moved(v) for k, v in self.floats.items()}
        if self.hybrid:
            self.vectors = moved(self.vectors)
        self.has_vector = moved(self.has_vector)
        self.capacity = capacity
        self._forget_gates()

    def _forget_gates(self) -> None:
        self._keyed_order = None
        self._reaches.clear()

    def _gate_facts(self, at: int) -> tuple[Any, ...]:
        """What the gates and dedupe read of the row in slot `at`."""
        ints, floats = self.ints, self.floats
        return (
            bool(self.live[at]),
            *(int(ints[k][at]) for k in _GATE_INTS),
            float(floats["ends"][at]),
            float(floats["updated"][at]),
        )

    def known(self, revision: uuid.UUID) -> bool:
        return revision in self.slot

    def words(self, row: Sequence[Any]) -> str:
        """A `_rows_sql` row's words for this ranker (its stored `recall_words`, or its body
        tokenised where none are stored), space-joined."""
        stored = row[_WORDS_AT]
        if stored is None:
            stored = recall_words(row[_WORDS_AT + 1])
        lexical, _, jaccard = stored.partition(WORDS_SPLIT)
        return lexical if self.lexical else jaccard

    def put(self, light: Sequence[Any], words: str | None = None, vector: Any = None) -> None:
        """Add or update one row from its `_light` columns (and, for a revision not seen
        before, its `words` and stored vector)."""
        revision = light[0]
        revision = revision if isinstance(revision, uuid.UUID) else uuid.UUID(str(revision))
        at = self.slot.get(revision)
        if not light[2]:  # no longer current and active
            if at is not None:
                self.drop(revision)
            return
        added = at is None
        if at is None:
            if words is None:
                raise ValueError("a new revision needs its words")
            if self.size == self.capacity:
                self._grow()
            at = self.size
            self.size += 1
            self.slot[revision] = at
            self.revisions.append(revision)
            entry = light[1]
            self.entry_ids.append(entry if isinstance(entry, uuid.UUID) else uuid.UUID(entry))
            counts = Counter(map(sys.intern, words.split()))
            self._added[at] = tuple(counts)
            for word, n in counts.items():
                self._appended.setdefault(word, []).append((at, float(n)))
            self.floats["length"][at] = sum(counts.values())
            if self.hybrid and vector is not None:
                self.vectors[at] = embedding.from_bytes(bytes(vector))
                self.has_vector[at] = True
        elif self.hybrid and vector is not None and not self.has_vector[at]:
            self.vectors[at] = embedding.from_bytes(bytes(vector))
            self.has_vector[at] = True
        codes = self.codes
        subject = light[6] or ""
        # The pipeline's conflict key: (category, actor handle or "", subject).
        actor = light[13] or ""
        ends = _seconds(light[9])
        facts = (
            True,
            codes.of("s:" + light[3]),
            codes.of("a:" + light[4]),
            codes.of("c:" + light[5]),
            codes.of(f"k:{light[5]}\x00{actor}\x00{subject}") if subject else -1,
            codes.of("r:" + light[8]) if light[8] else -1,
            int(light[13] is not None and bool(light[14])),
            -_INF if not light[8] else (_INF if ends is None else ends),
            _seconds(light[12]),
        )
        # Most changes a catch-up reads are usage bumps, which leave these as they are.
        if added or facts != self._gate_facts(at):
            self.live[at] = True
            for name, value in zip(_GATE_INTS, facts[1:7], strict=True):
                self.ints[name][at] = value
            self.floats["ends"][at], self.floats["updated"][at] = facts[7:]
            self._forget_gates()
        self.floats["refs"][at] = min(1.0, max(0, light[10]) / recall.REFERENCE_COUNT_SATURATION)
        self.floats["origin"][at] = _ORIGIN.get(light[7], _BEST_ORIGIN)
        self.floats["anchor"][at] = _seconds(light[11])

    def bump(self, slots: Sequence[int], counts: Sequence[int], anchors: Sequence[float]) -> None:
        """New usage counters for rows held, nothing else of them changed: what `put` would
        set from their `_light` columns."""
        at = np.asarray(slots, dtype=np.int64)
        refs = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
        self.floats["refs"][at] = np.minimum(1.0, refs / recall.REFERENCE_COUNT_SATURATION)
        self.floats["anchor"][at] = np.asarray(anchors, dtype=np.float64)

    def fill(self, rows: Sequence[Sequence[Any]]) -> None:
        """An empty snapshot's rows (`_rows_sql`'s columns), as `put` would add them one by
        one, a column at a time: per row, only what must be looked up or joined. Row by
        row, the numpy writes were about half of building a snapshot, and once those were
        batched, the Python bookkeeping of each row's words was (profiled at 1k and 10k
        rows, docs/decisions/recall.md, "First recalls")."""
        if self.size:
            raise ValueError("fill is for an empty snapshot")
        live = [row for row in rows if row[2]]
        n = len(live)
        if not n:
            return
        self._grow(n)
        cols = list(zip(*live, strict=True))
        revisions = [r if isinstance(r, uuid.UUID) else uuid.UUID(str(r)) for r in cols[0]]
        self.revisions = list(revisions)
        self.slot = dict(zip(revisions, range(n), strict=True))
        self.entry_ids = [e if isinstance(e, uuid.UUID) else uuid.UUID(e) for e in cols[1]]
        codes = self.codes

        def coded(prefix: str, values: Sequence[str | None]) -> list[int]:
            table = {v: codes.of(prefix + v) for v in dict.fromkeys(values) if v}
            return [table[v] if v else -1 for v in values]

        category, reason = cols[5], cols[8]
        # The pipeline's conflict key: (category, actor handle or "", subject).
        clusters = [
            f"{c}\x00{a or ''}\x00{s}" if s else None
            for c, s, a in zip(category, cols[6], cols[13], strict=True)
        ]
        ints = self.ints
        ints["scope"][:n] = coded("s:", cols[3])
        ints["adapter"][:n] = coded("a:", cols[4])
        ints["category"][:n] = coded("c:", category)
        ints["cluster"][:n] = coded("k:", clusters)
        ints["reason"][:n] = coded("r:", reason)
        ints["sensitive"][:n] = [
            int(a is not None and bool(f)) for a, f in zip(cols[13], cols[14], strict=True)
        ]
        floats = self.floats
        ends = [_seconds(e) for e in cols[9]]
        floats["ends"][:n] = [
            -_INF if not r else (_INF if e is None else e)
            for r, e in zip(reason, ends, strict=True)
        ]
        refs = np.maximum(np.array(cols[10], dtype=np.float64), 0.0)
        floats["refs"][:n] = np.minimum(1.0, refs / recall.REFERENCE_COUNT_SATURATION)
        floats["origin"][:n] = [_ORIGIN.get(o, _BEST_ORIGIN) for o in cols[7]]
        floats["anchor"][:n] = [_seconds(v) for v in cols[11]]
        floats["updated"][:n] = [_seconds(v) for v in cols[12]]
        self._fill_words([self.words(row) for row in live])
        if self.hybrid:
            stored = cols[_WORDS_AT + 2]
            have = [at for at, v in enumerate(stored) if v is not None]
            data = b"".join(bytes(stored[at]) for at in have)
            if len(data) == len(have) * embedding.VECTOR_BYTES:
                flat = np.frombuffer(data, dtype="<f4")
                self.vectors[have] = flat.reshape(len(have), embedding.DIMENSION)
            else:  # a vector of the wrong size: `from_bytes` says which
                for at in have:
                    self.vectors[at] = embedding.from_bytes(bytes(stored[at]))
            self.has_vector[have] = True
        self.size = n
        self.live[:n] = True
        self._forget_gates()

    def _fill_words(self, texts: Sequence[str]) -> None:
        """Postings and lengths of rows 0..n-1 from their space-joined words: one split of
        all of them, each word numbered once, then (word, row) pairs counted by numpy."""
        n = len(texts)
        lengths = np.fromiter(
            (t.count(" ") + 1 if t else 0 for t in texts), dtype=np.int64, count=n
        )
        self.floats["length"][:n] = lengths
        flat = " ".join(texts).split()
        vocab: dict[str, int] = {}
        ids = np.fromiter(
            (vocab.setdefault(w, len(vocab)) for w in flat), dtype=np.int64, count=len(flat)
        )
        pairs, counts = np.unique(ids * n + np.repeat(np.arange(n), lengths), return_counts=True)
        word_of, slot_of = np.divmod(pairs, n)
        tf = counts.astype(np.float64)
        starts = np.flatnonzero(np.diff(word_of, prepend=-1))
        ends = [*starts[1:].tolist(), len(pairs)] if len(starts) else []
        names = [sys.intern(w) for w in vocab]
        for w, a, b in zip(word_of[starts].tolist(), starts.tolist(), ends, strict=True):
            self.postings[names[w]] = (slot_of[a:b], tf[a:b])
        order = np.argsort(slot_of, kind="stable")
        offsets = np.searchsorted(slot_of[order], np.arange(n + 1))
        self._index = (offsets, word_of[order], names)
        self._added = {}

    def words_at(self, at: int) -> tuple[str, ...]:
        """The distinct words of the row in slot `at`."""
        added = self._added.get(at)
        if added is not None:
            return added
        offsets, ids, names = self._index
        if at + 1 >= len(offsets):
            return ()
        return tuple(names[i] for i in ids[offsets[at] : offsets[at + 1]].tolist())

    def drop(self, revision: uuid.UUID) -> None:
        at = self.slot.pop(revision, None)
        if at is None:
            return
        self.live[at] = False
        self._forget_gates()
        for word in self.words_at(at):
            held = self.posting(word)
            if not len(held[0]):
                continue
            keep = held[0] != at
            if not keep.any():
                del self.postings[word]
            elif not keep.all():
                self.postings[word] = (held[0][keep], held[1][keep])
        self._added.pop(at, None)
        self.entry_ids[at] = None
        self.revisions[at] = None
        if self.hybrid:
            self.vectors[at] = 0.0
        self.has_vector[at] = False
        self.dead += 1
        if self.dead * 2 > self.size:
            self._compact()

    def _compact(self) -> None:
        for word in list(self._appended):
            self.posting(word)
        keep = np.flatnonzero(self.live[: self.size])
        n = len(keep)
        new_slot = np.full(self.size, -1, dtype=np.int64)
        new_slot[keep] = np.arange(n)
        self._reallocate(max(64, n), keep)
        kept = keep.tolist()
        self.entry_ids = [self.entry_ids[at] for at in kept]
        self.revisions = [self.revisions[at] for at in kept]
        self.slot = {r: at for at, r in enumerate(self.revisions) if r is not None}
        postings = {}
        for word, (slots, tf) in self.postings.items():
            moved = new_slot[slots]
            held = moved >= 0
            if held.any():
                postings[word] = (moved[held], tf[held])
        self.postings = postings
        self.size, self.dead = n, 0
        # Each row's words, from the postings, as `_fill_words` indexes them.
        names = list(postings)
        held_slots = [p[0] for p in postings.values()]
        word_of = np.repeat(np.arange(len(names)), [len(s) for s in held_slots])
        slot_of = np.concatenate(held_slots) if held_slots else _NO_SLOTS
        order = np.argsort(slot_of, kind="stable")
        offsets = np.searchsorted(slot_of[order], np.arange(n + 1))
        self._index = (offsets, word_of[order], names)
        self._added = {}

    def posting(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots, counts) of the rows holding `word`."""
        appended = self._appended.pop(word, None)
        if appended:
            # Added slots are above every held one, so the slots stay ascending.
            slots, counts = self.postings.get(word, _NO_POSTING)
            self.postings[word] = (
                np.concatenate([slots, np.array([a for a, _ in appended], dtype=np.int64)]),
                np.concatenate([counts, np.array([n for _, n in appended])]),
            )
        return self.postings.get(word, _NO_POSTING)

    # -- ranking --------------------------------------------------------------------

    def reachable(
        self, request: recall.RecallRequest, adapter_scopes: Sequence[str] | None
    ) -> Reach:
        """The slots in the request's reachable scope keys and the surface's adapter
        scopes: the live part of what the exhaustive pipeline evaluates. The same `Reach`
        serves each recall of these scopes until a row's gate facts change."""
        keys = tuple(self.codes.get("s:" + k, -1) for k in recall.reachable_scope_keys(request))
        scopes = None
        if adapter_scopes is not None:
            scopes = tuple(self.codes.get("a:" + s, -1) for s in adapter_scopes)
        reach = self._reaches.get((keys, scopes))
        if reach is None:
            if len(self._reaches) >= _GATE_MEMO_MAX:
                self._reaches.clear()
            n = self.size
            mask = self.live[:n] & np.isin(self.ints["scope"][:n], keys)
            if scopes is not None:
                mask &= np.isin(self.ints["adapter"][:n], scopes)
            reach = self._reaches[keys, scopes] = Reach(mask)
        return reach

    def gated(self, request: recall.RecallRequest, reach: Reach) -> np.ndarray:
        """Slots passing `recall_db._gates_sql`'s gates, among `reach`'s."""
        n = self.size
        if request.crisis_frame and not request.safety_critical_context:
            return np.zeros(0, dtype=np.int64)
        mask = reach.mask.copy()
        mask &= self.floats["ends"][:n] <= request.now.timestamp()
        if request.crisis_frame:
            mask &= self.ints["category"][:n] == self.codes.get("c:" + Category.SAFETY.value, -1)
        return np.flatnonzero(mask)

    def corpus(self, gated: np.ndarray, qterms: Sequence[str]) -> CorpusStats:
        """BM25 statistics of the gated rows, all exact. The average length is every gated
        row's: a sample chosen by use (the most recently referenced) would let each recall's
        usage bump reweigh every later question (docs/decisions/recall.md, "BM25's average
        length")."""
        inside = np.zeros(self.size, dtype=bool)
        inside[gated] = True
        df = {}
        for t in qterms:
            slots, _ = self.posting(t)
            n = int(inside[slots].sum()) if len(slots) else 0
            if n:
                df[t] = n
        total = float(self.floats["length"][gated].sum())
        return CorpusStats(
            document_count=len(gated),
            average_length=total / len(gated) if len(gated) else 0.0,
            document_frequency=df,
        )

    def scores(
        self,
        gated: np.ndarray,
        request: recall.RecallRequest,
        corpus: CorpusStats | None,
        query_vector: np.ndarray | None,
        floor: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each gated row's score (unrounded), or a bound on it where the snapshot cannot
        know it (a hybrid row without a stored vector); -inf for a row a question's
        relevance floor (`floor`) drops. With each, its semantic value (or that bound)."""
        now = request.now.timestamp()
        age = now - self.floats["anchor"][gated]
        recency = np.exp(-np.maximum(age, 0.0) * recall.RECENCY_RATE)
        static = (
            recall.WEIGHTS["recency"] * recency
            + recall.WEIGHTS["reference_count"] * self.floats["refs"][gated]
            + recall.WEIGHTS["origin"] * self.floats["origin"][gated]
        )
        place = np.full(self.size, -1, dtype=np.int64)
        place[gated] = np.arange(len(gated))
        value = np.zeros(len(gated))
        if self.lexical:
            assert corpus is not None
            q = query_terms(request.query)
            upper = corpus.upper_bound(q)
            if upper > 0.0:
                k1, b, avg = corpus.k1, corpus.b, corpus.average_length
                for t in q:
                    slots, tf = self.posting(t)
                    at = place[slots] if len(slots) else slots
                    keep = at >= 0
                    if not keep.any():
                        continue
                    slots, tf, at = slots[keep], tf[keep], at[keep]
                    length = self.floats["length"][slots]
                    norm = k1 * (1.0 - b + b * length / avg) if avg else np.full(len(slots), k1)
                    value[at] += corpus.idf(t) * tf * (k1 + 1.0) / (tf + norm)
                value /= upper
            if self.hybrid:
                w = semantic.HYBRID_LEXICAL_WEIGHT
                cosine = np.ones(len(gated))
                have = self.has_vector[gated]
                if query_vector is not None and have.any():
                    # Over every slot, then picked: gathering the gated rows' vectors first
                    # copied them (15 MB at 10k), 1.2 ms against 0.2.
                    with embedding.one_blas_thread():
                        found = self.vectors[: self.size] @ query_vector
                    cosine[have] = np.maximum(found[gated[have]], 0.0)
                value = w * value + (1.0 - w) * cosine
        else:
            qtokens = recall.tokens(request.query)
            shared = np.zeros(len(gated))
            for t in qtokens:
                slots, _ = self.posting(t)
                at = place[slots] if len(slots) else slots
                shared[at[at >= 0]] += 1.0
            sizes = self.floats["length"][gated]
            union = len(qtokens) + sizes - shared
            value = np.divide(shared, union, out=np.zeros(len(gated)), where=shared > 0)
        value = np.minimum(value, 1.0)
        if recall.is_briefing(request.query):
            return static + recall.WEIGHTS["semantic"] * value, value
        # `recall.score` for a question; a row that cannot exceed the relevance floor
        # cannot be returned at all.
        score = value * recall.question_factor(static)
        # Jaccard and BM25 values are exact here, 0 exactly when no word is shared; an
        # exact hybrid value may differ from the pipeline's in its last bits, hence the margin.
        score[value <= (floor - _MARGIN if floor > 0.0 else 0.0)] = -_INF
        return score, value

    def census(
        self, request: recall.RecallRequest, reach: Reach
    ) -> tuple[dict[str, int], np.ndarray, int]:
        """What `resolve` would do with every live reachable row, but score them: (drops by
        gate reason, mask of the dedupe winners among the rows passing every gate (by
        slot, read-only), how many such rows dedupe drops).

        The gates' verdict is the pipeline's own (`recall.reachable_drop_reason`), asked
        once per distinct (category, suppression still on, sensitive interaction); dedupe
        is the pipeline's rule: the most recent `updated_at` of a conflict key wins, ties
        to the lower entry id. The grouping and the dedupe are kept in `reach` until a
        row's gate facts change or a suppression starts or ends: the verdicts are asked
        anew at each call."""
        slots, unique, inverse, sizes, width = self._groups(reach, request.now.timestamp())
        counts: dict[str, int] = {}
        if not len(slots):
            return counts, np.zeros(self.size, dtype=bool), 0
        names = self.codes.names
        verdict_of = recall.reachable_drop_reason(request)
        passes = np.zeros(len(unique), dtype=bool)
        for g, packed in enumerate(unique.tolist()):
            actor = packed % 2
            cat, why = divmod(packed // 2, width)
            why -= 1
            dropped = verdict_of(
                names[cat][2:],
                names[why][2:] if why >= 0 else None,
                why >= 0,
                "active",
                bool(actor),
            )
            if dropped is None:
                passes[g] = True
            else:
                counts[dropped] = counts.get(dropped, 0) + int(sizes[g])
        pattern = passes.tobytes()
        held = reach.winners.get(pattern)
        if held is None:
            if len(reach.winners) >= _GATE_MEMO_MAX:
                reach.winners.clear()
            winners, deduped = self._dedupe(slots[passes[inverse]])
            winners.flags.writeable = False
            held = reach.winners[pattern] = (winners, deduped)
        return counts, *held

    def _groups(
        self, reach: Reach, now: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """`reach`'s slots grouped by (category, suppression still on, interaction): the
        slots, the group codes, each slot's group, the groups' sizes and the codes' width.
        Kept in `reach` with the moments [from, to) between which no reachable suppression
        starts or ends, so that it holds for any `now` inside them."""
        if reach.grouped is not None and reach.window[0] <= now < reach.window[1]:
            return reach.grouped
        slots = np.flatnonzero(reach.mask)
        ends = self.floats["ends"][slots]
        on = ends > now
        reason = np.where(on, self.ints["reason"][slots], -1)
        category = self.ints["category"][slots]
        sensitive = self.ints["sensitive"][slots]
        # One integer per (category, suppression, interaction): codes are below len(codes).
        width = len(self.codes) + 1
        groups = (category.astype(np.int64) * width + (reason + 1)) * 2 + sensitive
        unique, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
        reach.grouped = (slots, unique, inverse.reshape(-1), sizes, width)
        reach.window = (
            float(ends[~on].max()) if not on.all() else -_INF,
            float(ends[on].min()) if on.any() else _INF,
        )
        reach.winners.clear()  # they were the old grouping's
        return reach.grouped

    def _dedupe(self, survivors: np.ndarray) -> tuple[np.ndarray, int]:
        """Mask of the dedupe winners among `survivors` (slots passing every gate), and
        how many of them dedupe drops."""
        n = self.size
        winners = np.zeros(n, dtype=bool)
        cluster = self.ints["cluster"][survivors]
        winners[survivors[cluster < 0]] = True
        keyed = survivors[cluster >= 0]
        if not len(keyed):
            return winners, 0
        updated = self.floats["updated"]
        chosen = np.zeros(n, dtype=bool)
        chosen[keyed] = True
        every = self.keyed_by_recency()
        order = every[chosen[every]]
        codes = self.ints["cluster"][order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = codes[1:] != codes[:-1]
        heads = order[first]
        winners[heads] = True
        # Rows tied with their cluster's most recent: the lower entry id wins.
        tied = np.flatnonzero(~first)
        if len(tied):
            head_of = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
            for i in tied[updated[order[tied]] == updated[order[head_of[tied]]]].tolist():
                head, rival = order[head_of[i]], order[i]
                if str(self.entry_ids[rival]) < str(self.entry_ids[head]):
                    winners[head] = False
                    winners[rival] = True
                    order[head_of[i]] = rival
        return winners, int(len(keyed) - len(heads))

    def keyed_by_recency(self) -> np.ndarray:
        """The slots of every row with a conflict key, as dedupe reads them: by key, the
        most recent first, ties in slot order. Kept between recalls: usage changes neither
        key nor time (docs/decisions/recall.md, "A 10k recall, part by part")."""
        if self._keyed_order is None:
            cluster = self.ints["cluster"][: self.size]
            keyed = np.flatnonzero(cluster >= 0)
            recency = -self.floats["updated"][keyed]
            self._keyed_order = keyed[np.lexsort((recency, cluster[keyed]))]
        return self._keyed_order

    def rivals(self, picked: np.ndarray, gated: np.ndarray, unread: np.ndarray) -> np.ndarray:
        """Positions in `gated` of unread rows sharing (category, subject) with a picked
        row and at least as recent as the oldest picked row of that cluster: what
        `recall_db._statement`'s closure adds (dedupe keeps a cluster's most recent row
        whatever its score)."""
        cluster = self.ints["cluster"]
        updated = self.floats["updated"]
        since: dict[int, float] = {}
        for s in picked[cluster[picked] >= 0].tolist():
            c = int(cluster[s])
            since[c] = min(since.get(c, _INF), float(updated[s]))
        if not since:
            return np.zeros(0, dtype=np.int64)
        inside = np.flatnonzero(unread & np.isin(cluster[gated], list(since)))
        slots = gated[inside]
        floor = np.array([since[int(c)] for c in cluster[slots]])
        return inside[updated[slots] >= floor]


def _best(score: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the `depth` best scores (any order)."""
    if depth >= len(score):
        return np.arange(len(score))
    return np.argpartition(-score, depth - 1)[:depth]


# --------------------------------------------------------------------------------------
# Building, looking for changes, the per-worker cache


# The writers a statement cannot see: every one still running when it started, and every
# one that starts later (a transaction at or past the snapshot's xmax). Its changes are
# read again at the next look; any other writer had finished, so the statement saw it.
_UNSEEN = (
    "pg_snapshot_xmax(pg_current_snapshot())::text, "
    "ARRAY(SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x)"
)


def _build(member: Any, ranker_name: str, *, follow: bool) -> Snapshot:
    """A snapshot from the table; with `follow`, ready to catch up from the change log."""
    snap = Snapshot(ranker_name)
    with plainsql.cursor() as cursor:
        if follow:
            # Taken before the rows are read, so it can only say too much is unseen.
            cursor.execute(f"SELECT {_UNSEEN}")
            snap.unseen_from, snap.unseen = cursor.fetchone()
        with _binary(cursor):
            cursor.execute(*_rows_sql(member, snap, "is_current AND lifecycle = 'active'"))
            rows = cursor.fetchall()
    snap.fill(rows)
    return snap


@contextmanager
def _binary(cursor: Any) -> Iterator[None]:
    """The statement's rows in PostgreSQL's binary format: a stored vector comes as its
    bytes rather than their hex digits, and the read of a 1k snapshot took half as long
    (9.0 ms against 18.6, docs/decisions/recall.md, "First recalls")."""
    raw = getattr(cursor, "cursor", None)
    if connection.vendor != "postgresql" or raw is None:
        yield
        return
    from psycopg.pq import Format

    before = raw.format
    raw.format = Format.BINARY
    try:
        yield
    finally:
        raw.format = before


def _rows_sql(
    member: Any, snap: Snapshot, where: str, params: Sequence[Any] = (), *, source: str = _TABLE
) -> tuple:
    vector = "NULL"
    if snap.hybrid:
        vector = (
            f"(SELECT v.vector FROM {MemoryEmbedding._meta.db_table} AS v "  # noqa: S608
            f"WHERE v.revision_id = {_TABLE}.revision_id)"
        )
    # The body itself only where the row stores no words (written before they were).
    sql = (
        f"SELECT {_light()}, recall_words, "  # noqa: S608
        f"CASE WHEN recall_words IS NULL THEN body END, {vector} FROM {source} "
        f"WHERE tenant_id = %s AND member_id = %s AND {where}"
    )
    tenant = member.tenant_id if connection.vendor == "postgresql" else member.tenant_id.hex
    source_params = list(params) if source != _TABLE else []
    where_params = [] if source != _TABLE else list(params)
    return sql, [*source_params, tenant, member.pk, *where_params]


# The rows of given revisions, found by primary key. `OFFSET 0` keeps the tenant and member
# conditions out of the probe: with them in it, a planner whose statistics predate a burst
# of writes (a member's first thousands of rows) walked the member's index and filtered
# every row by revision, for each revision asked (docs/decisions/recall.md, "Warm
# snapshots"). The conditions still hold: they are applied to what the probe found.
_BY_REVISION = f"(SELECT * FROM {_TABLE} WHERE revision_id = ANY(%s) OFFSET 0) AS {_TABLE}"  # noqa: S608


def _catch_up(
    member: Any, snap: Snapshot, riders: Sequence[tuple[str, list[Any]]] = ()
) -> tuple[int, list[list[tuple[Any, ...]]]]:
    """One round trip: what this look cannot see, and the current state of every revision
    noted by a writer the last look could not see (deleted ones come back empty); a second
    only for revisions not seen before, for their words. Returns how many were noted, and
    the rows of each of `riders`, SELECTs asked in the same round trip (the recall's count
    of rows that are not active, `recall_db.inactive_drops_sql`, and the member's consent
    ledger). A rider names each of its columns apart: its rows come back as JSON objects.

    A writer that stays open (a long transaction) is read again at each look, but only its
    own changes, never everything written since it began."""
    # LATERAL: one primary-key probe per changed revision. As a join, the planner hashed
    # every row of the member (0.7 of 1.7 ms at 1k).
    # The change log is read as one range of its (member, xid) index, from the oldest
    # writer the last look could not see: with an OR of the two conditions, a generic plan
    # read every note the member has (20,000 after 10,000 writes) at each look. The revision
    # is probed by primary key alone, for the reason given at `_BY_REVISION`.
    # Each rider's rows as one JSON array, so the header stays one row.
    # A revision whose every note since is a usage bump's (migration 0014) is not read: its
    # newest note holds the counters. Notes of one row are numbered in the order its
    # versions were written (each writer waits for the row's lock), so the newest the look
    # can see belongs to the version it sees.
    ridden = [f"(SELECT json_agg(d) FROM ({sql}) AS d)" for sql, _ in riders]  # noqa: S608
    head = ", ".join([_UNSEEN, *ridden])
    head_params = [p for _, params in riders for p in params]
    sql = (
        f"SELECT h.*, c.*, m.* "  # noqa: S608
        f"FROM (SELECT {head}) AS h "
        "LEFT JOIN (SELECT revision_id, bool_and(reference_count IS NOT NULL) AS usage_only, "
        "(array_agg(reference_count ORDER BY id DESC))[1], "
        "(array_agg(anchor ORDER BY id DESC))[1] "
        f"FROM {_CHANGES} WHERE member_id = %s "
        "AND xid >= %s::xid8 AND (xid >= %s::xid8 OR xid = ANY(%s::text[]::xid8[])) "
        "GROUP BY revision_id) AS c "
        f"ON true LEFT JOIN LATERAL (SELECT {_light('r.')} FROM (SELECT * FROM {_TABLE} "
        "WHERE revision_id = c.revision_id AND NOT c.usage_only OFFSET 0) AS r "
        "WHERE r.tenant_id = %s AND r.member_id = %s) AS m ON true"
    )
    oldest = min([int(snap.unseen_from), *map(int, snap.unseen)])
    params = [
        *head_params,
        *[member.pk, str(oldest), snap.unseen_from, snap.unseen, member.tenant_id, member.pk],
    ]
    looked = time.monotonic()
    # Planned anew at each call, it spent more on planning than on running: its generic
    # plan looks dear only to the estimates (docs/decisions/recall.md).
    rows = plainsql.rows_planned_once(sql, params)
    # Columns: the unseen writers (2), each rider's rows, the noted revision, whether only
    # its usage changed and its newest counters, then its `_light` columns.
    at = 2 + len(riders)
    new: list[uuid.UUID] = []
    bumped: list[tuple[int, int, float]] = []
    noted = 0
    for row in rows:
        revision, usage_only, light = row[at], row[at + 1], row[at + 4 :]
        if revision is None:
            continue
        noted += 1
        if usage_only:
            if snap.known(revision) and not _wants_vector(snap, revision):
                bumped.append((snap.slot[revision], row[at + 2], row[at + 3]))
            else:
                new.append(revision)
        elif light[0] is None:  # deleted
            snap.drop(revision)
        elif not light[2] or (snap.known(revision) and not _wants_vector(snap, revision)):
            snap.put(light)
        else:
            new.append(revision)
    if bumped:
        snap.bump(*zip(*bumped, strict=True))
    if new:
        with plainsql.cursor() as cursor, _binary(cursor):
            cursor.execute(*_rows_sql(member, snap, "true", [new], source=_BY_REVISION))
            for row in cursor.fetchall():
                vector = row[_WORDS_AT + 2] if snap.hybrid else None
                snap.put(row[:_WORDS_AT], snap.words(row), vector)
    snap.unseen_from, snap.unseen = rows[0][0], rows[0][1]
    snap.looked = looked
    return noted, [[tuple(r.values()) for r in rows[0][2 + i] or ()] for i in range(len(riders))]


# The change log's triggers (migration 0008). Without them snapshots never learn of a
# change and rank on old rows until they are rebuilt (never leaking: the table has the last
# word), so `manage.py doctor` asks for them.
TRIGGERS = tuple(
    f"memory_{table}_{event}"
    for table in ("entry", "embedding")
    for event in ("inserted", "updated", "deleted")
)


def missing_triggers() -> list[str]:
    """The change log's triggers that are absent or disabled (none off PostgreSQL)."""
    if connection.vendor != "postgresql":
        return []
    with plainsql.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s) AND tgenabled <> 'D'",
            [list(TRIGGERS)],
        )
        present = {row[0] for row in cursor.fetchall()}
    return [name for name in TRIGGERS if name not in present]


def prune_changes(*, batch: int, batches: int = 1) -> int:
    """Delete changes older than `IRIS_RECALL_CHANGES_KEEP_SECONDS` (at least two snapshot
    lifetimes), `batch` rows at a time, at most `batches` times; returns how many."""
    if connection.vendor != "postgresql":
        return 0
    keep = max(
        float(settings.IRIS_RECALL_CHANGES_KEEP_SECONDS),
        2 * float(settings.IRIS_RECALL_SNAPSHOT_SECONDS),
    )
    deleted = 0
    with plainsql.cursor() as cursor:
        for _ in range(batches):
            cursor.execute(
                f"DELETE FROM {_CHANGES} WHERE id IN (SELECT id FROM {_CHANGES} "  # noqa: S608
                "WHERE noted_at < clock_timestamp() - make_interval(secs => %s) LIMIT %s)",
                [keep, batch],
            )
            deleted += cursor.rowcount
            if cursor.rowcount < batch:
                break
    return deleted


def _wants_vector(snap: Snapshot, revision: uuid.UUID) -> bool:
    # A vector stored after the snapshot first saw its revision (a backfill).
    return snap.hybrid and not snap.has_vector[snap.slot[revision]]


_CACHE: OrderedDict[tuple[Any, ...], Snapshot] = OrderedDict()
_LOCK = threading.Lock()


def clear() -> None:
    _FOLLOWER.cancel()
    with _LOCK:
        _CACHE.clear()


def usable() -> bool:
    """Whether this recall may keep and use a cached snapshot."""
    return (
        bool(settings.IRIS_RECALL_SNAPSHOT)
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    )


def _key(member: Any, ranker_name: str) -> tuple[Any, ...]:
    return (connection.alias, str(member.tenant_id), member.pk, ranker_name)


def _fresh(snap: Snapshot | None) -> bool:
    lifetime = float(settings.IRIS_RECALL_SNAPSHOT_SECONDS)
    return snap is not None and time.monotonic() - snap.built <= lifetime


def held(member: Any, ranker_name: str) -> bool:
    """Whether this worker holds a snapshot of the member it may still use."""
    with _LOCK:
        return _fresh(_CACHE.get(_key(member, ranker_name)))


def warm(member: Any, ranker_name: str) -> None:
    """Build (or catch up) the member's snapshot, for the next recall."""
    if usable():
        with _LOCK:
            _current(member, ranker_name)  # nothing rides: no recall is asking


# A write catches up a snapshot that has not looked at the change log for this long: in a
# burst of one member's writes each worker then reads the log four times a second rather
# than once a write (each look reads what every worker wrote since the last), and a recall
# right after the burst catches up at most the last quarter second's writes.
WARM_AFTER_SECONDS = 0.25


def warm_later(member: Any, ranker_name: str) -> None:
    """Once the answer has gone out, bring this worker's snapshot of the member up to date,
    building it if the worker holds none: called when the member's rows change, so the
    member's next recall here finds the snapshot current rather than building it (at 10k
    rows a build is 10-30 times the cost of a warm recall; docs/decisions/recall.md,
    "Warm snapshots"). Outside a request (jobs, tests) the next recall does it."""
    if not (
        settings.IRIS_RECALL_SNAPSHOT
        and connection.vendor == "postgresql"
        and after_response.in_request()
    ):
        return
    key = _key(member, ranker_name)
    held = _CACHE.get(key)
    recent = held is not None and time.monotonic() - held.looked < WARM_AFTER_SECONDS
    if not (recent and _fresh(held)):
        after_response.defer(partial(warm, member, ranker_name), key=("recall-warm", *key))
    elif settings.IRIS_RECALL_TRAIL_SECONDS > 0 or settings.IRIS_RECALL_FOLLOW_SECONDS > 0:
        # Counted from once the answer has gone out: by then the write has committed.
        after_response.defer(
            partial(_FOLLOWER.wrote, member, ranker_name), key=("recall-follow", *key)
        )


class _Follower:
    """A worker's own thread that catches its snapshots up off the request path, so a
    recall finds little left to read:

    - the writes a worker left to the next look (`warm_later`), once the member's writes
      have paused for `IRIS_RECALL_TRAIL_SECONDS`: without it the member's first recall
      after a burst read the burst's last writes;
    - every `IRIS_RECALL_FOLLOW_SECONDS`, the members this worker recalled in the last
      `FOLLOW_WINDOW_SECONDS` (the `FOLLOW_MEMBERS` most recent): without it a worker
      that served none of a member's last recalls read every other worker's usage bumps
      at its next one.

    A look already made after the due one was planned (a recall's, a write's) stands in
    for it (docs/decisions/recall.md, "Snapshots followed between recalls")."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # key → (when to look, a look after this makes it needless, member, ranker)
        self._due: dict[tuple[Any, ...], tuple[float, float, Any, str]] = {}
        # key → until when it is followed, most recently used last
        self._until: OrderedDict[tuple[Any, ...], float] = OrderedDict()
        self._busy = False
        self._resting = True  # nothing due, and its connection closed
        self._thread: threading.Thread | None = None

    def wrote(self, member: Any, ranker_name: str) -> None:
        """A write left its catch-up to later."""
        self._plan(member, ranker_name, wrote=True)

    def recalled(self, member: Any, ranker_name: str) -> None:
        """A recall of the member looked: follow it for a while."""
        if settings.IRIS_RECALL_FOLLOW_SECONDS > 0:
            self._plan(member, ranker_name, wrote=False)

    def _plan(self, member: Any, ranker_name: str, *, wrote: bool) -> None:
        key = _key(member, ranker_name)
        now = time.monotonic()
        follow = float(settings.IRIS_RECALL_FOLLOW_SECONDS)
        with self._cond:
            due = self._due.get(key)
            if not wrote:
                self._until[key] = now + FOLLOW_WINDOW_SECONDS
                self._until.move_to_end(key)
                while len(self._until) > FOLLOW_MEMBERS:
                    self._until.popitem(last=False)
            # Writes alone do not make a member followed: in a bulk load each worker would
            # look ten times a second, to no recall's benefit.
            if follow > 0 and self._until.get(key, 0.0) > now:
                at = due[0] if due else now + follow
            elif wrote and settings.IRIS_RECALL_TRAIL_SECONDS > 0:
                at = now + float(settings.IRIS_RECALL_TRAIL_SECONDS)
            else:
                return
            self._due[key] = (at, now, member, ranker_name)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="recall-follow", daemon=True)
                self._thread.start()
            if due is None or at < due[0]:
                self._cond.notify()

    def cancel(self) -> None:
        """Drop what is due and followed, and wait until the thread rests, its look (if
        one was under way) over and its connection closed."""
        with self._cond:
            self._due.clear()
            self._until.clear()
            self._cond.notify_all()
            alive = self._thread is not None and self._thread.is_alive()
            while self._busy or (alive and not self._resting):
                self._cond.wait()

    def _next(self, idle: Callable[[], None]) -> tuple[tuple[Any, ...], float, Any, str]:
        with self._cond:
            while True:
                if not self._due:
                    if not self._resting:
                        idle()
                        self._resting = True
                        self._cond.notify_all()
                    self._cond.wait()
                    continue
                key, (at, since, member, ranker_name) = min(
                    self._due.items(), key=lambda item: item[1][0]
                )
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                del self._due[key]
                self._busy, self._resting = True, False
                return key, since, member, ranker_name

    def _again(self, key: tuple[Any, ...], member: Any, ranker_name: str) -> None:
        """The next look at a member still followed: an interval after the last one."""
        now = time.monotonic()
        if self._until.get(key, 0.0) <= now:
            self._until.pop(key, None)
            return
        follow = float(settings.IRIS_RECALL_FOLLOW_SECONDS)
        held = _CACHE.get(key)
        last = min(held.looked, now) if held is not None else now
        # An interval after the last look, and never at once; a look made after now (a
        # recall's) stands in for this one.
        at = max(last + follow, now + follow / 2)
        self._due.setdefault(key, (at, now, member, ranker_name))

    def _run(self) -> None:
        from django.db import connections

        while True:
            # This thread's own connection is kept while it has looks due, not in between.
            key, since, member, ranker_name = self._next(idle=connections.close_all)
            failed = False
            try:
                held = _CACHE.get(key)
                if held is None or held.looked < since:
                    warm(member, ranker_name)
            except Exception as exc:  # noqa: BLE001  (the next recall catches up itself)
                failed = True
                logger.warning(
                    "recall snapshot not caught up between recalls: %s", type(exc).__name__
                )
                connections.close_all()
            finally:
                with self._cond:
                    self._busy = False
                    if failed:  # followed again from the member's next recall, not retried
                        self._until.pop(key, None)
                    elif settings.IRIS_RECALL_FOLLOW_SECONDS > 0:
                        self._again(key, member, ranker_name)
                    self._cond.notify_all()


# How long, and how many of, the members a worker recalled lately it follows.
FOLLOW_WINDOW_SECONDS = 30.0
FOLLOW_MEMBERS = 4

_FOLLOWER = _Follower()


def warm_start(members: Sequence[Any], ranker_name: str) -> int:
    """Build the snapshots of `members`, in order, while they fit the row budget; returns
    how many rows are held. Under gunicorn --preload the master calls this before forking
    (`recall.service.warm_start`), so every worker starts with them."""
    if not usable():
        return 0
    budget = int(settings.IRIS_RECALL_SNAPSHOT_ROWS)
    rows = 0
    with _LOCK:
        for member in members:
            snap = _build(member, ranker_name, follow=True)
            if rows and rows + snap.size > budget:
                break
            _CACHE[_key(member, ranker_name)] = snap
            rows += snap.size
    return rows


def _rebuild_later(member: Any, ranker_name: str, stale: Snapshot) -> None:
    """Replace a snapshot past its lifetime once the answer has gone out."""
    key = _key(member, ranker_name)

    def rebuild() -> None:
        if not usable():
            return
        fresh = _build(member, ranker_name, follow=True)
        with _LOCK:
            if _CACHE.get(key) is stale:
                fresh.used = stale.used
                _CACHE[key] = fresh

    after_response.defer(rebuild, key=("recall-rebuild", *key))


def _current(
    member: Any, ranker_name: str, riders: Sequence[tuple[str, list[Any]]] = ()
) -> tuple[Snapshot, list[list[tuple[Any, ...]]] | None]:
    """The member's snapshot, caught up; and each of `riders`' rows when the catch-up
    asked them (None when the snapshot was built instead)."""
    key = _key(member, ranker_name)
    snap = _CACHE.get(key)
    lifetime = float(settings.IRIS_RECALL_SNAPSHOT_SECONDS)
    now = time.monotonic()
    ridden = None
    if snap is None or now - snap.looked > lifetime:
        snap = _build(member, ranker_name, follow=True)
    else:
        # Caught up, a snapshot past its lifetime still ranks on every change the log
        # noted; it is rebuilt (the bound on what a missed note could cost) after the
        # answer rather than before it, and at once outside a request.
        _, ridden = _catch_up(member, snap, riders)
        if not _fresh(snap):
            if after_response.in_request():
                _rebuild_later(member, ranker_name, snap)
            else:
                snap = _build(member, ranker_name, follow=True)
    _CACHE[key] = snap
    _CACHE.move_to_end(key)
    # Least recently used first: drop what is over the row budget, and what no recall has
    # used for a snapshot's lifetime (so a forgotten memory's terms do not stay in an idle
    # worker's memory beyond the next recall it serves after that).
    snap.used = now
    budget = int(settings.IRIS_RECALL_SNAPSHOT_ROWS)
    rows = sum(s.size for s in _CACHE.values())
    while len(_CACHE) > 1:
        oldest = next(iter(_CACHE.values()))
        if rows <= budget and now - oldest.used <= lifetime:
            break
        _CACHE.popitem(last=False)
        rows -= oldest.size
    return snap, ridden


# --------------------------------------------------------------------------------------
# The recall


class Consent(NamedTuple):
    """How a recall's request learns the member's consent: `rider` reads the ledger on the
    catch-up's round trip, and `apply` completes the request from its rows (from None, it
    reads the ledger itself: the snapshot was built, not caught up)."""

    rider: tuple[str, list[Any]]
    apply: Callable[[recall.RecallRequest, list[tuple[Any, ...]] | None], recall.RecallRequest]


def resolve_cached(
    request: recall.RecallRequest, *, member: Any, consent: Consent | None = None, **options: Any
) -> recall_db.FastRecall:
    """`recall_db.fast_resolve`'s answer from this worker's snapshot of the member. With
    `consent`, `request` is completed by it, and the answer's `request` is the one resolved."""
    # The count of rows that are not active, and the consent ledger, ride on the
    # catch-up's round trip.
    drops = recall_db.inactive_drops_sql(
        request, member=member, adapter_scopes=options.get("adapter_scopes")
    )
    riders = [r for r in (drops, consent.rider if consent else None) if r is not None]
    with _LOCK:
        snap, ridden = _current(member, options.get("ranker_name", "jaccard"), riders)
        found = iter(ridden or ())
        inactive = None
        if drops is None:
            inactive = {}
        elif ridden is not None:
            inactive = recall_db.inactive_drops_of(request, next(found))
        if consent is not None:
            request = consent.apply(request, None if ridden is None else next(found))
        if after_response.in_request():
            _FOLLOWER.recalled(member, options.get("ranker_name", "jaccard"))
        return _resolve(snap, request, member=member, inactive=inactive, **options)


def resolve_once(
    request: recall.RecallRequest, *, member: Any, **options: Any
) -> recall_db.FastRecall:
    """The same from a snapshot built for this recall alone (any database, any
    transaction): what the tests compare with the exhaustive pipeline."""
    snap = _build(member, options.get("ranker_name", "jaccard"), follow=False)
    return _resolve(snap, request, member=member, **options)


def _resolve(
    snap: Snapshot,
    request: recall.RecallRequest,
    *,
    member: Any,
    adapter_scopes: Sequence[str] | None = None,
    ranker_name: str = "jaccard",
    prepare: Any = None,
    encoder: Any = None,
    first_read: int | None = None,
    query_vector: Any = None,
    inactive: Mapping[str, int] | None = None,
) -> recall_db.FastRecall:
    """`query_vector`: a future of the query's embedding, when the caller started it.
    `inactive`: `recall_db.inactive_drops`' counts, when the caller has them."""
    gates = recall_db._gates_sql(request, member=member, adapter_scopes=adapter_scopes)
    # The reachable rows, worked out once for the gates and the census.
    reach = snap.reachable(request, adapter_scopes)
    gated = snap.gated(request, reach) if gates is not None else np.zeros(0, np.int64)
    corpus = snap.corpus(gated, query_terms(request.query)) if snap.lexical else None

    # The envelope counts every reachable row (DESIGN invariant 9), most of which are never
    # read: the gates and dedupe over the snapshot's live rows, the rows not active in one
    # grouped statement, and relevance from the semantic values computed below. A winner
    # whose value the snapshot cannot settle (a hybrid row without a stored vector, a value
    # within rounding of the floor) is read back, so `resolve` settles it. The counts come
    # first: they do not need the query's embedding, which a helper thread may still be
    # computing meanwhile.
    counts, winner_slots, deduped = snap.census(request, reach)
    if inactive is None:
        inactive = recall_db.inactive_drops(request, member=member, adapter_scopes=adapter_scopes)
    for reason, n in inactive.items():
        counts[reason] = counts.get(reason, 0) + n

    vector = None
    if snap.hybrid and prepare is not None:
        if query_vector is not None:
            vector = query_vector.result()
        else:
            vector = (encoder or embedding.default_encoder()).encode_one(request.query)
    effective = ranker_name if prepare is not None else "jaccard"
    floor = semantic.relevance_floor(effective)
    score, value = snap.scores(gated, request, corpus, vector, floor)
    possible = score > -_INF
    winner = winner_slots[gated]
    unmatched = np.zeros(len(gated), dtype=bool)
    unsure = np.zeros(len(gated), dtype=bool)
    if not recall.is_briefing(request.query):
        if effective != snap.ranker_name:
            unsure = winner  # the snapshot's values are another ranker's
        else:
            settled = snap.has_vector[gated] if snap.hybrid else np.ones(len(gated), dtype=bool)
            if floor > 0.0:
                unmatched = settled & (value <= floor - _MARGIN)
                matched = settled & (value > floor + _MARGIN)
            else:
                unmatched = value <= 0.0
                matched = settled & (value > 0.0)
            unmatched &= winner
            unsure = winner & ~unmatched & ~matched

    decoder = recall_db._Decoder(tenant_id=str(request.tenant_id), user_id=str(member.public_id))
    fetched: dict[str, recall.Candidate] = {}
    revision_of: dict[str, uuid.UUID] = {}

    def vectors_for(fresh: list[recall.Candidate]) -> dict[str, Any]:
        found = {}
        for c in fresh:
            at = snap.slot.get(revision_of[c.entry_id])
            if at is not None and snap.has_vector[at]:
                found[c.entry_id] = snap.vectors[at]
        return found

    prepared = recall_db.SemanticValues(
        request.query,
        ranker_name=ranker_name,
        prepare=prepare,
        encoder=encoder,
        vectors_for=vectors_for,
    )
    unread = np.ones(len(gated), dtype=bool)  # by position in `gated`
    cap = recall_db._cap(request)
    depth = max(1, cap + FIRST_READ_SPARE if first_read is None else first_read)
    picked = _best(score, depth)
    picked = np.union1d(picked[possible[picked]], np.flatnonzero(unsure))
    rounds = 0
    while True:
        picked = picked[unread[picked]]
        unread[picked] = False
        rivals = snap.rivals(gated[picked], gated, unread)
        unread[rivals] = False
        wanted = gated[np.concatenate([picked, rivals])]
        if len(wanted) and gates is not None:
            _read_back(snap, wanted, gates, decoder, fetched, revision_of)
        rounds += 1
        pool = sorted(fetched.values(), key=lambda c: c.entry_id)
        result = recall.resolve(
            pool, request, semantic=prepared.semantic(pool, corpus), relevance_floor=floor
        )
        if cap == 0 or not (unread & possible).any():
            break
        if len(result.entries) < cap:
            depth *= 2
            picked = _best(score, depth)
            picked = picked[possible[picked]]
            continue
        # Read on every unread row that may still reach the k-th score.
        picked = np.flatnonzero(unread & (score >= result.entries[-1].score - _MARGIN))
        if not len(picked):
            break
    returned = len(result.entries)
    unread_unmatched = int((unmatched & unread).sum())
    no_match = result.audit_envelope.suppression_counts.get(recall.NO_MATCH, 0) + unread_unmatched
    if no_match:
        counts[recall.NO_MATCH] = no_match
    over_budget = max(0, int(winner_slots.sum()) - no_match - returned)
    result = replace(
        result,
        audit_envelope=replace(
            result.audit_envelope,
            suppression_counts=MappingProxyType(dict(sorted(counts.items()))),
            evaluated_count=sum(counts.values()) + deduped + over_budget + returned,
            deduped_count=deduped,
            over_budget_count=over_budget,
        ),
    )
    return recall_db.FastRecall(
        result=result,
        examined=len(gated) - int(unread.sum()),
        rounds=rounds,
        corpus=corpus,
        revision_of=revision_of,
        request=request,
    )


def _read_back(
    snap: Snapshot,
    wanted: np.ndarray,
    gates: tuple[str, list[Any]],
    decoder: Any,
    fetched: dict[str, recall.Candidate],
    revision_of: dict[str, uuid.UUID],
) -> None:
    """The wanted rows as the table holds them now, through the database's gates."""
    revisions = [snap.revisions[s] for s in wanted.tolist()]
    revisions = [r for r in revisions if r is not None]
    if not revisions:
        return
    gate_sql, gate_params = gates
    postgres = connection.vendor == "postgresql"
    # The wanted rows by primary key first, then the gates: left to itself the planner
    # walked the member's scope-key index and filtered a thousand rows at 1k.
    wanted_sql = recall_db._one_of("revision_id", len(revisions))
    fence = " OFFSET 0" if postgres else ""
    sql = (
        f"SELECT {recall_db._selected()} FROM (SELECT * FROM {_TABLE} "  # noqa: S608
        f"WHERE {wanted_sql}{fence}) AS wanted WHERE {gate_sql}"
    )
    params = [*([revisions] if postgres else [r.hex for r in revisions]), *gate_params]
    for row in recall_db._fetch(sql, params):
        c = decoder.candidate(row)
        fetched[c.entry_id] = c
        revision_of[c.entry_id] = decoder.uuid(row[1])
