"""The member is told: a sensitive read closed without a carve-out queues a notice due in
72 hours; the job delivers it by email and on the member's page exactly once, however
often it runs and even when a worker dies mid-batch; the access log lists every grant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail

from governance.models import AuditEvent
from inspection import jobs, services
from inspection.models import InspectionNotice
from inspection.selectors import member_access_log
from tests.factories import NOW
from tests.inspection.conftest import as_operator, consent_snapshot, move, request

pytestmark = pytest.mark.django_db


def sensitive_read(ops, member, *, close: bool = True):
    inspection = request(
        ops["legal"],
        member,
        path="dsar-fulfillment",
        sensitivity="sensitive",
        reason_code="dsar-access-request",
        consent_snapshot_id=consent_snapshot(member),
        now=NOW,
    )
    move(ops["legal2"], inspection, "granted", now=NOW + timedelta(minutes=5))
    if close:
        move(ops["legal"], inspection, "closed", now=NOW + timedelta(minutes=30))
    return inspection


def mails_to(address: str) -> list:
    return [m for m in mail.outbox if address in m.to]


def test_the_notice_is_delivered_exactly_once_with_the_job_run_twice(ops, remembered, tenant):
    member, _ = remembered
    member.email = "ada@example.org"
    member.save(update_fields=["email"])
    inspection = sensitive_read(ops, member)
    notice = InspectionNotice.objects.get(inspection=inspection)
    assert notice.due_at == NOW + timedelta(minutes=30, hours=72)

    at = NOW + timedelta(hours=1)
    assert jobs.deliver_notices(tenant=tenant, now=at) == 1
    assert jobs.deliver_notices(tenant=tenant, now=at) == 0
    assert jobs.deliver_notices(tenant=tenant, now=at + timedelta(days=2)) == 0
    (sent,) = mails_to("ada@example.org")
    assert (
        sent.extra_headers["Message-ID"] == f"<inspection-notice-{notice.id}@notices.iris.invalid>"
    )
    assert "insulin" not in sent.body and "legal" in sent.body
    notice.refresh_from_db()
    assert (notice.status, notice.emailed, notice.delivered_at) == ("delivered", True, at)
    assert AuditEvent.objects.filter(action="iris.admin_inspection.notice.delivered").count() == 1


def test_a_worker_that_dies_mid_batch_loses_nothing_and_sends_nothing_twice(
    ops, remembered, other_member, tenant, monkeypatch
):
    from tests.factories import grant, grant_category, grant_storage, written

    member, _ = remembered
    grant_storage(other_member)
    grant(other_member, "sensitive_data")
    grant_category(other_member, "medical")
    written(other_member, "I see a therapist on Tuesdays", category="medical")
    for person, address in ((member, "ada@example.org"), (other_member, "grace@example.org")):
        person.email = address
        person.save(update_fields=["email"])
    sensitive_read(ops, member)
    sensitive_read(ops, other_member)

    # The worker sends the first notice and dies on the second (the mail server hangs up).
    from django.core.mail import EmailMessage

    real_send = EmailMessage.send
    calls = {"n": 0}

    def dying_send(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("worker lost")
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr(EmailMessage, "send", dying_send)
    at = NOW + timedelta(hours=1)
    assert jobs.deliver_notices(tenant=tenant, now=at) == 1
    monkeypatch.setattr(EmailMessage, "send", real_send)
    statuses = sorted(InspectionNotice.objects.values_list("status", flat=True))
    assert statuses == ["delivered", "sending"]

    # Another run at once leaves the claimed notice to its (presumed live) worker.
    assert jobs.deliver_notices(tenant=tenant, now=at + timedelta(minutes=1)) == 0
    # After the lease, the next run takes it over and delivers it once.
    later = at + jobs.NOTICE_CLAIM_LEASE
    assert jobs.deliver_notices(tenant=tenant, now=later) == 1
    assert jobs.deliver_notices(tenant=tenant, now=later) == 0
    assert len(mails_to("ada@example.org")) == 1
    assert len(mails_to("grace@example.org")) == 1
    assert set(InspectionNotice.objects.values_list("status", flat=True)) == {"delivered"}


def test_a_stale_claim_cannot_mark_a_notice_another_worker_took_over(ops, remembered, tenant):
    member, _ = remembered
    sensitive_read(ops, member)
    notice = InspectionNotice.objects.get()
    # Worker A claimed it long ago and is presumed dead; worker B takes it over.
    InspectionNotice.objects.filter(id=notice.id).update(
        status="sending", claimed_at=NOW, claim_token="00000000-0000-0000-0000-00000000000a"
    )
    assert jobs.deliver_notices(tenant=tenant, now=NOW + timedelta(minutes=5)) == 0
    assert jobs.deliver_notices(tenant=tenant, now=NOW + timedelta(hours=1)) == 1
    notice.refresh_from_db()
    assert notice.status == "delivered" and notice.attempts == 1
    # A's late attempt to mark it changes nothing: its claim is gone.
    assert (
        InspectionNotice.objects.filter(
            id=notice.id, claim_token="00000000-0000-0000-0000-00000000000a", status="sending"
        ).update(status="delivered")
        == 0
    )


def test_a_member_without_an_address_is_told_on_their_page(ops, remembered, tenant):
    member, _ = remembered
    member.email = ""
    member.save(update_fields=["email"])
    sensitive_read(ops, member)
    assert jobs.deliver_notices(tenant=tenant, now=NOW + timedelta(hours=1)) == 1
    assert mail.outbox == []
    (line,) = member_access_log(member=member)
    assert line.notice_status == "delivered"


def test_the_access_log_lists_every_grant_with_role_path_reason_categories_and_notice(
    ops, remembered, tenant
):
    member, _ = remembered
    first = request(ops["support"], member, reason_code="reminder-bug", now=NOW)
    move(ops["admin"], first, "granted", now=NOW + timedelta(minutes=1))
    refused = request(ops["support"], member, now=NOW)
    move(ops["admin"], refused, "denied", now=NOW)
    second = sensitive_read(ops, member, close=False)

    log = member_access_log(member=member)
    assert [line.inspection_id for line in log] == [str(second.id), str(first.id)]
    open_line, routine = log
    assert (routine.role, routine.path, routine.reason_code) == (
        "support",
        "routine-review",
        "reminder-bug",
    )
    assert routine.categories == ["fact", "preference"]
    assert routine.notice_status == "not-required"
    assert open_line.categories == ["fact", "medical", "preference"]
    assert open_line.notice_status == "not-required"  # still open: nothing owed yet

    move(ops["legal"], second, "closed", now=NOW + timedelta(minutes=30))
    assert member_access_log(member=member)[0].notice_status == "queued"
    jobs.deliver_notices(tenant=tenant, now=NOW + timedelta(hours=1))
    line = member_access_log(member=member)[0]
    assert line.notice_status == "delivered"
    assert line.notice_delivered_at == NOW + timedelta(hours=1)


def test_an_investigation_carve_out_withholds_the_notice_and_the_log_line(ops, remembered, tenant):
    member, _ = remembered
    reference = services.incident_reference_issue(
        principal=as_operator(ops["tns"]), member=member, now=NOW
    ).reference
    inspection = request(
        ops["tns"],
        member,
        path="incident-escalation",
        sensitivity="sensitive",
        incident_reference=reference,
        consent_snapshot_id=consent_snapshot(member),
        now=NOW,
    )
    move(ops["tns2"], inspection, "granted", now=NOW)
    closed = move(ops["tns"], inspection, "closed", carve_out=True, now=NOW)
    assert closed.carve_out is True
    assert not InspectionNotice.objects.exists()
    assert member_access_log(member=member) == []
    assert jobs.deliver_notices(tenant=tenant, now=NOW + timedelta(hours=1)) == 0


def test_an_expired_sensitive_grant_queues_its_notice_too(ops, remembered, tenant):
    member, _ = remembered
    sensitive_read(ops, member, close=False)
    jobs.expire_grants(tenant=tenant, now=NOW + timedelta(hours=5))
    notice = InspectionNotice.objects.get()
    assert notice.due_at == NOW + timedelta(hours=5 + 72)


def test_the_members_access_report_and_export_carry_the_access_log(ops, remembered):
    from dsar import access

    member, _ = remembered
    looked = request(ops["support"], member, reason_code="reminder-bug", now=NOW)
    move(ops["admin"], looked, "granted", now=NOW + timedelta(minutes=1))
    (line,) = access.access_report(member=member)["sections"]["operator-accesses"]
    assert (line["inspectionId"], line["role"], line["path"], line["reasonCode"]) == (
        str(looked.id),
        "support",
        "routine-review",
        "reminder-bug",
    )
    assert line["categories"] == ["fact", "preference"]
