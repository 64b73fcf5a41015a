"""The side-effect ledger: a destructive call's row is committed before it runs, a call
whose row cannot be written does not run, the ledger off refuses destructive calls, and a
crash mid-call leaves a row that `resume_operations` completes or marks failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from governance import operations, pipeline
from governance.approvals import Resume, register_resumable
from governance.audit import Actor, audit_record
from governance.effects import run_destructive, run_write, side_effect, side_effects_resume
from governance.kernel_models import SideEffect
from governance.models import AuditEvent, User
from governance.pipeline import Check, Decision, Denied, Effect, Hook, Operation, Verdict
from governance.principal import Principal

HARD_DELETED = "iris.test.memory_hard_deleted"


class Crash(BaseException):
    """A worker killed mid-call: nothing after it runs, no handler sees it."""


def job(member: User) -> Principal:
    # Iris itself, so the owner-approval check lets the call through (tested elsewhere).
    return Principal.system("tests", member.tenant_id)


def destructive_op(principal: Principal, member: User, **attributes: Any) -> Operation:
    return Operation(
        name="memory.hard_delete",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        subject_ids=("entry-1",),
        attributes={"arguments": {"entryId": "entry-1"}, **attributes},
    )


def _delete(member: User) -> dict[str, int]:
    with transaction.atomic(durable=True):
        audit_record(
            actor=Actor("system", "tests"),
            action=HARD_DELETED,
            tenant_id=member.tenant_id,
            subject_ids=[member.public_id],
        )
    return {"revisions": 2}


def hard_delete(principal: Principal, member: User, **attributes: Any) -> dict[str, int]:
    op = destructive_op(principal, member, **attributes)
    return run_destructive(op, _delete, member)


def deleted(member: User) -> int:
    return AuditEvent.objects.filter(action=HARD_DELETED, tenant_id=member.tenant_id).count()


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(operations, "_RESUMABLE", {})
    monkeypatch.setattr(operations, "_UNDO", {})

    def resume(call: Resume) -> Any:
        member = User.objects.get(tenant_id=call.principal.tenant_id, public_id=call.member_id)
        return hard_delete(call.principal, member, side_effect_id=call.attributes["side_effect_id"])

    register_resumable("memory.hard_delete", resume)
    return operations._RESUMABLE


# -- before the call -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_row_is_committed_before_the_call_runs(member) -> None:
    seen: list[tuple[str, bool]] = []

    def body(member: User) -> dict[str, int]:
        row = SideEffect.objects.get()
        seen.append((row.status, connection.in_atomic_block))
        return _delete(member)

    op = destructive_op(job(member), member)
    assert run_destructive(op, body, member) == {"revisions": 2}
    assert seen == [("pending", False)]  # written, and no transaction left open around it
    row = SideEffect.objects.get()
    assert row.status == "done" and row.counts == {"revisions": 2}
    assert row.operation == "memory.hard_delete" and row.arguments == {"entryId": "entry-1"}
    assert row.finished_at >= row.started_at
    assert row.tenant_id == member.tenant_id and row.member_public_id == member.public_id
    allow = AuditEvent.objects.get(action="iris.governance.decision.allow")
    assert allow.payload["hook"] == "pre_destructive"  # asked once, by run_destructive


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["save", "create"])
def test_a_call_whose_row_cannot_be_written_does_not_run(member, monkeypatch, how) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise DatabaseError("disk full")

    if how == "save":
        monkeypatch.setattr(SideEffect, "save", fail)
    else:
        monkeypatch.setattr(SideEffect.objects, "create", fail)
    with pytest.raises(Denied) as caught:
        hard_delete(job(member), member)
    assert caught.value.code == "side-effect-ledger-unavailable"
    assert deleted(member) == 0
    refusal = AuditEvent.objects.filter(action="iris.governance.decision.deny").get()
    assert refusal.reason_code == "side-effect-ledger-unavailable"
    # The pipeline had allowed it; that allow rolled back with the row it came with.
    assert not AuditEvent.objects.filter(action="iris.governance.decision.allow").exists()
    assert refusal.payload["decisions"] == [
        {
            "check": "side-effect-ledger",
            "verdict": "deny",
            "reason": "side-effect-ledger-unavailable",
        }
    ]


@pytest.mark.django_db
def test_a_row_cannot_ride_in_the_callers_transaction(member) -> None:
    # Inside an open transaction the row could roll back with the call: refuse instead.
    op = destructive_op(job(member), member)
    with pytest.raises(Denied) as caught, transaction.atomic(durable=True):
        run_destructive(op, _delete, member)
    assert caught.value.code == "side-effect-ledger-unavailable"
    assert deleted(member) == 0


@pytest.mark.django_db
def test_ledger_off_refuses_destructive_calls(member, settings) -> None:
    settings.IRIS_SIDE_EFFECT_LEDGER = False
    with pytest.raises(Denied) as caught:
        hard_delete(job(member), member)
    assert caught.value.code == "side-effect-ledger-off"
    deny = AuditEvent.objects.get(action="iris.governance.decision.deny")
    assert deny.payload["decisions"][-1]["check"] == "side-effect-ledger"
    # And the ledger itself refuses, for a caller that skipped the pipeline.
    with pytest.raises(Denied):
        run_destructive(destructive_op(job(member), member), _delete, member)
    assert deleted(member) == 0 and not SideEffect.objects.exists()


def write_op(member: User) -> Operation:
    return Operation(
        name="memory.write",
        effect=Effect.WRITE,
        principal=job(member),
        tenant_id=member.tenant_id,
        member_id=member.public_id,
    )


@pytest.mark.django_db
def test_plain_writes_leave_no_row_by_default(member, settings) -> None:
    assert run_write(write_op(member), lambda: {"written": 1}) == {"written": 1}
    settings.IRIS_SIDE_EFFECT_LEDGER = False
    assert run_write(write_op(member), lambda: {"written": 1}) == {"written": 1}
    assert not SideEffect.objects.exists()


@pytest.mark.django_db
def test_ledger_all_records_every_writes_side_effects(member, settings) -> None:
    settings.IRIS_SIDE_EFFECT_LEDGER_ALL = True
    run_write(write_op(member), lambda: {"written": 1, "superseded": 1})
    with side_effect(write_op(member)) as entry:
        entry.add(written=2)
    rows = list(SideEffect.objects.order_by("started_at"))
    assert [(r.effect, r.status, r.counts) for r in rows] == [
        ("write", "done", {"written": 1, "superseded": 1}),
        ("write", "done", {"written": 2}),
    ]
    with side_effect(Operation("memory.recall", Effect.READ, job(member), member.tenant_id)):
        pass
    assert SideEffect.objects.count() == 2  # reads never


@pytest.mark.django_db
def test_a_call_that_fails_marks_its_row_failed(member) -> None:
    def boom(member: User) -> None:
        raise ValueError("no such entry")

    with pytest.raises(ValueError):
        run_destructive(destructive_op(job(member), member), boom, member)
    row = SideEffect.objects.get()
    assert row.status == "failed" and row.error_code == "ValueError"


@pytest.mark.django_db
def test_a_denied_check_stops_the_operation_with_nothing_written(member, monkeypatch) -> None:
    class RefuseEverything(Check):
        name = "test-refuse"
        priority = 99

        def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
            return Decision(self.name, Verdict.DENY, "test-refused", "No.")

    monkeypatch.setattr(pipeline, "_REGISTRY", [*pipeline._REGISTRY, RefuseEverything()])
    with pytest.raises(Denied) as caught:
        hard_delete(job(member), member)
    assert caught.value.code == "test-refused"
    assert deleted(member) == 0 and not SideEffect.objects.exists()
    deny = AuditEvent.objects.get(action="iris.governance.decision.deny")
    assert deny.payload["decisions"][-1] == {
        "check": "test-refuse",
        "verdict": "deny",
        "reason": "test-refused",
    }


# -- after a crash ---------------------------------------------------------------------------


def crash_mid_call(member: User) -> SideEffect:
    def killed(member: User) -> None:
        raise Crash

    with pytest.raises(Crash):
        hard_delete_with(killed, member)
    row = SideEffect.objects.get(status="pending")
    SideEffect.objects.filter(pk=row.pk).update(started_at=timezone.now() - timedelta(hours=1))
    row.refresh_from_db()
    return row


def hard_delete_with(func: Any, member: User) -> Any:
    op = destructive_op(job(member), member)
    return run_destructive(op, func, member)


@pytest.mark.django_db(transaction=True)
def test_resume_operations_completes_a_crashed_call(member, registry, capsys) -> None:
    row = crash_mid_call(member)
    assert deleted(member) == 0
    call_command("resume_operations", "--older-than-minutes", "10")
    assert "1 completed, 0 failed" in capsys.readouterr().out
    row.refresh_from_db()
    assert row.status == "done" and row.counts == {"revisions": 2} and row.attempts >= 2
    assert deleted(member) == 1
    assert SideEffect.objects.count() == 1  # the resumed call reused the row
    event = AuditEvent.objects.get(action="iris.governance.side_effect.completed")
    assert event.subject_ids == [str(row.id)]
    call_command("resume_operations", "--older-than-minutes", "0")
    assert deleted(member) == 1  # nothing left to resume


@pytest.mark.django_db(transaction=True)
def test_resume_operations_marks_failed_what_nothing_can_complete(
    member, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(operations, "_RESUMABLE", {})
    monkeypatch.setattr(operations, "_UNDO", {})
    row = crash_mid_call(member)
    call_command("resume_operations")
    assert "0 completed, 1 failed" in capsys.readouterr().out
    row.refresh_from_db()
    assert row.status == "failed" and row.error_code == "not-resumable"
    assert deleted(member) == 0
    assert AuditEvent.objects.filter(action="iris.governance.side_effect.failed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_resume_leaves_young_rows_and_gives_up_after_attempts(member, registry) -> None:
    row = crash_mid_call(member)
    assert side_effects_resume(older_than_minutes=120).completed == 0
    SideEffect.objects.filter(pk=row.pk).update(attempts=3)
    report = side_effects_resume(older_than_minutes=10)
    assert (report.completed, report.failed) == (0, 1)
    row.refresh_from_db()
    assert row.status == "failed" and row.error_code == "too-many-attempts"
    assert deleted(member) == 0


@pytest.mark.django_db(transaction=True)
def test_a_resumed_call_that_is_refused_marks_the_row_failed(member, registry, settings) -> None:
    row = crash_mid_call(member)
    settings.IRIS_SIDE_EFFECT_LEDGER = False
    assert side_effects_resume(older_than_minutes=10).failed == 1
    row.refresh_from_db()
    assert row.status == "failed" and row.error_code == "side-effect-ledger-off"


@pytest.mark.django_db
def test_resume_operations_command_input(member, other_tenant, registry) -> None:
    with pytest.raises(CommandError):
        call_command("resume_operations", "--tenant", "no-such-tenant")
    with pytest.raises(CommandError):
        call_command("resume_operations", "--batch", "0")
    call_command("resume_operations", "--tenant", other_tenant.slug)
