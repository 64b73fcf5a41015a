"""The audit chain: append-only in the database, chained, signed, and fail-closed."""

from __future__ import annotations

import json
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, IntegrityError, connection, models, transaction

from governance import append_only
from governance.audit import (
    Actor,
    AuditPayloadError,
    audit_record,
    audit_record_many,
    chain_link,
    event_canonical,
    one_insert,
    seal_pending,
    sha256_hex,
    verify_chain,
    write_checkpoint,
)
from governance.models import AuditEvent, AuditSeal

ACTOR = Actor("system", "tests")
pytestmark = pytest.mark.django_db


def _record(n: int, tenant_id=None) -> list[AuditEvent]:
    return [
        audit_record(
            actor=ACTOR,
            action="iris.test.recorded",
            tenant_id=tenant_id,
            reason_code=f"n{i}",
            subject_ids=[f"s{i}"],
            payload={"count": i},
        )
        for i in range(n)
    ]


def _raw(sql: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _drop_triggers() -> None:
    for table in ("governance_auditevent", "governance_auditseal"):
        append_only.uninstall(connection, table)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE governance_auditevent SET action = 'iris.test.rewritten'",
        "DELETE FROM governance_auditevent",
        "UPDATE governance_auditseal SET chain_hash = 'x'",
        "DELETE FROM governance_auditseal",
    ],
)
def test_raw_update_and_delete_are_refused_by_the_database(sql: str) -> None:
    _record(2)
    seal_pending(blocking=True)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw(sql)
    assert AuditEvent.objects.count() == 2


def test_truncate_is_refused_on_postgres(require_postgres) -> None:
    _record(1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw("TRUNCATE governance_auditevent CASCADE")
    assert AuditEvent.objects.count() == 1


def test_bulk_queryset_update_and_delete_are_refused() -> None:
    _record(1)
    with pytest.raises(PermissionError):
        AuditEvent.objects.all().update(action="x")
    with pytest.raises(PermissionError):
        AuditEvent.objects.all().delete()
    # Past the model layer, the database itself refuses.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        models.QuerySet(AuditEvent).update(action="x")
    event = AuditEvent.objects.get()
    event.action = "x"
    with pytest.raises(PermissionError):
        event.save()


def test_chain_verifies_and_links_each_event_to_its_predecessor(tenant) -> None:
    events = _record(5, tenant.id)
    report = verify_chain()
    assert report.ok, report.first_break
    seals = list(AuditSeal.objects.filter(chain=str(tenant.id)).order_by("position"))
    assert [s.event_id for s in seals[-5:]] == [e.seq for e in events]
    for before, after in zip(seals, seals[1:], strict=False):
        assert after.prev_hash == before.chain_hash
        assert after.chain_hash == chain_link(before.chain_hash, after.event.content_hash)


def test_chains_are_per_tenant(tenant, other_tenant) -> None:
    _record(3, tenant.id)
    _record(2, other_tenant.id)
    seal_pending(blocking=True)
    assert AuditSeal.objects.filter(chain=str(other_tenant.id)).count() == 3  # 1 creation + 2
    assert verify_chain().ok


def test_tampered_event_is_named_by_verify_audit() -> None:
    events = _record(4)
    seal_pending(blocking=True)
    target = events[2]
    _drop_triggers()
    _raw("UPDATE governance_auditevent SET reason_code = 'forged' WHERE seq = %s", [target.seq])
    report = verify_chain()
    assert not report.ok
    assert report.first_break.event_id == str(target.id)
    assert "changed" in report.first_break.reason
    with pytest.raises(CommandError, match=str(target.id)):
        call_command("verify_audit")


def test_full_rewrite_is_caught_by_signed_checkpoints() -> None:
    events = _record(6)
    assert write_checkpoint() == 1
    # An administrator rewrites event 3 and recomputes every hash after it.
    _drop_triggers()
    target = events[3]
    _raw("UPDATE governance_auditevent SET reason_code = 'forged' WHERE seq = %s", [target.seq])
    target.refresh_from_db()
    new_hash = sha256_hex(event_canonical(target))
    _raw(
        "UPDATE governance_auditevent SET content_hash = %s WHERE seq = %s", [new_hash, target.seq]
    )
    prev = "0" * 64
    for seal in AuditSeal.objects.order_by("position").select_related("event"):
        link = chain_link(prev, seal.event.content_hash)
        _raw(
            "UPDATE governance_auditseal SET prev_hash = %s, chain_hash = %s WHERE id = %s",
            [prev, link, seal.id],
        )
        prev = link
    report = verify_chain()
    assert not report.ok
    assert "checkpoint" in report.first_break.reason
    assert report.first_break.event_id == str(events[0].id)  # first event after genesis


def test_checkpoint_with_forged_signature_is_caught(settings) -> None:
    _record(2)
    write_checkpoint()
    path = settings.IRIS_AUDIT_CHECKPOINT_PATH
    checkpoint = json.loads(path.read_text().splitlines()[0])
    checkpoint["mac"] = "0" * 64
    path.write_text(json.dumps(checkpoint) + "\n")
    report = verify_chain()
    assert not report.ok and "signature" in report.first_break.reason


def test_deleted_tail_is_caught_by_checkpoint() -> None:
    events = _record(3)
    write_checkpoint()
    _drop_triggers()
    _raw("DELETE FROM governance_auditseal WHERE event_id = %s", [events[-1].seq])
    _raw("DELETE FROM governance_auditevent WHERE seq = %s", [events[-1].seq])
    report = verify_chain()
    assert not report.ok and "gone" in report.first_break.reason


def test_payload_with_content_is_refused_and_nothing_is_written() -> None:
    with pytest.raises(AuditPayloadError):
        audit_record(actor=ACTOR, action="iris.test", tenant_id=None, payload={"body": "secret"})
    with pytest.raises(AuditPayloadError):
        audit_record(actor=ACTOR, action="iris.test", tenant_id=None, payload={"x": "y" * 500})
    assert AuditEvent.objects.count() == 0


def test_operation_is_refused_when_its_audit_event_cannot_be_written(tenant) -> None:
    from governance.models import Tenant

    with pytest.raises(AuditPayloadError), transaction.atomic():
        Tenant.objects.create(slug="ghost", name="Ghost")
        audit_record(actor=ACTOR, action="iris.test", tenant_id=None, payload={"token": "t"})
    assert not Tenant.objects.filter(slug="ghost").exists()


def test_deleting_a_user_never_touches_audit_rows(member) -> None:
    before = AuditEvent.objects.count()
    member.delete()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_leave_a_chain_that_verifies(require_postgres) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                with transaction.atomic():
                    audit_record(
                        actor=ACTOR,
                        action="iris.test.concurrent",
                        tenant_id=None,
                        reason_code=f"w{n}",
                        payload={"i": i},
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert AuditEvent.objects.filter(action="iris.test.concurrent").count() == 1600
    report = verify_chain()
    assert report.ok, report.first_break
    assert AuditSeal.objects.count() == AuditEvent.objects.count()
    positions = list(AuditSeal.objects.order_by("position").values_list("position", flat=True))
    assert positions == list(range(1, len(positions) + 1))


def test_seal_is_idempotent() -> None:
    _record(3)
    first = seal_pending(blocking=True)
    assert first == 3
    assert seal_pending(blocking=True, full=True) == 0


def test_unique_position_backstops_a_racing_sealer() -> None:
    events = _record(1)
    seal_pending(blocking=True)
    seal = AuditSeal.objects.get(event=events[0])
    other = _record(1)[0]
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditSeal.objects.create(
            chain=seal.chain,
            position=seal.position,
            event=other,
            event_seq=other.seq,
            prev_hash=seal.prev_hash,
            chain_hash="x",
            sealed_at=seal.sealed_at,
        )


def _one(code: str) -> AuditEvent:
    return audit_record(actor=ACTOR, action="iris.test.batched", tenant_id=None, reason_code=code)


def _batched_codes() -> list[str]:
    return sorted(
        AuditEvent.objects.filter(action="iris.test.batched").values_list("reason_code", flat=True)
    )


def test_one_insert_writes_the_block_s_events_together(django_assert_num_queries) -> None:
    with transaction.atomic(), one_insert():
        with django_assert_num_queries(0):
            _one("a")
            _one("b")
            with one_insert():  # a nested block joins the outer one
                _one("c")
        assert _batched_codes() == []
    assert _batched_codes() == ["a", "b", "c"]
    seal_pending(blocking=True, full=True)
    assert verify_chain().ok


def _rider_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS rider (n integer NOT NULL)")


def _riders() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM rider ORDER BY n")
        return [row[0] for row in cursor.fetchall()]


def _batched(code: str) -> dict[str, object]:
    return {"actor": ACTOR, "action": "iris.test.batched", "tenant_id": None, "reason_code": code}


@pytest.mark.django_db(transaction=True)
def test_riders_are_written_by_the_events_own_statement(require_postgres) -> None:
    from django.test.utils import CaptureQueriesContext

    _rider_table()
    rider = ("INSERT INTO rider (n) SELECT unnest(%s::int[])", [[1, 2]])
    with CaptureQueriesContext(connection) as seen:
        audit_record_many([_batched("a"), _batched("b")], riders=[rider])
    written = [q["sql"] for q in seen.captured_queries if "INSERT INTO rider" in q["sql"]]
    assert len(written) == 1 and "INSERT INTO governance_auditevent" in written[0]
    assert _batched_codes() == ["a", "b"] and _riders() == [1, 2]


@pytest.mark.django_db(transaction=True)
def test_a_failing_rider_takes_the_events_with_it(require_postgres) -> None:
    _rider_table()
    rider = ("INSERT INTO rider (n) VALUES (%s)", [None])  # NOT NULL
    with pytest.raises(IntegrityError):
        audit_record_many([_batched("lost")], riders=[rider])
    assert _batched_codes() == [] and _riders() == []


def test_riders_cannot_wait_for_a_one_insert_block(require_postgres) -> None:
    rider = ("SELECT 1", [])
    with pytest.raises(RuntimeError, match="riders"), transaction.atomic(), one_insert():
        audit_record_many([_batched("queued")], riders=[rider])


def test_one_insert_writes_nothing_when_its_block_raises() -> None:
    with pytest.raises(RuntimeError, match="refused"), transaction.atomic():
        with one_insert():
            _one("lost")
            raise RuntimeError("refused")
    assert _batched_codes() == []


def test_a_rolled_back_savepoint_takes_its_event_with_it() -> None:
    with transaction.atomic(), one_insert():
        _one("kept")
        try:
            with transaction.atomic():
                _one("rolled-back")
                raise IntegrityError("inner step failed")
        except IntegrityError:
            pass
    assert _batched_codes() == ["kept"]


@pytest.mark.django_db(transaction=True)
def test_one_insert_needs_a_transaction() -> None:
    with pytest.raises(RuntimeError, match="transaction"), one_insert():
        pass  # pragma: no cover


def test_a_seal_larger_than_one_insert_chunk_still_chains(monkeypatch) -> None:
    monkeypatch.setattr("governance.audit.SEAL_INSERT_ROWS", 7)
    seal_pending(blocking=True, full=True)
    before = AuditSeal.objects.count()
    _record(20)
    assert seal_pending(blocking=True, full=True) == 20
    assert AuditSeal.objects.count() == before + 20
    assert verify_chain().ok
