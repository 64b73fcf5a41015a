"""Recall from a member snapshot returns what the exhaustive pipeline returns, follows
every change the table sees, and never returns a row the table's gates would refuse.

The ranking half is checked with snapshots built for one recall (any database, inside the
test's transaction); keeping and catching up a cached snapshot needs committed rows and
the change log's triggers, so those tests run on PostgreSQL with real commits.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.db import connection, transaction
from hypothesis import strategies as st

from memory.models import MemoryEntry
from memory.recall import db as recall_db
from memory.recall import pipeline as recall
from memory.recall import snapshot as recall_snapshot
from memory.recall.ranking import semantic
from memory.rules.lexical import Bm25Index
from tests.memory.test_recall_fast_path import (
    NOW,
    RANKERS,
    TIMES,
    _entries,
    _generated,
    _profile_request,
    _profile_row,
    _recent_row,
    _request,
    _row,
    _store_vectors,
)


@pytest.fixture(autouse=True)
def _snapshots_on(settings):
    settings.IRIS_RECALL_SNAPSHOT = True  # tests/conftest.py empties the cache for each test


def _exhaustive(
    request: recall.RecallRequest, member: Any, name: str, fast: recall_db.FastRecall, **extra: Any
) -> recall.RecallResult:
    return recall_db.exhaustive_resolve(
        request,
        member=member,
        ranker_name=name,
        prepare=semantic.semantic_for(name),
        corpus=fast.corpus,
        **extra,
    )


@pytest.mark.django_db
@_generated(40)
def test_a_snapshot_recall_equals_the_exhaustive_pipeline(member, other_member, data) -> None:
    draw = data.draw
    with transaction.atomic():
        rows = [_row(member, draw, i) for i in range(draw(st.integers(0, 40)))]
        rows += [_row(other_member, draw, 1000 + i) for i in range(draw(st.integers(0, 5)))]
        MemoryEntry.objects.bulk_create(rows)
        request = _request(member, draw)
        name = draw(st.sampled_from(RANKERS))
        fast = recall_snapshot.resolve_once(
            request,
            member=member,
            ranker_name=name,
            prepare=semantic.semantic_for(name),
            first_read=draw(st.integers(1, 3)),
        )
        full = _exhaustive(request, member, name, fast)
        assert _entries(fast.result) == _entries(full)
        # every count, over every reachable row: paused, draft, suppressed, crisis,
        # sensitive, deduped, unmatched and over the budget alike
        assert fast.result.audit_envelope == full.audit_envelope
        if name == "lexical":
            _assert_exact_statistics(fast, request, member)
        transaction.set_rollback(True)


def _assert_exact_statistics(
    fast: recall_db.FastRecall, request: recall.RecallRequest, member: Any
) -> None:
    """Every BM25 statistic, the average length included, is that of every gated row."""
    gated = recall_db.base_rows(request, member=member)
    exact = Bm25Index((str(e.entry_id), e.body) for e in gated).stats
    assert fast.corpus is not None
    assert fast.corpus.document_count == exact.document_count
    assert fast.corpus.average_length == exact.average_length
    for term, n in fast.corpus.document_frequency.items():
        assert n == exact.document_frequency[term]


@pytest.mark.django_db
@_generated(20)
def test_a_hybrid_snapshot_recall_equals_the_exhaustive_pipeline(
    require_postgres, member, data
) -> None:
    import numpy as np

    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    draw = data.draw
    with transaction.atomic():
        rows = [_recent_row(member, draw, i) for i in range(draw(st.integers(20, 60)))]
        MemoryEntry.objects.bulk_create(rows)
        # Most rows have a stored vector; the rest are embedded by the ranker, and the
        # snapshot bounds their cosine by 1.
        generator = np.random.default_rng(draw(st.integers(0, 1000)))
        vectors = {}
        for r in rows[: len(rows) - draw(st.integers(0, 3))]:
            v = generator.standard_normal(embedding.DIMENSION).astype(np.float32)
            vectors[str(r.entry_id)] = embedding.to_bytes(v / np.linalg.norm(v))
        _store_vectors(member, [r for r in rows if str(r.entry_id) in vectors], vectors)
        query = " ".join(draw(st.lists(st.sampled_from(["coffee", "tea", "cat"]), min_size=1)))
        request = replace(
            _profile_request(member, query, "assistant"), limit=draw(st.sampled_from([None, 3]))
        )
        fast = recall_snapshot.resolve_once(
            request,
            member=member,
            ranker_name="hybrid",
            prepare=semantic.semantic_for("hybrid"),
            first_read=draw(st.integers(1, 4)),
        )
        full = _exhaustive(request, member, "hybrid", fast, vectors=vectors)
        assert _entries(fast.result) == _entries(full)
        assert fast.result.audit_envelope == full.audit_envelope
        transaction.set_rollback(True)


# --------------------------------------------------------------------------------------
# A cached snapshot, on PostgreSQL with committed rows


def _cached(request: recall.RecallRequest, member: Any, name: str = "lexical") -> Any:
    assert recall_snapshot.usable()
    return recall_snapshot.resolve_cached(
        request, member=member, ranker_name=name, prepare=semantic.semantic_for(name)
    )


def _snapshot_of(member: Any, name: str = "lexical") -> recall_snapshot.Snapshot:
    return recall_snapshot._CACHE[(connection.alias, str(member.tenant_id), member.pk, name)]


def _agrees(request: recall.RecallRequest, member: Any) -> list[str]:
    """The cached recall's entry ids, once checked against the exhaustive pipeline."""
    fast = _cached(request, member)
    full = _exhaustive(request, member, "lexical", fast)
    assert _entries(fast.result) == _entries(full)
    assert fast.result.audit_envelope == full.audit_envelope
    return list(fast.result.audit_envelope.returned_ids)


def _coffee_rows(member: Any, count: int) -> list[MemoryEntry]:
    rows = [
        _profile_row(
            member,
            i,
            f"coffee note {i}" if i % 3 == 0 else f"tea note {i}",
            NOW - timedelta(hours=i),
            reference_count=i % 5,
        )
        for i in range(count)
    ]
    MemoryEntry.objects.bulk_create(rows)
    return rows


def _set(row: MemoryEntry, **columns: Any) -> None:
    """Change stored columns as any writer could (the services' own rules aside)."""
    names = sorted(columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE memory_memoryentry SET {', '.join(f'{n} = %s' for n in names)} "
            "WHERE revision_id = %s",
            [*(columns[n] for n in names), row.revision_id],
        )


@pytest.mark.django_db(transaction=True)
def test_usage_never_reweighs_bm25(require_postgres, member) -> None:
    # Long rows and short ones; bumping only the long ones must leave every statistic,
    # and so every row's BM25 value, as it was.
    rows = [
        _profile_row(
            member,
            i,
            f"coffee note {i}" if i % 2 else f"tea note {i} with a much longer body of words",
            NOW - timedelta(hours=i),
        )
        for i in range(300)
    ]
    MemoryEntry.objects.bulk_create(rows)
    request = _profile_request(member, "coffee note", "assistant")
    before = _cached(request, member)
    _assert_exact_statistics(before, request, member)
    for row in rows[::2]:
        _set(row, reference_count=9, last_referenced_at=NOW)
    after = _cached(request, member)
    assert after.corpus == before.corpus
    assert _entries(after.result) == _entries(before.result)


@pytest.mark.django_db(transaction=True)
def test_a_cached_snapshot_follows_every_change(require_postgres, member) -> None:
    rows = _coffee_rows(member, 40)
    # Every row holds "note", so each one matches and usage orders them.
    request = _profile_request(member, "note", "assistant")
    first = _agrees(request, member)
    snap = _snapshot_of(member)
    assert snap.size == 40
    top = MemoryEntry.objects.get(entry_id=first[0])

    # Paused, suppressed, deleted: gone from the answer and from the snapshot.
    _set(top, lifecycle="paused")
    assert str(top.entry_id) not in _agrees(request, member)
    assert top.revision_id not in snap.slot
    second = MemoryEntry.objects.get(entry_id=first[1])
    _set(second, suppression_reason="user-pause", suppression_started_at=NOW - timedelta(days=1))
    assert str(second.entry_id) not in _agrees(request, member)
    third = MemoryEntry.objects.get(entry_id=first[2])
    MemoryEntry.objects.filter(pk=third.pk).delete()
    assert str(third.entry_id) not in _agrees(request, member)
    assert third.revision_id not in snap.slot

    # A new row and a usage bump: ranked from what the table holds now.
    MemoryEntry.objects.bulk_create([_profile_row(member, 500, "a note", NOW, reference_count=10)])
    assert _agrees(request, member)[0] == str(uuid.UUID(int=501))
    before = _agrees(request, member)
    old = next(r for r in reversed(rows) if str(r.entry_id) not in before + first[:3])
    _set(old, reference_count=10, last_referenced_at=NOW, origin="user-stated")
    assert str(old.entry_id) in _agrees(request, member)
    assert snap.floats["refs"][snap.slot[old.revision_id]] == 1.0
    assert _snapshot_of(member) is snap  # caught up, never rebuilt

    # More than half the slots dead: the snapshot packs its rows and still agrees.
    paused = [r for r in rows if str(r.entry_id) not in first[:3]][:25]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_memoryentry SET lifecycle = 'paused' WHERE revision_id = ANY(%s)",
            [[r.revision_id for r in paused]],
        )
    assert not set(_agrees(request, member)) & {str(r.entry_id) for r in paused}
    assert len(snap.slot) == 41 - 2 - 25  # the new row in; one paused, one deleted before
    assert snap.size < 41 and snap.dead * 2 <= snap.size  # packed on the way
    assert all(r.revision_id not in snap.slot for r in paused)


def _census_by_revision(
    snap: recall_snapshot.Snapshot,
    request: recall.RecallRequest,
    adapter_scopes: list[str] | None = None,
) -> Any:
    counts, winners, deduped = snap.census(request, snap.reachable(request, adapter_scopes))
    return counts, {snap.revisions[at] for at in winners.nonzero()[0].tolist()}, deduped


@pytest.mark.django_db
@_generated(40)
def test_a_kept_snapshot_counts_what_a_fresh_one_counts(member, data) -> None:
    # Between recalls a snapshot keeps its reachable rows, its census's grouping and its
    # dedupe winners. Across usage bumps, changed gate facts and suppressions that end
    # with time, it must count what a snapshot built from the same rows counts.
    draw = data.draw
    with transaction.atomic():
        count = draw(st.integers(1, 30))
        MemoryEntry.objects.bulk_create([_row(member, draw, i) for i in range(count)])
        kept = recall_snapshot.Snapshot("lexical")
        with connection.cursor() as cursor:
            cursor.execute(*recall_snapshot._rows_sql(member, kept, "is_current"))
            rows = [list(r) for r in cursor.fetchall()]
        kept.fill(rows)
        hour = 3600.0
        moments = [NOW.timestamp() + h * hour for h in (-30, -1, 0, 1, 30)]
        for _ in range(draw(st.integers(1, 15))):
            step = draw(st.sampled_from(["ask", "usage", "suppress", "suppress", "key", "lift"]))
            if step == "ask":
                # The same question at moments on either side of a suppression's end.
                asked = _request(member, draw)
                scopes = draw(st.sampled_from([None, ["assistant_profile"], ["session"]]))
                hours = draw(st.lists(st.sampled_from([-2, 0, 0.5, 1, 2, 48]), min_size=1))
                for later in hours:
                    request = replace(asked, now=NOW + timedelta(hours=later))
                    fresh = recall_snapshot.Snapshot("lexical")
                    fresh.fill(rows)
                    counted = _census_by_revision(kept, request, scopes)
                    assert counted == _census_by_revision(fresh, request, scopes)
                    # Asked again unchanged, the kept snapshot answers from what it kept.
                    reach = kept.reachable(request, scopes)
                    assert reach is kept.reachable(request, scopes)
                    if reach.mask.any():
                        winners = kept.census(request, reach)[1]
                        assert kept.census(request, reach)[1] is winners
                continue
            row = rows[draw(st.integers(0, len(rows) - 1))]
            if step == "usage":
                row[10] += 1
                row[11] = NOW.timestamp()
            elif step == "suppress":
                row[8], row[9] = "user-pause", draw(st.sampled_from([None, *moments]))
            elif step == "lift":
                row[8], row[9] = None, None
            else:
                row[6] = draw(st.sampled_from(["", "drink", "home"]))
                row[12] = draw(st.sampled_from(TIMES)).timestamp()
            kept.put(row[: recall_snapshot._WORDS_AT])
        transaction.set_rollback(True)


@pytest.mark.django_db
def test_a_snapshot_keeps_a_bounded_number_of_reaches(member) -> None:
    # One reach per scope asked: a member asking from many sessions between two writes
    # must not grow what the snapshot keeps without end.
    uid = str(member.public_id)
    sessions = 3 * recall_snapshot._GATE_MEMO_MAX
    rows = [_profile_row(member, i, "tea", NOW) for i in range(sessions)]
    for i, row in enumerate(rows):
        row.scope_kind, row.scope_key = "session", f"session:{uid}:s{i}"
        row.scope_identifiers = {"userId": uid, "sessionId": f"s{i}"}
        row.adapter_scope = "session"
    MemoryEntry.objects.bulk_create(rows)
    kept = recall_snapshot._build(member, "lexical", follow=False)
    request = _profile_request(member, "tea", "assistant")
    masks = set()
    for i in range(sessions):
        asked = replace(request, scope_kind="session", scope_key=f"session:{uid}:s{i}")
        reach = kept.reachable(asked, None)
        assert reach.mask.sum() == 1
        masks.add(reach.mask.tobytes())
        kept.census(asked, reach)
        assert len(kept._reaches) <= recall_snapshot._GATE_MEMO_MAX
    assert len(masks) == sessions


@pytest.mark.django_db(transaction=True)
def test_dedupe_follows_a_change_of_a_rows_key_or_time(require_postgres, member) -> None:
    # The snapshot keeps its rows sorted for dedupe between recalls; a change of a row's
    # conflict key or its time must reorder them, a usage bump need not.
    rows = [
        _profile_row(member, i, f"tea note {i}", NOW - timedelta(hours=i), subject=subject)
        for i, subject in enumerate(["drink", "home", "drink", "home", ""])
    ]
    MemoryEntry.objects.bulk_create(rows)
    request = _profile_request(member, "tea", "assistant")

    def agrees() -> Any:
        _agrees(request, member)
        cached = _census_by_revision(_snapshot_of(member), request)
        assert cached == _census_by_revision(
            recall_snapshot._build(member, "lexical", follow=False), request
        )
        return cached

    _, winners, _ = agrees()
    assert winners == {rows[0].revision_id, rows[1].revision_id, rows[4].revision_id}
    snap = _snapshot_of(member)
    kept = snap.keyed_by_recency()
    reach = snap.reachable(request, None)
    winners = snap.census(request, reach)[1]

    _set(rows[2], reference_count=9, last_referenced_at=NOW)  # usage only
    agrees()
    assert snap.keyed_by_recency() is kept
    assert snap.reachable(request, None) is reach
    assert snap.census(request, reach)[1] is winners

    _set(rows[2], updated_at=NOW + timedelta(hours=1))  # now the most recent "drink" row
    _, winners, _ = agrees()
    assert rows[2].revision_id in winners and rows[0].revision_id not in winners

    _set(rows[0], subject="home")  # "drink" keeps row 2, "home" gains row 0
    _, winners, deduped = agrees()
    assert winners == {rows[0].revision_id, rows[2].revision_id, rows[4].revision_id}
    assert deduped == 2
    assert _snapshot_of(member) is snap


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_that_missed_a_change_still_never_returns_the_row(
    require_postgres, member
) -> None:
    _coffee_rows(member, 20)
    request = _profile_request(member, "note", "assistant")
    top = _agrees(request, member)[0]
    # The change happens, but its note is lost: the snapshot still ranks the row first.
    _set(MemoryEntry.objects.get(entry_id=top), lifecycle="tombstoned")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_recallchange")
    fast = _cached(request, member)
    assert top not in fast.result.audit_envelope.returned_ids
    assert len(fast.result.entries) == 12  # the table's gates dropped it; the next filled in


def _second_connection() -> psycopg.Connection[Any]:
    """Another session on the test database, for a writer that is not this test's."""
    db = connection.settings_dict
    return psycopg.connect(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or 5432
    )


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_after_a_later_one_is_still_seen(require_postgres, member) -> None:
    rows = _coffee_rows(member, 20)
    request = _profile_request(member, "coffee", "assistant")
    _agrees(request, member)
    snap = _snapshot_of(member)
    target = rows[19]
    with _second_connection() as slow:
        # A transaction that started writing first commits last.
        slow.execute(
            "UPDATE memory_memoryentry SET reference_count = 9 WHERE revision_id = %s",
            [target.revision_id],
        )
        _set(rows[18], reference_count=7)
        _agrees(request, member)  # sees the second change; the first is not committed
        assert snap.floats["refs"][snap.slot[rows[18].revision_id]] == 0.7
        slow.commit()
    _agrees(request, member)
    assert snap.floats["refs"][snap.slot[target.revision_id]] == 0.9


@pytest.mark.django_db(transaction=True)
def test_a_writer_left_open_costs_each_look_only_its_own_changes(require_postgres, member) -> None:
    rows = _coffee_rows(member, 10)
    _agrees(_profile_request(member, "coffee", "assistant"), member)
    snap = _snapshot_of(member)
    with _second_connection() as slow:
        slow.execute(
            "UPDATE memory_memoryentry SET reference_count = 9 WHERE revision_id = %s",
            [rows[9].revision_id],
        )
        for i in range(3):
            _set(rows[i], reference_count=5)
            # This change alone: not every change since the open writer began.
            assert recall_snapshot._catch_up(member, snap)[0] == 1
        assert recall_snapshot._catch_up(member, snap)[0] == 0
        slow.commit()
    assert recall_snapshot._catch_up(member, snap)[0] == 1  # the writer's, once it committed
    assert snap.floats["refs"][snap.slot[rows[9].revision_id]] == 0.9
    assert recall_snapshot._catch_up(member, snap)[0] == 0


@pytest.mark.django_db(transaction=True)
def test_the_change_log_names_rows_and_nothing_of_their_text(require_postgres, member) -> None:
    rows = _coffee_rows(member, 3)
    _set(rows[0], reference_count=4)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'memory_recallchange' ORDER BY ordinal_position"
        )
        assert [r[0] for r in cursor.fetchall()] == [
            "id",
            "member_id",
            "revision_id",
            "xid",
            "noted_at",
            "reference_count",  # a usage bump's new counters: numbers, never text
            "anchor",
        ]
        cursor.execute(
            "SELECT member_id, revision_id FROM memory_recallchange WHERE member_id = %s "
            "ORDER BY id",
            [member.pk],
        )
        noted = cursor.fetchall()
    assert noted == [(member.pk, r.revision_id) for r in rows] + [(member.pk, rows[0].revision_id)]


def _last_note(row: MemoryEntry) -> tuple[Any, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reference_count, anchor FROM memory_recallchange WHERE revision_id = %s "
            "ORDER BY id DESC LIMIT 1",
            [row.revision_id],
        )
        return cursor.fetchone()


# (what an UPDATE sets, whether its note carries the new counters)
USAGE_NOTES = [
    ({"reference_count": 7}, True),
    ({"reference_count": 7, "last_referenced_at": NOW}, True),
    ({"last_referenced_at": None}, True),
    ({"retention_review_flagged_at": NOW}, True),  # nothing a snapshot reads
    ({"reference_count": 7, "lifecycle": "paused"}, False),
    ({"lifecycle": "paused"}, False),
    ({"sensitive_interaction": True}, False),
    ({"reference_count": 7, "origin": "model-inferred"}, False),
    ({"suppression_reason": "user-pause", "suppression_started_at": NOW}, False),
    ({"subject": "drink"}, False),
    ({"category": "medical"}, False),
    ({"updated_at": NOW - timedelta(days=9)}, False),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("columns", "usage_only"), USAGE_NOTES)
def test_a_note_carries_the_counters_only_when_nothing_else_a_snapshot_reads_changed(
    require_postgres, member, columns, usage_only
) -> None:
    [row] = _coffee_rows(member, 1)
    _set(row, **columns)
    stored = MemoryEntry.objects.get(pk=row.pk)
    anchor = (stored.last_referenced_at or stored.updated_at).timestamp()
    if usage_only:
        assert _last_note(row) == (stored.reference_count, pytest.approx(anchor, abs=1e-6))
    else:
        assert _last_note(row) == (None, None)


@pytest.mark.django_db(transaction=True)
def test_a_catch_up_takes_a_bump_from_its_note_without_reading_the_row(
    require_postgres, member
) -> None:
    rows = _coffee_rows(member, 12)
    request = _profile_request(member, "note", "assistant")
    _agrees(request, member)
    snap = _snapshot_of(member)
    for i, row in enumerate(rows[:6]):
        _set(row, reference_count=20 + i, last_referenced_at=NOW - timedelta(minutes=i))
    _set(rows[0], reference_count=3)  # two bumps of one row: the newest counts
    read: list[Any] = []
    original = snap.put
    with mock.patch.object(
        snap, "put", side_effect=lambda *a, **k: (read.append(a), original(*a, **k))
    ):
        assert recall_snapshot._catch_up(member, snap)[0] == 6
    assert read == []
    assert _rows_of(snap) == _rows_of(recall_snapshot._build(member, "lexical", follow=False))
    assert snap.floats["refs"][snap.slot[rows[0].revision_id]] == 0.3
    _agrees(request, member)


@pytest.mark.django_db(transaction=True)
def test_a_bump_and_another_change_of_one_row_read_the_row(require_postgres, member) -> None:
    rows = _coffee_rows(member, 6)
    request = _profile_request(member, "note", "assistant")
    _agrees(request, member)
    snap = _snapshot_of(member)
    _set(rows[1], reference_count=9)
    _set(rows[1], lifecycle="paused")
    _set(rows[2], lifecycle="paused")
    _set(rows[2], lifecycle="active")
    _set(rows[2], reference_count=8)
    MemoryEntry.objects.filter(pk=rows[3].pk).update(reference_count=5)
    MemoryEntry.objects.filter(pk=rows[3].pk).delete()
    recall_snapshot._catch_up(member, snap)
    assert rows[1].revision_id not in snap.slot
    assert rows[3].revision_id not in snap.slot
    assert snap.floats["refs"][snap.slot[rows[2].revision_id]] == 0.8
    assert _rows_of(snap) == _rows_of(recall_snapshot._build(member, "lexical", follow=False))
    _agrees(request, member)


@pytest.mark.django_db(transaction=True)
def test_a_bump_of_a_row_the_snapshot_has_not_seen_reads_it_whole(require_postgres, member) -> None:
    _coffee_rows(member, 3)
    request = _profile_request(member, "note", "assistant")
    _agrees(request, member)
    snap = _snapshot_of(member)
    [late] = MemoryEntry.objects.bulk_create([_profile_row(member, 900, "a late note", NOW)])
    snap.drop(late.revision_id)  # as if its insert had been missed: only the bump is noted
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_recallchange WHERE revision_id = %s", [late.revision_id])
    _set(late, reference_count=4)
    recall_snapshot._catch_up(member, snap)
    assert late.revision_id in snap.slot and snap.words_at(snap.slot[late.revision_id])
    assert _rows_of(snap) == _rows_of(recall_snapshot._build(member, "lexical", follow=False))


@pytest.mark.django_db(transaction=True)
def test_old_changes_are_pruned_and_recent_ones_kept(require_postgres, member, settings) -> None:
    from iris_site.beat import BEAT_SCHEDULE
    from memory.tasks import prune_recall_changes

    settings.IRIS_RECALL_CHANGES_KEEP_SECONDS = 1200
    settings.IRIS_RECALL_SNAPSHOT_SECONDS = 600
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_recallchange")  # not a model: flush leaves it
    rows = _coffee_rows(member, 4)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_recallchange SET noted_at = now() - interval '2 hours' "
            "WHERE revision_id = ANY(%s)",
            [[r.revision_id for r in rows[:3]]],
        )
    assert prune_recall_changes.delay(batch=2, batches=1).get() == {"deleted": 2}
    assert prune_recall_changes.delay().get() == {"deleted": 1}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT revision_id FROM memory_recallchange WHERE member_id = %s", [member.pk]
        )
        assert cursor.fetchall() == [(rows[3].revision_id,)]
    assert BEAT_SCHEDULE["memory-recall-changes"]["task"] == prune_recall_changes.name


@pytest.mark.django_db(transaction=True)
def test_a_worker_holds_snapshots_up_to_its_row_budget(
    require_postgres, member, other_member, settings
) -> None:
    settings.IRIS_RECALL_SNAPSHOT_ROWS = 30
    _coffee_rows(member, 20)
    MemoryEntry.objects.bulk_create(
        [_profile_row(other_member, 100 + i, f"coffee {i}", NOW) for i in range(20)]
    )
    _agrees(_profile_request(member, "coffee", "assistant"), member)
    _agrees(_profile_request(other_member, "coffee", "assistant"), other_member)
    held = [key[2] for key in recall_snapshot._CACHE]
    assert held == [other_member.pk]


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_is_rebuilt_when_old_and_dropped_when_idle(
    require_postgres, member, other_member, settings
) -> None:
    _coffee_rows(member, 5)
    request = _profile_request(member, "coffee", "assistant")
    _agrees(request, member)
    first = _snapshot_of(member)
    _agrees(request, member)
    assert _snapshot_of(member) is first
    settings.IRIS_RECALL_SNAPSHOT_SECONDS = 0
    _agrees(request, member)
    assert _snapshot_of(member) is not first
    # Another member's recall drops the snapshot no recall has used for its lifetime.
    _agrees(_profile_request(other_member, "coffee", "assistant"), other_member)
    assert [key[2] for key in recall_snapshot._CACHE] == [other_member.pk]


@pytest.mark.django_db
def test_no_snapshot_is_kept_inside_a_transaction(member) -> None:
    # Rows a transaction has not committed must not outlive its rollback in a worker.
    assert connection.in_atomic_block
    assert not recall_snapshot.usable()


@pytest.mark.django_db(transaction=True)
def test_a_vector_stored_later_reaches_the_snapshot(require_postgres, member) -> None:
    import numpy as np

    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    rows = _coffee_rows(member, 6)
    request = _profile_request(member, "coffee", "assistant")
    first = _cached(request, member, "hybrid")
    snap = _snapshot_of(member, "hybrid")
    assert not snap.has_vector[: snap.size].any()
    # A backfill stores the vectors after the snapshot was built: the trigger notes them.
    generator = np.random.default_rng(7)
    vectors = {}
    for r in rows:
        v = generator.standard_normal(embedding.DIMENSION).astype(np.float32)
        vectors[str(r.entry_id)] = embedding.to_bytes(v / np.linalg.norm(v))
    _store_vectors(member, rows, vectors)
    fast = _cached(request, member, "hybrid")
    assert snap.has_vector[: snap.size].all()
    full = _exhaustive(request, member, "hybrid", fast, vectors=vectors)
    assert _entries(fast.result) == _entries(full)
    assert _entries(fast.result) != _entries(first.result)  # ranked by the stored vectors


_CHANGES = ["insert", "lifecycle", "suppress", "unsuppress", "usage", "delete", "key", "time"]


@pytest.mark.django_db(transaction=True)
@_generated(15)
def test_a_cached_snapshot_agrees_after_any_sequence_of_changes(
    require_postgres, member, data
) -> None:
    draw = data.draw
    MemoryEntry.objects.filter(member=member).delete()  # committed rows of earlier examples
    recall_snapshot.clear()
    rows = [_row(member, draw, i) for i in range(draw(st.integers(0, 30)))]
    MemoryEntry.objects.bulk_create(rows)
    request = _request(member, draw)
    name = draw(st.sampled_from(RANKERS))

    def agrees() -> None:
        # A small first read, so that a wrong ranking would show in the answer.
        fast = recall_snapshot.resolve_cached(
            request,
            member=member,
            ranker_name=name,
            prepare=semantic.semantic_for(name),
            first_read=draw(st.integers(1, 3)),
        )
        full = _exhaustive(request, member, name, fast)
        assert _entries(fast.result) == _entries(full)
        # The dedupe count follows each change of a row's conflict key or time.
        assert fast.result.audit_envelope == full.audit_envelope
        assert _rows_of(_snapshot_of(member, name)) == _rows_of(
            recall_snapshot._build(member, name, follow=False)
        )

    agrees()
    snap = _snapshot_of(member, name)
    for step in range(draw(st.integers(1, 5))):
        change = draw(st.sampled_from(_CHANGES))
        live = list(MemoryEntry.objects.filter(member=member))
        if change == "insert" or not live:
            MemoryEntry.objects.bulk_create([_row(member, draw, 100 + step)])
        elif change == "delete":
            MemoryEntry.objects.filter(pk=draw(st.sampled_from(live)).pk).delete()
        else:
            row = draw(st.sampled_from(live))
            _set(row, **_change(change, draw))
        agrees()
    assert _snapshot_of(member, name) is snap  # every change was caught up, never rebuilt


@pytest.mark.django_db
@pytest.mark.parametrize("name", RANKERS)
def test_a_row_without_stored_words_is_tokenised_from_its_body(member, name) -> None:
    """A row written before `recall_words` existed (or copied in by hand) holds null: the
    snapshot tokenises its body, and holds what it would have read."""
    rows = _coffee_rows(member, 9)
    stored = recall_snapshot._build(member, name, follow=False)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_memoryentry SET recall_words = NULL WHERE entry_id IN (%s, %s, %s)",
            [
                r.entry_id if connection.vendor == "postgresql" else r.entry_id.hex
                for r in rows[::3]
            ],
        )
    assert MemoryEntry.objects.filter(recall_words__isnull=True).count() == 3
    assert _rows_of(recall_snapshot._build(member, name, follow=False)) == _rows_of(stored)


@pytest.mark.django_db
@pytest.mark.parametrize("name", RANKERS)
def test_a_snapshot_of_rows_without_a_word_holds_them_with_no_postings(member, name) -> None:
    # Stop words only for BM25; words of two letters only for Jaccard.
    MemoryEntry.objects.bulk_create(
        [_profile_row(member, i, "it is as of", NOW - timedelta(hours=i)) for i in range(3)]
    )
    snap = recall_snapshot._build(member, name, follow=False)
    assert snap.size == 3 and not snap.postings
    assert [snap.words_at(at) for at in range(3)] == [(), (), ()]
    assert set(snap.floats["length"][:3]) == {0.0}


def _rows_of(snap: recall_snapshot.Snapshot) -> dict[uuid.UUID, tuple[Any, ...]]:
    """What a snapshot holds about each live row, codes spelled out."""
    name = {code: text for text, code in snap.codes.items()}
    return {
        revision: (
            snap.entry_ids[at],
            _counts_at(snap, at),
            *(name.get(int(snap.ints[k][at])) for k in ("scope", "adapter", "category", "cluster")),
            *(float(snap.floats[k][at]) for k in sorted(snap.floats)),
        )
        for revision, at in snap.slot.items()
    }


def _counts_at(snap: recall_snapshot.Snapshot, at: int) -> tuple[tuple[str, float], ...]:
    """The row's words with their counts, as the snapshot's postings hold them."""
    out = []
    for word in snap.words_at(at):
        slots, counts = snap.posting(word)
        out.append((word, float(counts[slots == at][0])))
    return tuple(sorted(out))


def _change(change: str, draw: Any) -> dict[str, Any]:
    if change == "lifecycle":
        return {"lifecycle": draw(st.sampled_from(["active", "paused", "draft"]))}
    if change == "suppress":
        ends = draw(st.sampled_from([None, NOW - timedelta(hours=1), NOW + timedelta(days=1)]))
        return {
            "suppression_reason": "user-pause",
            "suppression_started_at": NOW - timedelta(days=1),
            "suppression_ends_at": ends,
        }
    if change == "unsuppress":
        return {
            "suppression_reason": None,
            "suppression_started_at": None,
            "suppression_ends_at": None,
        }
    if change == "key":
        return {
            "subject": draw(st.sampled_from(["", "drink", "home"])),
            "category": draw(st.sampled_from(["preference", "medical"])),
        }
    if change == "time":
        return {"updated_at": draw(st.sampled_from(TIMES))}
    return {
        "reference_count": draw(st.integers(0, 12)),
        "last_referenced_at": draw(st.sampled_from([None, NOW, NOW - timedelta(days=3)])),
    }


@pytest.mark.django_db
def test_doctor_names_a_disabled_change_log_trigger(require_postgres, capsys) -> None:
    from django.core.management import CommandError, call_command

    assert recall_snapshot.missing_triggers() == []
    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute("ALTER TABLE memory_memoryentry DISABLE TRIGGER memory_entry_updated")
    assert recall_snapshot.missing_triggers() == ["memory_entry_updated"]
    with pytest.raises(CommandError, match="recall change log"):
        call_command("doctor")
    assert "triggers missing or disabled: memory_entry_updated" in capsys.readouterr().out


@pytest.mark.django_db
def test_migrate_is_not_refused_while_the_triggers_are_still_to_be_installed(
    require_postgres, monkeypatch
) -> None:
    # `migrate` runs the system checks on the database it migrates; on a fresh database the
    # change log's triggers are missing because the pending migrations install them.
    from memory import checks as memory_checks

    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute("ALTER TABLE memory_memoryentry DISABLE TRIGGER memory_entry_updated")
    assert memory_checks.recall_change_log(databases=["default"])  # migrated: a fault

    monkeypatch.setattr(memory_checks, "_migrations_pending", lambda: True)
    assert memory_checks.recall_change_log(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
def test_the_catch_up_is_planned_once_per_session(require_postgres, member) -> None:
    # PostgreSQL would plan it anew at every look (its generic plan looks dear to the
    # estimates); the look asks for the generic plan, and leaves the session as it was.
    _coffee_rows(member, 30)
    request = _profile_request(member, "coffee note", "assistant")
    before = _planning()
    for _ in range(8):
        _agrees(request, member)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["%pg_snapshot_xmax(pg_current_snapshot())%memory_recallchange%"],
        )
        plans = cursor.fetchall()
    assert _planning() == before
    assert plans, "the catch-up was never prepared"
    assert all(custom == 0 and generic > 0 for generic, custom in plans), plans


_PLANNING = ("plan_cache_mode", "max_parallel_workers_per_gather", "enable_seqscan")


def _planning() -> tuple[str, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join("current_setting(%s)" for _ in _PLANNING), list(_PLANNING)
        )
        return tuple(cursor.fetchone())


@pytest.mark.django_db(transaction=True)
def test_a_statement_planned_once_is_kept_to_index_scans_and_the_session_is_put_back(
    require_postgres,
) -> None:
    from governance import plainsql

    before = _planning()
    inside = plainsql.rows_planned_once(
        "SELECT " + ", ".join("current_setting(%s)" for _ in _PLANNING), list(_PLANNING)
    )
    # Generic, and never a parallel or whole-table scan: a generic plan's guess at a
    # range picked both on a large change log.
    assert inside == [("force_generic_plan", "0", "off")]
    assert _planning() == before


@pytest.mark.django_db(transaction=True)
def test_a_statement_planned_once_that_fails_leaves_the_session_as_it_was(
    require_postgres,
) -> None:
    from django.db import DataError

    from governance import plainsql

    before = _planning()
    assert plainsql.rows_planned_once("SELECT %s::int + 1", [1]) == [(2,)]
    with pytest.raises(DataError), transaction.atomic():
        plainsql.rows_planned_once("SELECT 1 / %s::int", [0])
    assert _planning() == before
    assert plainsql.rows_planned_once("SELECT %s::int + 1", [2]) == [(3,)]
