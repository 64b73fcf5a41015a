"""Retention, purge, decay and expiry jobs on synthetic timelines with a fixed clock."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.core.management import call_command

from governance.models import AuditEvent, JobRun
from memory import jobs, tasks
from memory.models import MemoryEntry, PendingConflict
from memory.rules.retention import OPERATOR_COPILOT_RETENTION, SOFT_DELETE_GRACE
from memory.services import memory_forget, memory_pause, memory_write
from tests.factories import (
    NOW,
    as_member,
    as_system,
    current,
    draft,
    scope_of,
    written,
)
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

T0 = NOW
DAY = timedelta(days=1)


def remembered(member, body, *, at=T0, **kw):
    """A stored memory on the jobs' timeline, each on a subject of its own (no conflicts)."""
    kw.setdefault("subject", body)
    return written(member, body, now=at, **kw)


def session(member, body, at=T0, sid="s-1"):
    return remembered(
        member, body, at=at, kind="session", identifiers=scope_of(member, "session", sessionId=sid)
    )


def live(member) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(member=member, is_current=True).order_by("created_at"))


def state() -> list[tuple]:
    return sorted(MemoryEntry.objects.values_list("revision_id", "lifecycle", "is_current", "body"))


def run(name: str, member, at, batch: int = 50) -> JobRun:
    return jobs.JOBS[name].run(tenant_id=member.tenant_id, batch=batch, now=at)


# ------------------------------------------------------------------------- retention


def test_session_memory_is_summarised_at_its_lifetime_with_provenance(ready) -> None:
    first = session(ready, "zq-ret-1 we talked about gardening")
    second = session(ready, "zq-ret-2 tomatoes need sun", at=T0 + timedelta(hours=1))
    profile = remembered(ready, "I live in Lyon")

    early = run("retention", ready, T0 + 7 * DAY - timedelta(seconds=1))
    assert early.counts["summarized"] == 0 and len(live(ready)) == 3

    done = run("retention", ready, T0 + 7 * DAY + timedelta(hours=1))
    assert done.counts == {
        "scanned": 2,
        "summarized": 2,
        "summaries": 1,
        "purged": 0,
        "flagged": 0,
        "remaining": 0,
    }
    (summary,) = [e for e in live(ready) if e.scope_kind == "session"]
    assert summary.origin == "summarized-from-session"
    assert summary.body == "zq-ret-1 we talked about gardening · zq-ret-2 tomatoes need sun"
    assert {(link["kind"], link["ref"]) for link in summary.provenance_chain} == {
        ("session-summary", str(first.revision_id)),
        ("session-summary", str(second.revision_id)),
    }
    assert not MemoryEntry.objects.filter(entry_id__in=[first.entry_id, second.entry_id]).exists()
    assert MemoryEntry.objects.filter(entry_id=profile.entry_id).exists()  # kept: no lifetime


def test_a_summary_is_purged_after_its_own_lifetime(ready) -> None:
    session(ready, "zq-sum-canary chat about jazz")
    run("retention", ready, T0 + 7 * DAY)
    assert find_in_database("zq-sum-canary")  # the summary holds it
    kept = run("retention", ready, T0 + 7 * DAY + 30 * DAY - timedelta(seconds=1))
    assert kept.counts["purged"] == 0
    gone = run("retention", ready, T0 + 7 * DAY + 30 * DAY)
    assert gone.counts["purged"] == 1
    assert live(ready) == [] and find_in_database("zq-sum-canary") == []


def test_operator_copilot_memory_is_flagged_for_review_at_14_days_once(
    ready, make_operator
) -> None:
    operator = make_operator("support")
    note = remembered(
        ready,
        "Operator note: prefers email",
        kind="operator-copilot",
        identifiers=scope_of(ready, "operator-copilot", operatorId=str(operator.public_id)),
        origin="operator-copilot",
        principal=as_system(ready),
    )
    assert run("retention", ready, T0 + OPERATOR_COPILOT_RETENTION - DAY).counts["flagged"] == 0
    flagged = run("retention", ready, T0 + OPERATOR_COPILOT_RETENTION)
    assert flagged.counts["flagged"] == 1
    event = AuditEvent.objects.get(action=jobs.REVIEW_ACTION)
    assert event.payload == {"entryId": str(note.entry_id), "adapterScope": "operator_copilot"}
    again = run("retention", ready, T0 + OPERATOR_COPILOT_RETENTION + DAY)
    assert again.counts["flagged"] == 0 and again.counts["scanned"] == 0
    assert MemoryEntry.objects.filter(entry_id=note.entry_id, is_current=True).exists()


def _copilot_note(member, operator, at=T0):
    return remembered(
        member,
        "Operator note: prefers email",
        at=at,
        kind="operator-copilot",
        identifiers=scope_of(member, "operator-copilot", operatorId=str(operator.public_id)),
        origin="operator-copilot",
        principal=as_system(member),
    )


def test_the_review_flag_is_a_column_of_the_current_revision(ready, make_operator) -> None:
    note = _copilot_note(ready, make_operator("support"))
    at = T0 + OPERATOR_COPILOT_RETENTION
    run("retention", ready, at)
    assert current(note.entry_id).retention_review_flagged_at == at
    decisions = [
        e
        for e in AuditEvent.objects.filter(action__startswith="iris.governance.decision.")
        if e.payload.get("operation") == "memory.retention_review_flag"
    ]
    assert len(decisions) == 1, "the flag was written without a governance decision"


def test_the_audit_event_is_not_read_back_as_the_flag(ready, make_operator) -> None:
    note = _copilot_note(ready, make_operator("support"))
    run("retention", ready, T0 + OPERATOR_COPILOT_RETENTION)
    assert AuditEvent.objects.filter(action=jobs.REVIEW_ACTION).count() == 1
    # With the column cleared behind the job's back the entry is due again, although
    # the audit chain still holds the event that flagged it.
    MemoryEntry.objects.filter(entry_id=note.entry_id, is_current=True).update(
        retention_review_flagged_at=None
    )
    again = run("retention", ready, T0 + OPERATOR_COPILOT_RETENTION + DAY)
    assert again.counts["flagged"] == 1
    assert AuditEvent.objects.filter(action=jobs.REVIEW_ACTION).count() == 2


def test_a_person_acting_on_a_flagged_entry_clears_the_flag_and_restarts_the_clock(
    ready, make_operator
) -> None:
    note = _copilot_note(ready, make_operator("support"))
    flagged_at = T0 + OPERATOR_COPILOT_RETENTION
    run("retention", ready, flagged_at)
    acted_at = flagged_at + DAY
    outcome = memory_pause(
        principal=as_member(ready), member=ready, entry_id=note.entry_id, now=acted_at
    )
    assert outcome.written
    assert current(note.entry_id).retention_review_flagged_at is None
    # Not queued again the next night: the person's answer is fresh.
    assert run("retention", ready, acted_at + DAY).counts["flagged"] == 0
    # One envelope after the answer, the entry is due for review again.
    later = run("retention", ready, acted_at + OPERATOR_COPILOT_RETENTION)
    assert later.counts["flagged"] == 1
    assert current(note.entry_id).retention_review_flagged_at == acted_at + (
        OPERATOR_COPILOT_RETENTION
    )


def test_the_migration_copies_flags_from_the_old_audit_events(ready, make_operator) -> None:
    from django.apps import apps
    from django.db import transaction

    from governance.audit import audit_record

    migration = importlib.import_module("memory.migrations.0010_retention_review_flag")
    operator = make_operator("support")
    flagged = _copilot_note(ready, operator)
    untouched = remembered(ready, "I live in Lyon")
    flagged_at = T0 + OPERATOR_COPILOT_RETENTION
    with transaction.atomic():
        for at in (flagged_at, flagged_at + DAY):  # an older job could flag twice
            audit_record(
                actor=as_system(ready).actor,
                action=migration.OLD_REVIEW_ACTION,
                tenant_id=ready.tenant_id,
                subject_ids=[flagged.entry_id, flagged.revision_id],
                payload={"entryId": str(flagged.entry_id), "adapterScope": "operator_copilot"},
                occurred_at=at,
            )
    migration.copy_flags_from_the_audit_chain(apps, None)
    assert current(flagged.entry_id).retention_review_flagged_at == flagged_at
    assert current(untouched.entry_id).retention_review_flagged_at is None
    # So the job treats the entry as it did before: flagged once, not again.
    assert run("retention", ready, flagged_at + 2 * DAY).counts["flagged"] == 0


def test_admin_review_copies_are_purged_at_30_days(ready) -> None:
    copy = remembered(
        ready, "zq-admin-copy review text", adapter_scope="admin_review", principal=as_system(ready)
    )
    assert run("retention", ready, T0 + 29 * DAY).counts["purged"] == 0
    assert run("retention", ready, T0 + 30 * DAY).counts["purged"] == 1
    assert not MemoryEntry.objects.filter(entry_id=copy.entry_id).exists()
    assert find_in_database("zq-admin-copy") == []


def test_retention_run_twice_changes_nothing(ready) -> None:
    session(ready, "chat one")
    session(ready, "chat two", sid="s-2")
    at = T0 + 8 * DAY
    run("retention", ready, at)
    before = state()
    audits = AuditEvent.objects.count()
    second = run("retention", ready, at)
    assert second.counts["scanned"] == 0
    assert state() == before and AuditEvent.objects.count() == audits
    assert JobRun.objects.filter(job="retention").count() == 2


def test_retention_killed_between_summary_and_removal_does_not_summarise_twice(
    ready, monkeypatch
) -> None:
    session(ready, "chat about rain")
    real = jobs.memory_hard_delete

    def killed(**kwargs):
        raise SystemExit("worker killed")

    monkeypatch.setattr(jobs, "memory_hard_delete", killed)
    with pytest.raises(SystemExit):
        run("retention", ready, T0 + 8 * DAY)
    assert JobRun.objects.get(job="retention").status == "failed"
    monkeypatch.setattr(jobs, "memory_hard_delete", real)
    rerun = run("retention", ready, T0 + 8 * DAY)
    assert rerun.counts["summaries"] == 0 and rerun.counts["summarized"] == 1
    (summary,) = live(ready)
    assert summary.origin == "summarized-from-session"


def test_retention_respects_the_batch(ready) -> None:
    for i in range(3):
        session(ready, f"chat number {i}", sid=f"s-{i}")
    first = run("retention", ready, T0 + 8 * DAY, batch=2)
    assert first.counts["scanned"] == 2 and first.counts["remaining"] == 1
    second = run("retention", ready, T0 + 8 * DAY, batch=2)
    assert second.counts["scanned"] == 1 and second.counts["remaining"] == 0


# ----------------------------------------------------------------------------- purge


def test_purge_removes_forgotten_text_after_grace_and_not_before(ready) -> None:
    entry = remembered(ready, "zq-purge-canary my old address")
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=T0)
    before = run("purge", ready, T0 + SOFT_DELETE_GRACE - timedelta(seconds=1))
    assert before.counts == {"entries": 0, "revisions": 0, "remaining": 0}
    assert find_in_database("zq-purge-canary")
    after = run("purge", ready, T0 + SOFT_DELETE_GRACE + timedelta(seconds=1))
    assert after.counts == {"entries": 1, "revisions": 2, "remaining": 0}
    assert find_in_database("zq-purge-canary") == []
    again = run("purge", ready, T0 + SOFT_DELETE_GRACE + DAY)
    assert again.counts["entries"] == 0


# ----------------------------------------------------------------------------- decay


def inferred(member, body, at=T0):
    return remembered(member, body, at=at, origin="model-inferred", session_id="s-9")


def test_decay_retires_an_unused_inference_just_past_the_threshold(ready) -> None:
    guess = inferred(ready, "Probably likes hiking")
    stated = remembered(ready, "I like swimming")
    # weight = 2 ** -(age / 30 days); it drops below 0.1 at about 99.66 days.
    above = run("decay", ready, T0 + 99 * DAY)
    assert above.counts == {"retired": 0, "remaining": 0}
    below = run("decay", ready, T0 + 100 * DAY)
    assert below.counts == {"retired": 1, "remaining": 0}
    current = MemoryEntry.objects.get(entry_id=guess.entry_id, is_current=True)
    assert current.lifecycle == "tombstoned"
    event = AuditEvent.objects.filter(action="iris.memory.entry.forgotten").latest("seq")
    assert event.reason_code == "stale-inference"
    assert MemoryEntry.objects.get(entry_id=stated.entry_id, is_current=True).lifecycle == "active"
    assert run("decay", ready, T0 + 400 * DAY).counts["retired"] == 0  # twice: nothing


def test_decay_counts_use_a_used_inference_lives_longer(ready) -> None:
    guess = inferred(ready, "Probably a morning person")
    MemoryEntry.objects.filter(entry_id=guess.entry_id, is_current=True).update(
        reference_count=10, last_referenced_at=T0
    )
    # 2x weight: below 0.1 only after log2(20) ≈ 4.32 half-lives ≈ 129.7 days.
    assert run("decay", ready, T0 + 129 * DAY).counts["retired"] == 0
    assert run("decay", ready, T0 + 130 * DAY).counts["retired"] == 1


# ---------------------------------------------------------------------------- expire


def test_expire_closes_unanswered_questions(ready) -> None:
    remembered(ready, "My favourite colour is blue", subject="favourite colour")
    outcome = memory_write(
        principal=as_member(ready),
        member=ready,
        draft=draft(ready, "My favourite colour is red", subject="favourite colour"),
        now=T0 + DAY,
    )
    if outcome.status != "conflict":
        pytest.skip(f"no conflict question raised here ({outcome.reason})")
    assert run("expire", ready, T0 + 2 * DAY).counts["expired"] == 0
    done = run("expire", ready, T0 + 30 * DAY)
    assert done.counts == {"expired": 1, "remaining": 0}
    assert PendingConflict.objects.get().status == "expired"
    assert run("expire", ready, T0 + 31 * DAY).counts["expired"] == 0


# ----------------------------------------------------------------- command and tasks


def test_run_job_command_prints_a_progress_bar(ready, capsys) -> None:
    for i in range(3):
        entry = remembered(ready, f"forgotten thing {i}")
        memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=T0)
    call_command(
        "run_job",
        "purge",
        "--tenant",
        ready.tenant.slug,
        "--batch",
        "2",
        "--now",
        (T0 + 15 * DAY).isoformat(),
    )
    out = capsys.readouterr().out
    assert "[##########] 3/3" in out
    assert "purge" in out and MemoryEntry.objects.count() == 0


def test_run_job_refuses_an_unknown_job(ready) -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        call_command("run_job", "nope", "--tenant", ready.tenant.slug)


def test_beat_task_fans_out_one_batch_per_tenant(ready, foreign_member) -> None:
    result = tasks.purge.apply(kwargs={"batch": 10}).get()
    assert result == {"tenants": 2}
    assert JobRun.objects.filter(job="purge").count() == 2
