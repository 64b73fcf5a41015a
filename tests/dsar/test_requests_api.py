"""Filing and following data-rights requests over the API."""

from __future__ import annotations

import pytest

from dsar.models import DataRightsEvent, DataRightsRequest
from governance.models import AuditEvent

pytestmark = pytest.mark.django_db

EXPORT = {"kind": "export", "payload": {"includeConsents": True}}


def test_member_files_an_export_and_it_is_verified_by_their_session(member_api, member):
    answer = member_api.post("/api/v1/data-rights", EXPORT, format="json")
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["kind"] == "export"
    assert body["verificationMethod"] == "session-token"
    assert [s["toState"] for s in body["trail"]][:2] == ["submitted", "verified"]
    assert DataRightsRequest.objects.filter(member=member).count() == 1


def test_a_second_open_request_of_a_kind_is_409_naming_the_open_one(surface_api, member):
    first = surface_api.post(
        "/api/v1/data-rights", {**EXPORT, "userId": str(member.public_id)}, format="json"
    )
    assert first.status_code == 201
    second = surface_api.post(
        "/api/v1/data-rights", {**EXPORT, "userId": str(member.public_id)}, format="json"
    )
    assert second.status_code == 409
    problem = second.json()
    assert problem["code"] == "open-request-exists"
    assert problem["openRequestId"] == first.json()["id"]
    assert DataRightsRequest.objects.count() == 1


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({"mode": "soft"}, "payload.scopes", "scope-or-category-required"),
        (
            {"mode": "hard", "categories": ["preference"], "retentionGraceMs": 1000},
            "payload.retentionGraceMs",
            "hard-delete-has-no-grace",
        ),
        ({"mode": "gone", "categories": ["preference"]}, "payload.mode", "invalid_choice"),
        ({"categories": ["preference"]}, "payload.mode", "required"),
    ],
)
def test_bad_delete_payloads_are_400_and_write_nothing(surface_api, member, payload, field, rule):
    before = AuditEvent.objects.count()
    answer = surface_api.post(
        "/api/v1/data-rights",
        {"kind": "delete", "payload": payload, "userId": str(member.public_id)},
        format="json",
    )
    assert answer.status_code == 400
    error = answer.json()["errors"][0]
    assert (error["field"], error["rule"]) == (field, rule)
    assert DataRightsRequest.objects.count() == 0
    assert DataRightsEvent.objects.count() == 0
    assert AuditEvent.objects.count() == before


def test_pose_memory_without_its_opt_in_is_refused(surface_api, member):
    answer = surface_api.post(
        "/api/v1/data-rights",
        {"kind": "export", "payload": {"scopes": ["pose"]}, "userId": str(member.public_id)},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["errors"][0]["rule"] == "opt-in-required"


def test_another_tenant_cannot_see_a_request(surface_api, foreign_surface_token, member, api):
    made = surface_api.post(
        "/api/v1/data-rights", {**EXPORT, "userId": str(member.public_id)}, format="json"
    ).json()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    answer = api.get(f"/api/v1/data-rights/{made['id']}?userId={member.public_id}")
    assert answer.status_code == 404


def test_a_transition_outside_the_table_is_400(surface_api, member):
    made = surface_api.post(
        "/api/v1/data-rights", {**EXPORT, "userId": str(member.public_id)}, format="json"
    ).json()
    answer = surface_api.post(
        f"/api/v1/data-rights/{made['id']}/transition",
        {"to": "completed", "userId": str(member.public_id)},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["errors"][0]["rule"] == "transition-not-allowed"
    assert DataRightsEvent.objects.count() == 1


@pytest.fixture
def legal_api(make_operator):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(make_operator("legal"))
    return client


def test_a_legal_operator_verifies_and_extends_through_the_api(surface_api, legal_api, member):
    made = surface_api.post(
        "/api/v1/data-rights",
        {"kind": "access", "userId": str(member.public_id)},
        format="json",
    ).json()
    verified = legal_api.post(
        f"/api/v1/data-rights/{made['id']}/transition",
        {"to": "verified", "method": "operator-signoff"},
        format="json",
    )
    assert verified.status_code == 200, verified.json()
    assert verified.json()["verificationMethod"] == "operator-signoff"
    extended = legal_api.post(
        f"/api/v1/data-rights/{made['id']}/extend", {"reason": "Archive restore"}, format="json"
    )
    assert extended.status_code == 200, extended.json()
    assert extended.json()["extensionReason"] == "Archive restore"


@pytest.mark.parametrize("role", ["support", "admin", "trust-and-safety"])
def test_other_operator_roles_cannot_see_requests(surface_api, make_operator, member, role):
    from rest_framework.test import APIClient

    made = surface_api.post(
        "/api/v1/data-rights", {"kind": "access", "userId": str(member.public_id)}, format="json"
    ).json()
    client = APIClient()
    client.force_login(make_operator(role))
    answer = client.post(
        f"/api/v1/data-rights/{made['id']}/transition",
        {"to": "verified", "method": "operator-signoff"},
        format="json",
    )
    assert answer.status_code == 404
    assert DataRightsEvent.objects.count() == 1


def test_the_code_endpoint_sends_a_code_to_the_member(surface_api, member):
    member.email = "ada@example.org"
    member.save()
    made = surface_api.post(
        "/api/v1/data-rights", {"kind": "access", "userId": str(member.public_id)}, format="json"
    ).json()
    answer = surface_api.post(
        f"/api/v1/data-rights/{made['id']}/verification-code",
        {"method": "email-link", "userId": str(member.public_id)},
        format="json",
    )
    assert answer.status_code == 202
    assert answer.json()["sent"] is True


def test_anonymous_callers_are_refused(api):
    assert api.get("/api/v1/data-rights").status_code in (401, 403)
    assert api.post("/api/v1/data-rights", {"kind": "access"}, format="json").status_code in (
        401,
        403,
    )
