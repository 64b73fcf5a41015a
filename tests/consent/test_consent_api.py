"""The consent API: GET/POST /api/v1/consents and GET /api/v1/consents/active."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from consent.models import ConsentEvent
from consent.services import consent_purge_categories
from consent.terms import current_terms
from governance.models import AuditEvent, IdempotencyRecord
from governance.principal import Principal
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

URL = "/api/v1/consents"
ACTIVE = "/api/v1/consents/active"
PROBLEM = "application/problem+json"


def body(member, **overrides):
    data = {
        "userId": str(member.public_id),
        "type": "data_processing",
        "status": "granted",
        "legalBasis": "consent",
        "captureMethod": "inline-prompt",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def sensitive(member, category: str = "medical", **overrides):
    return body(member, type=f"category:{category}", legalBasis="explicit_consent", **overrides)


def post(client: APIClient, data, **headers):
    return client.post(URL, data, format="json", headers=headers)


def consent_writes() -> int:
    return (
        ConsentEvent.objects.count()
        + AuditEvent.objects.filter(action__startswith="iris.consent.").count()
    )


@pytest.fixture
def operator_api(make_operator) -> APIClient:
    client = APIClient()
    client.force_login(make_operator("support"))
    return client


@pytest.fixture
def foreign_surface_api(foreign_surface_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    return client


# ---------------------------------------------------------------- it works


def test_a_surface_records_a_grant_and_gets_the_stored_event(surface_api, member) -> None:
    response = post(surface_api, body(member))
    assert response.status_code == 201, response.json()
    event = response.json()
    row = ConsentEvent.objects.get()
    assert event["id"] == str(row.id)
    assert event["userId"] == str(member.public_id)
    assert event["position"] == 1 and event["kind"] == "consent"
    assert (event["type"], event["status"]) == ("data_processing", "granted")
    assert event["legalBasis"] == "consent" and event["captureMethod"] == "inline-prompt"
    assert event["termsVersion"] == current_terms().version
    assert event["termsHash"] == current_terms().hash
    assert event["fingerprint"] == row.fingerprint and event["chainHash"] == row.chain_hash
    assert event["recordedAt"].endswith("Z") and event["occurredAt"].endswith("Z")
    assert event["erased"] is False and event["witness"] is None


def test_an_opt_out_is_recorded_through_the_same_endpoint(surface_api, member) -> None:
    response = post(surface_api, body(member, type="personalization", status="opted-out"))
    assert response.status_code == 201
    assert response.json()["kind"] == "opt-out"
    active = surface_api.get(ACTIVE, {"userId": str(member.public_id)}).json()
    assert [o["category"] for o in active["optOuts"]] == ["personalization"]


def test_a_member_session_may_omit_the_user_id(member_api, member) -> None:
    data = body(member, captureMethod="settings-toggle", userId=None)
    assert post(member_api, data).status_code == 201
    listed = member_api.get(URL).json()
    assert [e["type"] for e in listed["results"]] == ["data_processing"]
    active = member_api.get(ACTIVE).json()
    assert [c["type"] for c in active["consents"]] == ["data_processing"]


def test_a_surface_must_name_the_member(surface_api, member) -> None:
    response = surface_api.get(URL)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "userId"


def test_the_list_is_newest_first_and_pages_by_position(surface_api, member) -> None:
    for consent_type in ("data_processing", "data_storage", "cross_device"):
        assert post(surface_api, body(member, type=consent_type)).status_code == 201
    user = str(member.public_id)
    first = surface_api.get(URL, {"userId": user, "limit": 2}).json()
    assert [e["position"] for e in first["results"]] == [3, 2]
    assert first["nextBefore"] == 2
    rest = surface_api.get(URL, {"userId": user, "limit": 2, "before": 2}).json()
    assert [e["position"] for e in rest["results"]] == [1]
    assert rest["nextBefore"] is None


def test_listing_costs_a_fixed_number_of_queries(
    surface_api, member, django_assert_max_num_queries
) -> None:
    for consent_type in ("data_processing", "data_storage", "cross_device", "sensitive_data"):
        legal = "explicit_consent" if consent_type == "sensitive_data" else "consent"
        post(surface_api, body(member, type=consent_type, legalBasis=legal))
    with django_assert_max_num_queries(4):  # token, member, events (bodies joined)
        response = surface_api.get(URL, {"userId": str(member.public_id)})
    assert len(response.json()["results"]) == 4


def test_active_derives_consents_entries_and_scopes_for_the_asking_surface(
    surface_api, member
) -> None:
    for data in (body(member), sensitive(member), sensitive(member, "financial")):
        assert post(surface_api, data).status_code == 201
    assert post(surface_api, sensitive(member, "financial", status="revoked")).status_code == 201

    active = surface_api.get(ACTIVE, {"userId": str(member.public_id)}).json()
    assert [c["type"] for c in active["consents"]] == ["category:medical", "data_processing"]
    medical = active["consents"][0]
    assert medical["source"] == "inline-prompt" and medical["grantedAt"].endswith("Z")
    entries = {e["category"]: e for e in active["entries"]}
    assert set(entries) == {"medical", "financial"}
    assert entries["medical"]["revokedAt"] is None
    assert entries["financial"]["revokedAt"] is not None
    assert active["optOuts"] == []
    assert len(active["scopes"]) == 11
    assert active["scopes"]["session"] == {
        "enabled": True,
        "mode": "ephemeral",
        "notes": [
            "Session memory runs ephemerally: nothing is stored without data storage consent."
        ],
    }
    # Asked by the assistant surface: operator-only scopes say so.
    assert (
        "Consumer assistant is not allowed to use this scope."
        in (active["scopes"]["admin_review"]["notes"])
    )


# ---------------------------------------------------------------- who may call


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", URL), ("post", URL), ("get", ACTIVE)],
    ids=["list", "post", "active"],
)
def test_anonymous_is_refused_with_401(api, member, method, url) -> None:
    response = getattr(api, method)(url, body(member) if method == "post" else None, format="json")
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM
    assert not ConsentEvent.objects.exists()


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", URL), ("post", URL), ("get", ACTIVE)],
    ids=["list", "post", "active"],
)
def test_another_tenants_surface_gets_404(foreign_surface_api, member, method, url) -> None:
    if method == "post":
        response = post(foreign_surface_api, body(member))
    else:
        response = foreign_surface_api.get(url, {"userId": str(member.public_id)})
    assert response.status_code == 404
    assert response.json()["code"] == "not-found"
    assert not ConsentEvent.objects.exists()


def test_a_member_of_another_tenant_is_404_for_our_surface(surface_api, foreign_member) -> None:
    assert post(surface_api, body(foreign_member)).status_code == 404
    assert surface_api.get(URL, {"userId": str(foreign_member.public_id)}).status_code == 404
    assert surface_api.get(URL, {"userId": str(uuid.uuid4())}).status_code == 404
    assert not ConsentEvent.objects.exists()


def test_a_member_cannot_act_for_another_member(member_api, other_member) -> None:
    data = body(other_member, captureMethod="settings-toggle")
    assert post(member_api, data).status_code == 404
    assert member_api.get(ACTIVE, {"userId": str(other_member.public_id)}).status_code == 404
    assert not ConsentEvent.objects.exists()


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", URL), ("post", URL), ("get", ACTIVE)],
    ids=["list", "post", "active"],
)
def test_operators_get_404(operator_api, member, method, url) -> None:
    if method == "post":
        response = post(operator_api, body(member))
    else:
        response = operator_api.get(url, {"userId": str(member.public_id)})
    assert response.status_code == 404
    assert not ConsentEvent.objects.exists()


def test_a_member_session_cannot_claim_a_staff_witnessed_consent(member_api, member) -> None:
    data = body(member, captureMethod="operator-recorded", witness="Me, honestly")
    response = post(member_api, data)
    assert response.status_code == 403
    assert response.json()["code"] == "capture-method-not-allowed"
    error = response.json()["errors"][0]
    assert error["field"] == "captureMethod"
    assert error["allowed"] == ["inline-prompt", "settings-toggle"]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("overrides", "field", "allowed"),
    [
        ({"type": "telepathy"}, "type", "category:medical"),
        ({"status": "maybe"}, "status", "revoked"),
        ({"legalBasis": "vibes"}, "legalBasis", "legitimate_interests"),
        ({"captureMethod": "carrier-pigeon"}, "captureMethod", "operator-recorded"),
        ({"termsVersion": "1999-01"}, "termsVersion", "2025-09"),
    ],
)
def test_unknown_values_are_400_naming_the_field_and_the_allowed_values(
    surface_api, member, overrides, field, allowed
) -> None:
    response = post(surface_api, body(member, **overrides))
    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    [error] = response.json()["errors"]
    assert error["field"] == field
    assert allowed in error["message"]
    assert consent_writes() == 0


@pytest.mark.parametrize(
    ("overrides", "field", "rule", "allowed"),
    [
        (
            {"type": "category:medical"},
            "legalBasis",
            "art-9-explicit-consent-required",
            ["explicit_consent"],
        ),
        ({"status": "opted-out"}, "status", "status-does-not-match-kind", ["granted", "revoked"]),
        ({"witness": "Someone"}, "witness", "witness-only-for-operator-recorded", None),
        (
            {"captureMethod": "operator-recorded"},
            "witness",
            "witness-required-for-operator-recorded",
            None,
        ),
        ({"occurredAt": "2999-01-01T00:00:00Z"}, "occurredAt", "occurred-after-recorded", None),
    ],
)
def test_ledger_rules_are_400_with_the_wire_field_named(
    surface_api, member, overrides, field, rule, allowed
) -> None:
    response = post(surface_api, body(member, **overrides))
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == (field, rule)
    assert error.get("allowed") == allowed
    assert consent_writes() == 0


def test_revoking_what_was_never_granted_is_409_and_writes_nothing(surface_api, member) -> None:
    response = post(surface_api, sensitive(member, status="revoked"))
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "consent-not-granted"
    assert "not currently granted" in problem["detail"]
    assert consent_writes() == 0


# ---------------------------------------------------------------- idempotency and erasure


def test_a_replay_returns_the_first_answer_and_writes_nothing_new(surface_api, member) -> None:
    first = post(surface_api, sensitive(member), **{"Idempotency-Key": "k-1"})
    again = post(surface_api, sensitive(member), **{"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert ConsentEvent.objects.count() == 1
    assert IdempotencyRecord.objects.get().subject_id == member.public_id


def test_the_same_key_with_another_body_is_refused(surface_api, member) -> None:
    post(surface_api, body(member), **{"Idempotency-Key": "k-2"})
    response = post(surface_api, body(member, type="data_storage"), **{"Idempotency-Key": "k-2"})
    assert response.status_code == 422
    assert ConsentEvent.objects.count() == 1


def test_erasure_also_drops_stored_answers_that_quote_the_erased_event(surface_api, member) -> None:
    # A surface records no witness (issue 19, 5): the consent type is the text to find.
    canary = "category:medical"
    assert post(surface_api, sensitive(member), **{"Idempotency-Key": "k-3"}).status_code == 201
    post(surface_api, body(member), **{"Idempotency-Key": "k-4"})
    assert {table for table, _ in find_in_database(canary)} == {
        "consent_consenteventbody",
        "governance_idempotencyrecord",
    }

    consent_purge_categories(
        principal=Principal.system("dsar", member.tenant_id), member=member, categories=["medical"]
    )

    assert find_in_database(canary) == []
    assert IdempotencyRecord.objects.count() == 1  # the unrelated answer stays
    listed = surface_api.get(URL, {"userId": str(member.public_id)}).json()["results"]
    erased = next(e for e in listed if e["position"] == 1)
    assert erased["erased"] is True
    assert erased["type"] is None and erased["witness"] is None and erased["status"] is None
    assert len(erased["fingerprint"]) == 64


def test_the_schema_documents_the_consent_endpoints(member_api) -> None:
    schema = member_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert {"get", "post"} <= set(schema["paths"]["/api/v1/consents"])
    assert "get" in schema["paths"]["/api/v1/consents/active"]
