"""A request's life: who may move it where, expiry, reminders, extension, the trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.db import DatabaseError, transaction

from dsar import jobs, services
from dsar.models import DataRightsEvent, DataRightsRequest, TenantDataRightsPolicy
from governance.errors import Conflict, Forbidden, ValidationFailed
from governance.models import AuditEvent
from governance.principal import principal_of
from tests.factories import as_member, as_surface

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 1, 31, 9, tzinfo=UTC)
ACCESS: dict = {}


def file(member, *, kind="access", payload=None, now=NOW, by=as_surface):
    return services.data_rights_open(
        principal=by(member), member=member, kind=kind, payload=payload or {}, now=now
    )


def states(request):
    return list(
        DataRightsEvent.objects.filter(request=request)
        .order_by("position")
        .values_list("to_state", flat=True)
    )


def test_gdpr_is_the_default_and_ccpa_is_a_tenant_setting(member, tenant):
    assert file(member).due_at == datetime(2026, 2, 28, 9, tzinfo=UTC)
    TenantDataRightsPolicy.objects.create(tenant=tenant, jurisdiction="ccpa")
    ccpa = file(member, kind="export")
    assert ccpa.jurisdiction == "ccpa"
    assert ccpa.due_at == NOW + timedelta(days=45)
    assert ccpa.confirm_by == datetime(2026, 2, 13, 9, tzinfo=UTC)


def test_the_member_cancels_while_it_waits_but_not_once_it_started(member, make_operator):
    waiting = file(member)
    cancelled = services.data_rights_transition(
        principal=as_surface(member), member=member, request_id=waiting.id, to="cancelled"
    )
    assert cancelled.state == "cancelled"
    started = file(member)
    legal = principal_of(make_operator("legal"))
    services.data_rights_verify(
        principal=legal, member=None, request_id=started.id, method="operator-signoff"
    )
    DataRightsRequest.objects.filter(id=started.id).update(state="in-progress")
    with pytest.raises(ValidationFailed) as refused:
        services.data_rights_transition(
            principal=as_member(member), member=member, request_id=started.id, to="cancelled"
        )
    assert refused.value.rule == "transition-not-allowed"


def test_only_legal_operators_start_complete_or_fail(member, make_operator):
    request = file(member)
    with pytest.raises(Forbidden) as refused:
        services.data_rights_transition(
            principal=as_surface(member), member=member, request_id=request.id, to="expired"
        )
    assert refused.value.rule == "caller-may-not-move"
    support = principal_of(make_operator("support"))
    with pytest.raises(Exception) as hidden:
        services.data_rights_transition(
            principal=support, member=None, request_id=request.id, to="cancelled"
        )
    assert getattr(hidden.value, "status", None) == 404


def test_a_delete_or_export_completes_only_with_its_result(member, make_operator):
    legal = principal_of(make_operator("legal"))
    request = file(member, kind="export")
    services.data_rights_verify(
        principal=legal, member=None, request_id=request.id, method="operator-signoff"
    )
    DataRightsRequest.objects.filter(id=request.id).update(state="in-progress")
    with pytest.raises(Conflict) as refused:
        services.data_rights_transition(
            principal=legal, member=None, request_id=request.id, to="completed"
        )
    assert refused.value.code == "work-not-finished"


def test_unverified_requests_expire_after_seven_days_once(member, tenant):
    request = file(member)
    assert jobs.expire_unverified(tenant=tenant, now=NOW + timedelta(days=6)) == 0
    assert jobs.expire_unverified(tenant=tenant, now=NOW + timedelta(days=7)) == 1
    assert jobs.expire_unverified(tenant=tenant, now=NOW + timedelta(days=8)) == 0
    request.refresh_from_db()
    assert request.state == "expired"
    assert states(request) == ["submitted", "expired"]
    # An expired request no longer blocks a new one of its kind.
    assert file(member, now=NOW + timedelta(days=8)).state == "submitted"


def test_reminders_reach_the_legal_queue_once_before_the_deadline(
    member, tenant, make_operator, django_capture_on_commit_callbacks
):
    legal = make_operator("legal")
    legal.email = "legal@acme.example"
    legal.save()
    request = file(member)
    assert jobs.remind_deadlines(tenant=tenant, now=NOW + timedelta(days=20)) == 0
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs.remind_deadlines(tenant=tenant, now=NOW + timedelta(days=22)) == 1
    assert jobs.remind_deadlines(tenant=tenant, now=NOW + timedelta(days=23)) == 0
    request.refresh_from_db()
    assert request.reminded_at == NOW + timedelta(days=22)
    assert request.reminded_at < request.due_at
    assert [m.to for m in mail.outbox] == [["legal@acme.example"]]
    assert AuditEvent.objects.filter(action="iris.dsar.request.reminded").count() == 1


def test_extension_once_with_reason_told_to_the_member(
    member, make_operator, django_capture_on_commit_callbacks
):
    member.email = "ada@example.org"
    member.save()
    legal = principal_of(make_operator("legal"))
    request = file(member)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        extended = services.data_rights_extend(
            principal=legal,
            request_id=request.id,
            reason="Your archive is large",
            now=NOW + timedelta(days=10),
        )
    assert extended.due_at == datetime(2026, 4, 30, 9, tzinfo=UTC)
    assert "Your archive is large" in mail.outbox[-1].body
    with pytest.raises(ValidationFailed) as again:
        services.data_rights_extend(
            principal=legal, request_id=request.id, reason="More", now=NOW + timedelta(days=11)
        )
    assert again.value.rule == "already-extended"


def test_an_extension_after_the_first_deadline_is_refused(member, make_operator):
    legal = principal_of(make_operator("legal"))
    request = file(member)
    with pytest.raises(ValidationFailed) as late:
        services.data_rights_extend(
            principal=legal, request_id=request.id, reason="Late", now=NOW + timedelta(days=40)
        )
    assert late.value.rule == "extension-too-late"
    request.refresh_from_db()
    assert request.extended_at is None


def test_the_trail_is_append_only_in_the_database(member):
    request = file(member)
    step = DataRightsEvent.objects.get(request=request)
    for statement in (
        f"UPDATE dsar_datarightsevent SET to_state = 'completed' WHERE id = {step.id}",
        f"DELETE FROM dsar_datarightsevent WHERE id = {step.id}",
    ):
        with pytest.raises(DatabaseError), transaction.atomic():
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(statement)
    assert states(request) == ["submitted"]


def test_the_trail_never_goes_back_in_time_even_with_an_older_clock(member):
    request = file(member, now=NOW)
    services.data_rights_transition(
        principal=as_surface(member),
        member=member,
        request_id=request.id,
        to="cancelled",
        now=NOW - timedelta(days=1),
    )
    times = list(
        DataRightsEvent.objects.filter(request=request)
        .order_by("position")
        .values_list("occurred_at", flat=True)
    )
    assert times == sorted(times)


def test_audit_payloads_name_no_category(member):
    file(member, kind="delete", payload={"mode": "soft", "categories": ["medical"]})
    for event in AuditEvent.objects.filter(action__startswith="iris.dsar."):
        assert "medical" not in str(event.payload)


def test_the_jurisdiction_command_sets_the_clock_of_new_requests(member, tenant):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("set_data_rights_jurisdiction", "acme", "ccpa", stdout=out)
    assert "ccpa" in out.getvalue()
    assert file(member).jurisdiction == "ccpa"
    assert AuditEvent.objects.filter(action="iris.dsar.jurisdiction.set").count() == 1
