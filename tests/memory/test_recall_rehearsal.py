"""A worker rehearses recall once before its first recall is asked of it: the reads as a
recall runs them, the bookkeeping in a savepoint rolled back. It answers no one and leaves
nothing behind (docs/decisions/recall.md, "A worker's first recall, rehearsed").

It needs committed rows and the change log, so these run on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from psycopg.pq import TransactionStatus

from events.models import Event
from governance.models import AuditEvent
from memory.models import MemoryEntry
from memory.recall import service as recall_service
from memory.recall.models import RecallEvent
from tests.factories import payload

pytestmark = [pytest.mark.django_db(transaction=True)]

BODIES = (
    ("I drink oolong tea in the morning", "tea"),
    ("I cycle to work along the river", "commute"),
    ("I keep bees on the roof", "bees"),
)


@pytest.fixture(autouse=True)
def _snapshots(settings):
    settings.IRIS_RECALL_SNAPSHOT = True
    settings.IRIS_RECALL_SEMANTIC = "lexical"


def _write(surface_api: Any, member: Any, body: str, subject: str) -> None:
    response = surface_api.post(
        "/api/v1/memories", payload(member, body=body, subject=subject), format="json"
    )
    assert response.status_code == 201, response.content


def _state(member: Any) -> dict[str, Any]:
    """Everything a recall writes: its audit event and outbox row, the history, the usage
    counters, the change log's notes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_recallchange WHERE member_id = %s", [member.pk])
        notes = cursor.fetchone()[0]
    return {
        "audit": list(AuditEvent.objects.order_by("seq").values_list("seq", "action")),
        "outbox": Event.objects.count(),
        "history": RecallEvent.objects.filter(member=member).count(),
        "usage": sorted(
            MemoryEntry.objects.filter(member=member).values_list(
                "revision_id", "reference_count", "last_referenced_at"
            )
        ),
        "notes": notes,
    }


def test_a_rehearsal_runs_once_and_leaves_nothing_behind(
    require_postgres, ready, surface_api, monkeypatch
) -> None:
    for body, subject in BODIES:
        _write(surface_api, ready, body, subject)
    before = _state(ready)
    recorded: list[list[Any]] = []
    record = recall_service._record

    def recording(**kwargs: Any) -> None:
        recorded.append(list(kwargs["result"].audit_envelope.returned_ids))
        record(**kwargs)

    monkeypatch.setattr(recall_service, "_record", recording)
    recall_service._REHEARSED.clear()
    assert recall_service.rehearse(ready) is True
    # The record (audit event, usage, history) ran, twice, for what the rehearsed recall
    # returned...
    assert len(recorded) == 2 and recorded[0] == recorded[1] and recorded[0]
    # ...and nothing of it stayed.
    assert _state(ready) == before
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert recall_service.rehearse(ready) is False  # once per process
    assert len(recorded) == 2


def test_a_rehearsal_leaves_recalls_statements_prepared(
    require_postgres, ready, surface_api
) -> None:
    for body, subject in BODIES:
        _write(surface_api, ready, body, subject)
    recall_service._REHEARSED.clear()
    assert recall_service.rehearse(ready) is True
    # The reads ran twice after the savepoint's rollback (which makes the driver forget
    # what it prepared), so they stay prepared for the first recall.
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("FROM consent_consentevent" in s for s in prepared)  # the ledger
    assert any("memory_recallchange" in s for s in prepared)  # the snapshot's catch-up
    assert any(") AS wanted WHERE" in s for s in prepared)  # the rows read back


def test_a_workers_first_write_rehearses_after_its_answer(
    require_postgres, ready, surface_api, monkeypatch
) -> None:
    rehearsed: list[int] = []
    rehearse = recall_service.rehearse

    def counting(member: Any) -> bool:
        rehearsed.append(member.pk)
        return rehearse(member)

    monkeypatch.setattr(recall_service, "rehearse", counting)
    recall_service._REHEARSED.clear()
    _write(surface_api, ready, *BODIES[0])
    assert rehearsed == [ready.pk] and recall_service._REHEARSED == [True]
    _write(surface_api, ready, *BODIES[1])
    assert rehearsed == [ready.pk]
    assert RecallEvent.objects.count() == 0
    assert not AuditEvent.objects.filter(action=recall_service.AUDIT_ACTION).exists()


def test_without_snapshots_a_write_rehearses_nothing(
    require_postgres, ready, surface_api, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_SNAPSHOT = False
    rehearsed: list[int] = []
    monkeypatch.setattr(recall_service, "_rehearse_member", rehearsed.append)
    recall_service._REHEARSED.clear()
    _write(surface_api, ready, *BODIES[0])
    assert rehearsed == [] and recall_service._REHEARSED == []


def test_a_change_outside_a_request_rehearses_nothing(require_postgres, ready) -> None:
    from memory.services import memory_write
    from tests.factories import as_member, draft

    recall_service._REHEARSED.clear()
    memory_write(principal=as_member(ready), member=ready, draft=draft(ready, "I like figs"))
    assert recall_service._REHEARSED == []


def test_the_latest_active_member_is_rehearsed(
    require_postgres, ready, other_member, surface_api, monkeypatch
) -> None:
    from tests.factories import grant_storage

    grant_storage(other_member)
    recall_service._REHEARSED.clear()
    assert recall_service.rehearse_latest() is False  # nothing in the change log yet
    _write(surface_api, ready, *BODIES[0])
    _write(surface_api, other_member, *BODIES[1])
    recall_service._REHEARSED.clear()
    chosen: list[int] = []
    monkeypatch.setattr(recall_service, "rehearse", lambda member: chosen.append(member.pk) or True)
    assert recall_service.rehearse_latest() is True
    assert chosen == [other_member.pk]


@pytest.mark.parametrize(("threshold", "runs"), [(2, 3), (0, 1), (5, 6), (None, 0)])
def test_prepared_after_follows_the_connections_threshold(
    require_postgres, threshold: int | None, runs: int
) -> None:
    # The rehearsal's reads run as often as the driver needs to prepare them, read off
    # the live connection; a driver that never prepares needs no extra run.
    connection.ensure_connection()
    raw = connection.connection
    kept = raw.prepare_threshold
    raw.prepare_threshold = threshold
    try:
        assert recall_service.prepared_after() == runs
    finally:
        raw.prepare_threshold = kept


def test_the_settings_prepare_at_the_third_run(require_postgres) -> None:
    assert recall_service.prepared_after() == 3
