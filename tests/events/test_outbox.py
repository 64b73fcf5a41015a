"""The outbox: each change writes its event in its own transaction; cursors follow commit
order per tenant; nothing but ids and codes is kept."""

from __future__ import annotations

import pytest
from django.db import transaction

from dsar.services import data_rights_open
from events.models import Event
from events.outbox import publish_pending
from memory.services import memory_forget
from tests.factories import as_member, grant, written

SECRETISH_BODY = "My sister Maud is expecting twins in March"
SUBJECT = "maud-twins"

pytestmark = pytest.mark.django_db


def _events(tenant_id, event_type: str | None = None) -> list[Event]:
    rows = Event.objects.filter(tenant_id=tenant_id).order_by("seq")
    return list(rows.filter(type=event_type) if event_type else rows)


def test_a_memory_write_emits_memory_written_with_ids_only(ready) -> None:
    entry = written(ready, SECRETISH_BODY, subject=SUBJECT)
    [event] = _events(ready.tenant_id, "memory.written")
    assert event.member_id == ready.public_id
    assert event.data["entryId"] == str(entry.entry_id)
    assert event.data["revisionId"] == str(entry.revision_id)
    assert event.cursor is None  # published after commit
    assert SECRETISH_BODY not in str(event.data) and SUBJECT not in str(event.data)


def test_forget_and_consent_emit_their_events(ready) -> None:
    entry = written(ready, SECRETISH_BODY)
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    [forgotten] = _events(ready.tenant_id, "memory.forgotten")
    assert forgotten.data["entryId"] == str(entry.entry_id)
    assert forgotten.data["change"] == "soft"
    consent = _events(ready.tenant_id, "consent.changed")
    assert {e.data["consentType"] for e in consent} == {"data_processing", "data_storage"}
    assert {e.data["status"] for e in consent} == {"granted"}


def test_a_data_rights_request_emits_submitted_and_its_transition(ready) -> None:
    request = data_rights_open(principal=as_member(ready), member=ready, kind="access")
    [submitted] = _events(ready.tenant_id, "data_rights.submitted")
    assert submitted.data == {"change": "submitted", "requestId": str(request.id), "kind": "access"}
    moves = [e.data["to"] for e in _events(ready.tenant_id, "data_rights.transitioned")]
    assert moves[0] == "verified"


def test_a_rolled_back_change_emits_nothing(ready) -> None:
    before = Event.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        written(ready, SECRETISH_BODY)
        assert Event.objects.count() > before  # written inside the change's transaction
        raise RuntimeError("the change fails after its write")
    assert Event.objects.count() == before


def test_the_event_rows_ride_on_the_audit_events_insert(ready, django_assert_num_queries) -> None:
    # On PostgreSQL one statement writes the audit events and the outbox rows derived from
    # them; elsewhere each table has its own INSERT.
    from django.db import connection

    from governance.actions import AuditAction
    from governance.audit import Actor, audit_record_many

    actor = Actor.system()
    records = [
        {
            "actor": actor,
            "action": AuditAction.DSAR_REQUEST_SUBMITTED,
            "tenant_id": ready.tenant_id,
            "subject_ids": [str(ready.public_id)],
            "payload": {"requestId": f"r-{i}", "kind": "access"},
        }
        for i in range(2)
    ]
    statements = 1 if connection.vendor == "postgresql" else 2
    with transaction.atomic():
        with django_assert_num_queries(statements):
            events = audit_record_many(records)
        assert all(e.seq for e in events)  # the audit events' keys are read back
    rows = _events(ready.tenant_id, "data_rights.submitted")
    assert sorted(r.data["requestId"] for r in rows) == ["r-0", "r-1"]
    assert {r.audit_event_id for r in rows} == {e.id for e in events}


def test_cursors_count_up_per_tenant_in_publish_order(ready, foreign_member) -> None:
    grant(foreign_member, "data_processing")
    written(ready, "I like green tea")
    written(ready, "I live in Lisbon", category="fact")
    assert publish_pending() >= 3
    mine = [e.cursor for e in _events(ready.tenant_id)]
    theirs = [e.cursor for e in _events(foreign_member.tenant_id)]
    assert mine == list(range(1, len(mine) + 1))
    assert theirs == list(range(1, len(theirs) + 1))
    grant(ready, "cross_device")
    assert publish_pending() == 1
    assert _events(ready.tenant_id)[-1].cursor == len(mine) + 1
    assert publish_pending() == 0  # nothing twice


def test_a_broker_that_is_down_does_not_fail_the_committed_change(
    ready, monkeypatch, django_capture_on_commit_callbacks, caplog
) -> None:
    from events import outbox
    from events.tasks import dispatch

    def down() -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(outbox, "_has_endpoints", lambda tenant_id: True)
    monkeypatch.setattr(dispatch, "delay", down)
    with django_capture_on_commit_callbacks(execute=True):
        written(ready, SECRETISH_BODY)
    assert _events(ready.tenant_id, "memory.written")
    assert "could not queue the dispatch" in caplog.text
