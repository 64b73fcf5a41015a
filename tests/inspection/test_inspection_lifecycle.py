"""Requests, four-eyes grants, snapshots, closes and every refusal, through the services."""

from __future__ import annotations

import pytest

from governance.errors import IrisError
from governance.models import AuditEvent
from inspection.enums import InspectionState as S
from inspection.models import Inspection, InspectionNotice, InspectionTransition, SnapshotItem
from tests.inspection.conftest import as_operator, consent_snapshot, move, request

pytestmark = pytest.mark.django_db

TRANSITION = "iris.admin_inspection.transition"


def transitions(inspection) -> list[AuditEvent]:
    rows = AuditEvent.objects.filter(action=TRANSITION).order_by("occurred_at", "id")
    return [e for e in rows if e.payload.get("inspectionId") == str(inspection.id)]


def denies(reason: str) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(action="iris.governance.decision.deny", reason_code=reason)
    )


def refused(call, code: str, status: int) -> IrisError:
    with pytest.raises(IrisError) as caught:
        call()
    assert caught.value.code == code, caught.value.problem()
    assert caught.value.status == status
    return caught.value


def test_a_request_is_routed_to_its_path_and_audited(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["support"], member)
    assert inspection.state == S.ROUTINE_REVIEW
    trail = list(InspectionTransition.objects.filter(inspection=inspection).order_by("position"))
    assert [(t.from_state, t.to_state) for t in trail] == [
        ("", "requested"),
        ("requested", "routine-review"),
    ]
    events = transitions(inspection)
    assert len(events) == 2
    payload = events[1].payload
    assert events[1].policy_id == "iris.admin_inspection.state_machine.v1"
    assert events[1].actor_kind == "operator"
    assert events[1].actor_id == str(ops["support"].public_id)
    assert payload["role"] == ["support"]
    assert payload["targetUserId"] == str(member.public_id)
    assert payload["targetTenantId"] == str(member.tenant_id)
    assert payload["scope"] == {"kind": "profile", "key": f"profile:{member.public_id}"}
    assert events[1].reason_code == "routine-review"
    assert "justification" not in str(events[1].payload)


def test_a_grant_fixes_the_exact_entries_and_audits_them(ops, remembered) -> None:
    member, entries = remembered
    inspection = request(ops["support"], member)
    granted = move(ops["admin"], inspection, "granted")
    assert granted.state == S.GRANTED
    assert granted.reviewer == ops["admin"]
    items = list(SnapshotItem.objects.filter(inspection=inspection).order_by("position"))
    # Standard inspection: the medical memory is not in it.
    assert [i.entry_id for i in items] == [entries["colour"].entry_id, entries["city"].entry_id]
    assert [i.revision_id for i in items] == [
        entries["colour"].revision_id,
        entries["city"].revision_id,
    ]
    event = transitions(inspection)[-1]
    assert event.payload["to"] == "granted"
    assert event.payload["entryIds"] == [str(i.entry_id) for i in items]
    assert event.payload["revisionIds"] == [str(i.revision_id) for i in items]
    assert event.payload["reviewerRole"] == ["admin"]
    assert granted.expires_at is not None and granted.sensitive_read is False


def test_a_self_grant_is_refused_403_and_audited(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["admin"], member)
    refused(lambda: move(ops["admin"], inspection, "granted"), "self-grant", 403)
    inspection.refresh_from_db()
    assert inspection.state == S.ROUTINE_REVIEW
    assert not SnapshotItem.objects.filter(inspection=inspection).exists()
    (deny,) = denies("self-grant")
    assert deny.payload["operation"] == "inspection.transition"
    assert str(inspection.id) in deny.subject_ids
    assert deny.payload["decisions"][-1]["check"] == "inspection-gate"


def test_support_never_reviews(ops, remembered) -> None:
    member, _ = remembered
    inspection = request(ops["admin"], member)
    refused(lambda: move(ops["support"], inspection, "granted"), "reviewer-not-permitted", 403)
    assert denies("reviewer-not-permitted")


@pytest.mark.parametrize(
    ("current", "to"),
    [
        ("routine-review", "closed"),
        ("routine-review", "requested"),
        ("routine-review", "dsar-fulfillment"),
        ("granted", "granted"),
        ("granted", "denied"),
        ("granted", "routine-review"),
        ("denied", "granted"),
        ("denied", "closed"),
        ("closed", "granted"),
        ("closed", "closed"),
    ],
)
def test_an_illegal_transition_is_409_with_its_code_and_audited(ops, remembered, current, to):
    member, _ = remembered
    inspection = request(ops["support"], member)
    if current in {"granted", "closed"}:
        move(ops["admin"], inspection, "granted")
    if current == "closed":
        move(ops["support"], inspection, "closed")
    if current == "denied":
        move(ops["admin"], inspection, "denied")
    before = InspectionTransition.objects.filter(inspection=inspection).count()
    error = refused(lambda: move(ops["support"], inspection, to), "transition-not-allowed", 409)
    assert error.field == "to"
    assert InspectionTransition.objects.filter(inspection=inspection).count() == before
    assert denies("transition-not-allowed")


@pytest.mark.parametrize("justification", ["", "   ", None])
def test_an_empty_justification_is_400_nothing_is_created_and_it_is_audited(
    ops, remembered, justification
) -> None:
    member, _ = remembered
    error = refused(
        lambda: request(ops["support"], member, justification=justification),
        "justification-required",
        400,
    )
    assert error.field == "justification"
    assert Inspection.objects.count() == 0
    (deny,) = denies("justification-required")
    assert deny.payload["operation"] == "inspection.request"
    assert str(member.public_id) in deny.subject_ids


def test_a_justification_holding_a_credential_is_refused_by_the_secret_screen(ops, remembered):
    member, _ = remembered
    refused(
        lambda: request(
            ops["support"],
            member,
            justification="Member pasted AKIAIOSFODNN7EXAMPLE with secret "
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        "secret-in-memory",
        403,
    )
    assert Inspection.objects.count() == 0


def test_a_scope_of_another_member_is_scope_out_of_bounds(ops, remembered, other_member):
    member, _ = remembered
    inspection = request(
        ops["support"], member, scope={"kind": "profile", "userId": str(other_member.public_id)}
    )
    refused(lambda: move(ops["admin"], inspection, "granted"), "scope-out-of-bounds", 403)
    assert denies("scope-out-of-bounds")
    assert not SnapshotItem.objects.exists()


def test_a_scope_in_another_tenant_is_cross_tenant(ops, remembered, other_tenant):
    member, _ = remembered
    inspection = request(
        ops["support"],
        member,
        scope={"kind": "tenant", "tenantId": str(other_tenant.id), "userId": str(member.public_id)},
    )
    refused(lambda: move(ops["admin"], inspection, "granted"), "cross-tenant", 403)
    assert denies("cross-tenant")


def test_a_sensitive_read_needs_the_current_consent_snapshot(ops, remembered):
    member, entries = remembered
    inspection = request(ops["legal"], member, path="dsar-fulfillment", sensitivity="sensitive")
    refused(lambda: move(ops["legal2"], inspection, "granted"), "consent-not-current", 403)
    granted = move(
        ops["legal2"], inspection, "granted", consent_snapshot_id=consent_snapshot(member)
    )
    assert granted.sensitive_read is True
    assert entries["medical"].entry_id in set(
        SnapshotItem.objects.filter(inspection=inspection).values_list("entry_id", flat=True)
    )


@pytest.mark.parametrize(
    ("requester", "path", "code"),
    [
        ("support", "routine-review", "routine-review-of-sensitive-memory"),
        ("admin", "dsar-fulfillment", "role-never-reads-sensitive-memory"),
        ("legal", "incident-escalation", "no-legitimate-interest"),
        ("tns", "dsar-fulfillment", "trust-and-safety-reads-sensitive-only-in-incidents"),
    ],
)
def test_sensitive_reads_outside_the_legitimate_paths_are_refused(
    ops, remembered, requester, path, code
):
    member, _ = remembered
    inspection = request(ops[requester], member, path=path, sensitivity="sensitive")
    reviewer = ops["legal2"] if requester != "legal2" else ops["admin"]
    refused(
        lambda: move(reviewer, inspection, "granted", consent_snapshot_id=consent_snapshot(member)),
        code,
        403,
    )
    assert not SnapshotItem.objects.exists()


def test_the_requester_may_withdraw_and_a_reviewer_may_deny(ops, remembered):
    member, _ = remembered
    first = request(ops["support"], member)
    assert move(ops["support"], first, "denied", reason_code="withdrawn").state == S.DENIED
    second = request(ops["support"], member)
    denied = move(ops["legal"], second, "denied", reason_code="not-justified")
    assert denied.reviewer == ops["legal"]
    assert transitions(second)[-1].reason_code == "not-justified"


def test_closing_a_sensitive_read_queues_a_notice_due_in_72_hours(ops, remembered):
    member, _ = remembered
    inspection = request(ops["legal"], member, path="dsar-fulfillment", sensitivity="sensitive")
    move(ops["legal2"], inspection, "granted", consent_snapshot_id=consent_snapshot(member))
    closed = move(ops["legal"], inspection, "closed")
    notice = InspectionNotice.objects.get(inspection=inspection)
    assert notice.due_at - closed.finished_at == __import__("datetime").timedelta(hours=72)
    assert notice.status == "queued"
    assert transitions(inspection)[-1].payload["noticeOwed"] is True


def test_closing_a_standard_read_owes_no_notice(ops, remembered):
    member, _ = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    move(ops["support"], inspection, "closed")
    assert not InspectionNotice.objects.exists()


def test_only_the_people_on_a_grant_or_an_admin_close_it(ops, remembered):
    member, _ = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    refused(lambda: move(ops["tns"], inspection, "closed"), "not-permitted", 403)
    assert move(ops["admin"], inspection, "closed").state == S.CLOSED


def test_a_carve_out_is_trust_and_safety_on_an_incident_only(ops, remembered):
    member, _ = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    refused(
        lambda: move(ops["admin"], inspection, "closed", carve_out=True),
        "carve-out-not-permitted",
        403,
    )


def test_members_and_surfaces_get_404_and_are_on_record(remembered, ops):
    from inspection import services
    from tests.factories import as_member, as_surface

    member, _ = remembered
    inspection = request(ops["support"], member)
    for principal in (as_member(member), as_surface(member)):
        refused(
            lambda p=principal: services.inspection_transition(
                principal=p, inspection_id=inspection.id, to="granted"
            ),
            "not-found",
            404,
        )
    assert len(denies("not-an-operator")) == 2


def test_another_tenants_operator_gets_404(ops, remembered, foreign_admin):
    member, _ = remembered
    inspection = request(ops["support"], member)
    refused(lambda: move(foreign_admin, inspection, "granted"), "not-found", 404)
    from inspection import services

    refused(
        lambda: services.inspection_request(
            principal=as_operator(foreign_admin),
            member=member,
            path="routine-review",
            justification="curious",
        ),
        "not-found",
        404,
    )
