"""BM25's collection statistics held per process (recall_db._stats_for): one count per
period, per gate signature, per term; the answer still equals the reference pipeline's
with the same statistics."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import MemoryEntry
from memory.recall import db as recall_db
from memory.recall.ranking import semantic
from tests.memory.test_recall_fast_path import NOW, _entries, _profile_request, _profile_row

pytestmark = pytest.mark.django_db

TOTALS = "SELECT (SELECT COUNT(*) FROM memory_memoryentry WHERE"
TERMS_ONLY = "SELECT (SELECT COUNT(*) FROM (SELECT * FROM memory_memoryentry WHERE string_to"


class Clock:
    def __init__(self) -> None:
        self.at = 1000.0

    def __call__(self) -> float:
        return self.at


@pytest.fixture
def clock(settings, monkeypatch) -> Clock:
    settings.IRIS_RECALL_STATS_SECONDS = 30
    monkeypatch.setattr(recall_db, "_STATS_CACHE", {})
    fake = Clock()
    monkeypatch.setattr(recall_db, "_clock", fake)
    return fake


def _rows(member, start: int, count: int) -> None:
    MemoryEntry.objects.bulk_create(
        _profile_row(
            member,
            i,
            f"note {i} about " + ("coffee" if i % 3 == 0 else "tea" if i % 3 == 1 else "rain"),
            NOW - timedelta(hours=i),
        )
        for i in range(start, start + count)
    )


def _recall(member, query: str, surface: str = "assistant", scopes=None):
    request = _profile_request(member, query, surface)
    prepare = semantic.semantic_for("lexical")
    with CaptureQueriesContext(connection) as seen:
        fast = recall_db.fast_resolve(
            request, member=member, ranker_name="lexical", prepare=prepare, adapter_scopes=scopes
        )
    stats = [q["sql"] for q in seen.captured_queries if q["sql"].startswith("SELECT (SELECT")]
    return request, prepare, fast, stats


def test_a_second_recall_within_the_period_counts_nothing(require_postgres, member, clock) -> None:
    _rows(member, 0, 30)
    _, _, first, stats = _recall(member, "coffee")
    assert len(stats) == 1 and stats[0].startswith(TOTALS)
    assert first.corpus.document_count == 30
    assert list(first.corpus.document_frequency.values()) == [10]
    _, _, second, stats = _recall(member, "coffee")
    assert stats == []
    assert second.corpus == first.corpus


def test_a_new_term_is_counted_alone_and_the_period_ends(require_postgres, member, clock) -> None:
    _rows(member, 0, 30)
    _recall(member, "coffee")
    _, _, fast, stats = _recall(member, "coffee tea")
    assert len(stats) == 1 and stats[0].startswith(TERMS_ONLY)  # tea's rows, not the totals
    assert sorted(fast.corpus.document_frequency.values()) == [10, 10]
    _rows(member, 30, 6)  # two more of each word
    _, _, held, stats = _recall(member, "coffee tea")
    assert stats == [] and held.corpus.document_count == 30  # the snapshot, for 30 s
    clock.at += 31
    _, _, fresh, stats = _recall(member, "coffee tea")
    assert len(stats) == 1 and stats[0].startswith(TOTALS)
    assert fresh.corpus.document_count == 36
    assert sorted(fresh.corpus.document_frequency.values()) == [12, 12]


def test_other_gates_have_their_own_counts(require_postgres, member, clock) -> None:
    _rows(member, 0, 12)
    _, _, everyone, _ = _recall(member, "coffee", scopes=["assistant_profile"])
    _, _, nobody, stats = _recall(member, "coffee", scopes=["notebook"])
    assert len(stats) == 1  # counted for these gates, not taken from the other's
    assert everyone.corpus.document_count == 12
    assert nobody is not None and nobody.corpus.document_count == 0


def test_a_stale_snapshot_still_ranks_as_the_reference_does(
    require_postgres, member, clock
) -> None:
    _rows(member, 0, 40)
    _recall(member, "coffee rain")
    _rows(member, 40, 20)
    request, prepare, fast, stats = _recall(member, "coffee rain")
    assert stats == []
    full = recall_db.exhaustive_resolve(
        request, member=member, ranker_name="lexical", prepare=prepare, corpus=fast.corpus
    )
    assert _entries(fast.result) == _entries(full)


def test_a_period_of_zero_counts_every_time(require_postgres, member, clock, settings) -> None:
    settings.IRIS_RECALL_STATS_SECONDS = 0
    _rows(member, 0, 9)
    assert len(_recall(member, "coffee")[3]) == 1
    assert len(_recall(member, "coffee")[3]) == 1
    assert recall_db._STATS_CACHE == {}  # noqa: SLF001


def test_a_full_snapshot_is_emptied_without_losing_what_this_recall_held(
    require_postgres, member, clock, monkeypatch
) -> None:
    monkeypatch.setattr(recall_db, "STATS_CACHE_MAX", 2)
    _rows(member, 0, 30)
    _recall(member, "coffee")  # the totals and coffee's count: full
    _, _, fast, stats = _recall(member, "coffee tea")  # tea is counted, the snapshot emptied
    assert len(stats) == 1 and stats[0].startswith(TERMS_ONLY)
    assert fast.corpus.document_count == 30
    assert sorted(fast.corpus.document_frequency.values()) == [10, 10]
