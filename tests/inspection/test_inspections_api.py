"""The inspection routes: operators of the tenant only; everyone else 404; every refusal
a problem+json with its reason code, nothing granted, the attempt on record."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEvent
from inspection.models import Inspection, SnapshotItem
from tests.inspection.conftest import consent_snapshot, move, request

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def body(member, **overrides):
    data = {
        "userId": str(member.public_id),
        "path": "routine-review",
        "justification": "The member reported a wrong reminder.",
        "reasonCode": "reminder-bug",
    }
    data.update(overrides)
    return data


def problem(answer, status: int, code: str) -> dict:
    assert answer.status_code == status, answer.content
    assert answer["Content-Type"] == PROBLEM
    payload = answer.json()
    assert payload["code"] == code and payload["status"] == status
    return payload


def test_an_operator_requests_a_reviewer_grants_the_requester_reads_and_closes(
    ops, remembered, client_for
):
    member, entries = remembered
    support, admin = client_for(ops["support"]), client_for(ops["admin"])
    made = support.post("/api/v1/inspections", body(member), format="json")
    assert made.status_code == 201, made.content
    created = made.json()
    assert created["state"] == "routine-review"
    assert [s["toState"] for s in created["trail"]] == ["requested", "routine-review"]
    url = f"/api/v1/inspections/{created['id']}"

    listed = admin.get("/api/v1/inspections?open=true").json()["results"]
    assert [r["id"] for r in listed] == [created["id"]]

    granted = admin.post(f"{url}/transition", {"to": "granted"}, format="json")
    assert granted.status_code == 200, granted.content
    assert granted.json()["entryCount"] == 2

    snapshot = support.get(f"{url}/snapshot")
    assert snapshot.status_code == 200, snapshot.content
    items = snapshot.json()["items"]
    assert [i["entryId"] for i in items] == [
        str(entries["colour"].entry_id),
        str(entries["city"].entry_id),
    ]
    closed = support.post(f"{url}/transition", {"to": "closed"}, format="json")
    assert closed.json()["state"] == "closed"
    problem(support.get(f"{url}/snapshot"), 403, "grant-expired")
    replayed = admin.get(f"{url}/replay")
    assert replayed.status_code == 200
    assert replayed.json()["items"] == items


def test_a_self_grant_is_403_self_grant_and_on_record(ops, remembered, client_for):
    member, _ = remembered
    admin = client_for(ops["admin"])
    made = admin.post("/api/v1/inspections", body(member), format="json").json()
    answer = admin.post(
        f"/api/v1/inspections/{made['id']}/transition", {"to": "granted"}, format="json"
    )
    problem(answer, 403, "self-grant")
    assert not SnapshotItem.objects.exists()
    assert AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code="self-grant"
    ).exists()


def test_an_illegal_transition_is_409_naming_the_allowed_moves(ops, remembered, client_for):
    member, _ = remembered
    support = client_for(ops["support"])
    made = support.post("/api/v1/inspections", body(member), format="json").json()
    answer = support.post(
        f"/api/v1/inspections/{made['id']}/transition", {"to": "closed"}, format="json"
    )
    payload = problem(answer, 409, "transition-not-allowed")
    assert payload["errors"][0]["allowed"] == ["denied", "granted"]
    assert AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code="transition-not-allowed"
    ).exists()


def test_an_empty_justification_is_400_and_on_record(ops, remembered, client_for):
    member, _ = remembered
    answer = client_for(ops["support"]).post(
        "/api/v1/inspections", body(member, justification=""), format="json"
    )
    payload = problem(answer, 400, "justification-required")
    assert payload["errors"][0]["field"] == "justification"
    assert not Inspection.objects.exists()
    assert AuditEvent.objects.filter(reason_code="justification-required").exists()


def test_a_forged_incident_reference_is_403_no_legitimate_interest(ops, remembered, client_for):
    member, _ = remembered
    forged = f"iris-inc1.{uuid.uuid4().hex}.4102444800.{'a' * 16}.{'b' * 64}"
    made = client_for(ops["tns"]).post(
        "/api/v1/inspections",
        body(
            member,
            path="incident-escalation",
            sensitivity="sensitive",
            incidentReference=forged,
            consentSnapshotId=consent_snapshot(member),
        ),
        format="json",
    )
    assert made.status_code == 201, made.content
    answer = client_for(ops["tns2"]).post(
        f"/api/v1/inspections/{made.json()['id']}/transition", {"to": "granted"}, format="json"
    )
    payload = problem(answer, 403, "no-legitimate-interest")
    assert payload["errors"][0]["rule"] == "forged"
    assert not SnapshotItem.objects.exists()


def test_a_malformed_reference_is_400_before_anything_happens(ops, remembered, client_for):
    member, _ = remembered
    tns = client_for(ops["tns"])
    before = AuditEvent.objects.count()
    answer = tns.post(
        "/api/v1/inspections",
        body(member, path="incident-escalation", incidentReference="INC-12345"),
        format="json",
    )
    problem(answer, 400, "validation-failed")
    assert AuditEvent.objects.count() == before


def test_tenant_a_operator_gets_404_on_everything_of_tenant_b(
    ops, remembered, foreign_admin, client_for
):
    member, _ = remembered
    inspection = request(ops["support"], member)
    move(ops["admin"], inspection, "granted")
    foreign = client_for(foreign_admin)
    url = f"/api/v1/inspections/{inspection.id}"
    problem(foreign.get(url), 404, "not-found")
    problem(foreign.get(f"{url}/snapshot"), 404, "not-found")
    problem(foreign.get(f"{url}/replay"), 404, "not-found")
    problem(foreign.post(f"{url}/transition", {"to": "closed"}, format="json"), 404, "not-found")
    problem(foreign.post("/api/v1/inspections", body(member), format="json"), 404, "not-found")
    assert foreign.get("/api/v1/inspections").json()["results"] == []
    inspection.refresh_from_db()
    assert inspection.state == "granted"


def test_members_and_surfaces_get_404_everywhere(
    ops, remembered, member_api, surface_api, client_for
):
    member, _ = remembered
    inspection = request(ops["support"], member)
    url = f"/api/v1/inspections/{inspection.id}"
    for client in (member_api, surface_api):
        problem(client.get("/api/v1/inspections"), 404, "not-found")
        problem(client.get(url), 404, "not-found")
        problem(client.get(f"{url}/snapshot"), 404, "not-found")
        problem(
            client.post(f"{url}/transition", {"to": "granted"}, format="json"), 404, "not-found"
        )
        problem(client.post("/api/v1/inspections", body(member), format="json"), 404, "not-found")


def test_anonymous_is_refused(remembered, ops):
    member, _ = remembered
    inspection = request(ops["support"], member)
    answer = APIClient().get(f"/api/v1/inspections/{inspection.id}")
    assert answer.status_code in (401, 403)
    assert answer["Content-Type"] == PROBLEM


def test_bad_input_names_the_field(ops, remembered, client_for):
    member, _ = remembered
    support = client_for(ops["support"])
    for overrides, field in (
        ({"path": "granted"}, "path"),
        ({"sensitivity": "very"}, "sensitivity"),
        ({"reasonCode": "Not A Code"}, "reasonCode"),
        ({"scope": {"kind": "profile"}}, "scope.userId"),
        ({"colour": "blue"}, "colour"),
    ):
        answer = support.post("/api/v1/inspections", body(member, **overrides), format="json")
        payload = problem(answer, 400, "validation-failed")
        assert payload["errors"][0]["field"] == field, payload
    assert not Inspection.objects.exists()


def test_a_replayed_idempotency_key_writes_nothing_new(ops, remembered, client_for):
    member, _ = remembered
    support = client_for(ops["support"])
    headers = {"Idempotency-Key": "k-1"}
    first = support.post("/api/v1/inspections", body(member), format="json", headers=headers)
    again = support.post("/api/v1/inspections", body(member), format="json", headers=headers)
    assert first.json() == again.json()
    assert Inspection.objects.count() == 1


def test_the_list_costs_a_fixed_number_of_queries(
    ops, remembered, client_for, django_assert_max_num_queries
):
    member, _ = remembered
    for _ in range(5):
        request(ops["support"], member)
    admin = client_for(ops["admin"])
    with django_assert_max_num_queries(20):
        answer = admin.get("/api/v1/inspections")
    assert len(answer.json()["results"]) == 5
