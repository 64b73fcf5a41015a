"""Signed incident references: issued by trust and safety, verified at the grant, refused
when missing, forged, expired, for someone else or reused; the refusal is on record."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.errors import IrisError
from governance.models import AuditEvent
from inspection import incidents, services
from inspection.enums import InspectionState as S
from inspection.models import IncidentReference, SnapshotItem
from tests.factories import NOW
from tests.inspection.conftest import as_operator, consent_snapshot, move, request

pytestmark = pytest.mark.django_db


def issue(ops, member, hours: int = 24, now=NOW) -> str:
    return services.incident_reference_issue(
        principal=as_operator(ops["tns"]), member=member, hours=hours, now=now
    ).reference


def escalate(ops, member, reference: str | None, **kwargs):
    kwargs.setdefault("now", NOW)
    return request(
        ops["tns"],
        member,
        path="incident-escalation",
        sensitivity="sensitive",
        incident_reference=reference,
        consent_snapshot_id=consent_snapshot(member),
        **kwargs,
    )


def grant(ops, inspection, minutes: int = 10, reviewer: str = "tns2", **kwargs):
    return move(
        ops[reviewer], inspection, "granted", now=NOW + timedelta(minutes=minutes), **kwargs
    )


def refused_with(rule: str, call) -> None:
    with pytest.raises(IrisError) as caught:
        call()
    problem = caught.value.problem()
    assert (caught.value.status, problem["code"]) == (403, "no-legitimate-interest")
    assert problem["errors"][0] == {
        "field": "incidentReference",
        "rule": rule,
        "message": problem["detail"],
    }
    assert AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code="no-legitimate-interest"
    ).exists()


def test_a_valid_reference_lets_trust_and_safety_read_sensitive_memory_once(ops, remembered):
    member, entries = remembered
    reference = issue(ops, member)
    assert reference.startswith("iris-inc1.")
    inspection = grant(ops, escalate(ops, member, reference))
    assert inspection.state == S.GRANTED
    assert entries["medical"].entry_id in set(
        SnapshotItem.objects.filter(inspection=inspection).values_list("entry_id", flat=True)
    )
    row = IncidentReference.objects.get()
    assert row.spent_by == inspection.id
    issued = AuditEvent.objects.get(action="iris.admin_inspection.incident_reference.issued")
    assert reference not in str(issued.payload)


def test_without_a_reference_an_escalation_has_no_legitimate_interest(ops, remembered):
    member, _ = remembered
    inspection = escalate(ops, member, None)
    refused_with("missing", lambda: grant(ops, inspection))
    assert not SnapshotItem.objects.exists()


def test_a_forged_reference_is_refused(ops, remembered):
    member, _ = remembered
    reference = issue(ops, member)
    # Same id and expiry, another MAC: what someone without the master key can make.
    forged = reference[:-64] + ("0" * 64 if not reference.endswith("0" * 64) else "1" * 64)
    refused_with("forged", lambda: grant(ops, escalate(ops, member, forged)))
    # A later expiry under the old MAC does not verify either.
    parsed = incidents.parse(reference)
    assert parsed is not None
    stretched = incidents.encode(
        parsed.reference_id, parsed.expires_at + timedelta(days=30), parsed.key_id, parsed.mac
    )
    refused_with("forged", lambda: grant(ops, escalate(ops, member, stretched)))
    assert IncidentReference.objects.get().spent_by is None


def test_a_made_up_reference_without_an_issued_row_is_forged(ops, remembered):
    member, _ = remembered
    made_up = (
        f"iris-inc1.{'a' * 32}.{int((NOW + timedelta(days=1)).timestamp())}.{'b' * 16}.{'c' * 64}"
    )
    refused_with("forged", lambda: grant(ops, escalate(ops, member, made_up)))


def test_an_expired_reference_is_refused(ops, remembered):
    member, _ = remembered
    reference = issue(ops, member, hours=1)
    inspection = escalate(ops, member, reference)
    refused_with("expired", lambda: grant(ops, inspection, minutes=60))
    assert grant(ops, inspection, minutes=59).state == S.GRANTED


def test_a_reused_reference_is_refused(ops, remembered):
    member, _ = remembered
    reference = issue(ops, member)
    grant(ops, escalate(ops, member, reference))
    second = escalate(ops, member, reference)
    refused_with("used", lambda: grant(ops, second))
    second.refresh_from_db()
    assert second.state == S.INCIDENT_ESCALATION


def test_a_reference_for_another_member_is_refused(ops, remembered, other_member):
    member, _ = remembered
    reference = issue(ops, other_member)
    refused_with("mismatched", lambda: grant(ops, escalate(ops, member, reference)))


def test_a_reference_may_be_cited_at_the_grant(ops, remembered):
    member, _ = remembered
    inspection = escalate(ops, member, None)
    granted = grant(ops, inspection, incident_reference=issue(ops, member))
    assert granted.state == S.GRANTED


def test_only_trust_and_safety_issues_references(ops, remembered):
    member, _ = remembered
    for role in ("support", "admin", "legal"):
        with pytest.raises(IrisError) as caught:
            services.incident_reference_issue(principal=as_operator(ops[role]), member=member)
        assert caught.value.code == "not-permitted"
    with pytest.raises(IrisError) as caught:
        issue(ops, member, hours=incidents.MAX_TTL_HOURS + 1)
    assert caught.value.field == "hours"
    assert not IncidentReference.objects.exists()


def test_the_command_issues_a_reference(ops, remembered, tenant, capsys):
    from django.core.management import call_command

    member, _ = remembered
    call_command("issue_incident_reference", tenant.slug, "op-tns", str(member.public_id))
    printed = capsys.readouterr().out.strip()
    assert incidents.parse(printed) is not None
    assert IncidentReference.objects.filter(member=member).count() == 1


def test_parse_refuses_what_is_not_a_reference() -> None:
    for text in (None, "", "iris-inc1.x", "iris-inc1." + "a" * 300, 42):
        assert incidents.parse(text) is None
