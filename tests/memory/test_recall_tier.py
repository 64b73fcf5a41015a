"""The destination tier of a recall belongs to the surface client: registered with it, only
ever narrowed by a request, and the answer says what the tier withheld."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEvent
from governance.principal import Principal
from governance.services import surface_client_create
from memory.recall.service import AUDIT_ACTION, destination_tier
from memory.services import memory_write
from tests.conftest import SYSTEM
from tests.factories import as_member, draft, grant_storage

pytestmark = pytest.mark.django_db

URL = "/api/v1/recall"
BODIES = ["I like my coffee black", "My cat is called Tom", "I live in Berlin"]


@pytest.fixture
def remembered(member) -> None:
    grant_storage(member)
    for body in BODIES:
        memory_write(principal=as_member(member), member=member, draft=draft(member, body))


def client_for(tenant, tier: str) -> APIClient:
    token = surface_client_create(
        actor=SYSTEM, tenant=tenant, surface="assistant", destination_tier=tier
    ).token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def ask(member, tier: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scope": {"kind": "profile"},
        "query": "",  # a briefing: every memory is a candidate, whatever it is about
        "surface": "assistant",
        "context": "general",
    }
    if tier is not None:
        body["destinationTier"] = tier
    return body


# Every memory body is personal: the local tier gets all three, the cloud tier none.
@pytest.mark.parametrize(
    ("registered", "asked", "tier", "returned", "withheld"),
    [
        ("local", None, "local", 3, 0),  # omitted: the client's own tier
        ("local", "local", "local", 3, 0),
        ("local", "cloud", "cloud", 0, 3),  # narrowed
        ("cloud", None, "cloud", 0, 3),  # omitted: the client's own tier
        ("cloud", "cloud", "cloud", 0, 3),
    ],
)
def test_a_request_may_narrow_the_clients_tier(
    tenant, member, remembered, registered, asked, tier, returned, withheld
) -> None:
    response = client_for(tenant, registered).post(URL, ask(member, asked), format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["destinationTier"] == tier
    assert len(data["entries"]) == returned
    assert data["withheldByTier"] == withheld
    counts = data["auditEnvelope"]["suppressionCounts"]
    assert counts.get("egress-personal-to-cloud", 0) == withheld
    (event,) = AuditEvent.objects.filter(action=AUDIT_ACTION)
    assert event.payload["egressTier"] == tier
    assert event.payload["egressWithheld"] == withheld


def test_a_cloud_client_asking_for_local_is_refused_naming_the_field_and_rule(
    tenant, member, remembered
) -> None:
    response = client_for(tenant, "cloud").post(URL, ask(member, "local"), format="json")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "destination-tier-wider-than-client"
    assert problem["registeredTier"] == "cloud"
    [error] = problem["errors"]
    assert error["field"] == "destinationTier" and error["rule"] == "narrow-only"
    assert "only narrow" in error["message"]
    # Refused before anything was recalled: no recall event, no usage recorded.
    assert not AuditEvent.objects.filter(action=AUDIT_ACTION).exists()


@pytest.mark.parametrize(
    ("principal_tier", "asked", "expected"),
    [
        (None, None, "cloud"),  # a surface principal built without its client's tier
        (None, "cloud", "cloud"),
        ("local", "cloud", "cloud"),
        ("local", None, "local"),
    ],
)
def test_the_tier_rule_for_surface_principals(principal_tier, asked, expected) -> None:
    principal = Principal(
        "surface", "s-1", None, surface="assistant", destination_tier=principal_tier
    )
    assert destination_tier(principal, asked) == expected


def test_a_surface_principal_without_a_tier_may_not_ask_for_local() -> None:
    from governance.errors import Forbidden

    principal = Principal("surface", "s-1", None, surface="assistant")
    with pytest.raises(Forbidden):
        destination_tier(principal, "local")


@pytest.mark.parametrize(("asked", "expected"), [(None, "cloud"), ("local", "local")])
def test_the_members_own_session_gets_the_tier_it_asks_for_or_cloud(
    member, asked, expected
) -> None:
    assert destination_tier(as_member(member), asked) == expected


def test_an_unknown_tier_is_400_naming_the_field(member) -> None:
    from governance.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as raised:
        destination_tier(as_member(member), "edge")
    assert raised.value.field == "destinationTier"


def test_the_schema_describes_the_tier_and_the_withheld_count(member_api) -> None:
    schema = member_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    out = schema["components"]["schemas"]["RecallOut"]
    assert {"destinationTier", "withheldByTier"} <= set(out["properties"])
    assert "withheld" in out["properties"]["withheldByTier"]["description"]
    [ref] = out["properties"]["destinationTier"]["allOf"]
    tiers = schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]["enum"]
    assert tiers == ["local", "cloud"]
    assert set(out["required"]) >= {"destinationTier", "withheldByTier"}
