"""The memory API: the endpoint checklist for every route, bad input, paging, idempotency."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEvent
from memory.models import MemoryEntry
from memory.services import memory_write
from tests.factories import as_member, counts, draft, grant_storage, payload

pytestmark = pytest.mark.django_db
PROBLEM = "application/problem+json"

ENTRY_FIELDS = {
    "id",
    "revisionId",
    "tenantId",
    "userId",
    "scope",
    "scopeKey",
    "category",
    "body",
    "subject",
    "origin",
    "lifecycle",
    "suppression",
    "multiActor",
    "consents",
    "provenanceChain",
    "referenceCount",
    "lastReferencedAt",
    "createdAt",
    "updatedAt",
    "revision",
    "supersedes",
}


@dataclass
class World:
    member: Any
    entry_id: str
    conflict_id: str


@pytest.fixture
def world(member) -> World:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "My home city is Berlin")
    ).entry
    conflict = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "My home city is Paris")
    ).conflict
    return World(member, str(entry.entry_id), str(conflict.id))


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    url: Callable[[World], str]
    data: Callable[[World, str], dict[str, Any]]  # (world, userId) -> body or query
    ok: int
    bad: dict[str, Any]  # merged into a valid request
    bad_field: str


def _uid(_w: World, user_id: str) -> dict[str, Any]:
    return {"userId": user_id}


ENDPOINTS = [
    Endpoint(
        "list", "get", lambda w: "/api/v1/memories", _uid, 200, {"lifecycle": "x"}, "lifecycle"
    ),
    Endpoint(
        "write",
        "post",
        lambda w: "/api/v1/memories",
        lambda w, u: {**payload(w.member, body="I like jazz", category="fact"), "userId": u},
        201,
        {"body": ""},
        "body",
    ),
    Endpoint(
        "get",
        "get",
        lambda w: f"/api/v1/memories/{w.entry_id}",
        _uid,
        200,
        {"userId": None},
        "userId",
    ),
    Endpoint(
        "correct",
        "patch",
        lambda w: f"/api/v1/memories/{w.entry_id}",
        lambda w, u: {"userId": u, "body": "My home city is Bonn"},
        200,
        {"body": "x" * 4001},
        "body",
    ),
    Endpoint(
        "history",
        "get",
        lambda w: f"/api/v1/memories/{w.entry_id}/history",
        _uid,
        200,
        {"userId": None},
        "userId",
    ),
    Endpoint(
        "forget",
        "post",
        lambda w: f"/api/v1/memories/{w.entry_id}/forget",
        _uid,
        200,
        {"runId": "not-a-run"},
        "runId",
    ),
    Endpoint(
        "pause",
        "post",
        lambda w: f"/api/v1/memories/{w.entry_id}/pause",
        _uid,
        200,
        {"endsAt": "tomorrow"},
        "endsAt",
    ),
    Endpoint(
        "resume",
        "post",
        lambda w: f"/api/v1/memories/{w.entry_id}/resume",
        _uid,
        200,
        {"canPause": "perhaps"},
        "canPause",
    ),
    Endpoint(
        "confirm",
        "post",
        lambda w: f"/api/v1/memories/{w.entry_id}/confirm",
        _uid,
        200,
        {"approvalId": "nope"},
        "approvalId",
    ),
    Endpoint(
        "scope",
        "post",
        lambda w: f"/api/v1/memories/{w.entry_id}/scope",
        lambda w, u: {"userId": u, "scope": {"kind": "notebook", "userId": u, "notebookId": "n1"}},
        200,
        {"scope": {"kind": "galaxy"}},
        "scope.kind",
    ),
    Endpoint(
        "conflict-answer",
        "post",
        lambda w: f"/api/v1/memories/conflicts/{w.conflict_id}/answer",
        lambda w, u: {"userId": u, "answer": "keep"},
        200,
        {"answer": "maybe"},
        "answer",
    ),
    Endpoint(
        "actors-forget",
        "post",
        lambda w: "/api/v1/actors/forget",
        lambda w, u: {"userId": u, "actorName": "Anna"},
        202,  # destructive: held for the owner's approval
        {"actorName": "", "actorHandle": "actor_x"},
        "actorName",
    ),
    Endpoint(
        "otr-status",
        "get",
        lambda w: "/api/v1/off-the-record",
        lambda w, u: {"userId": u, "sessionId": "s1"},
        200,
        {"surface": "teletext"},
        "surface",
    ),
    Endpoint(
        "otr-on",
        "post",
        lambda w: "/api/v1/off-the-record",
        lambda w, u: {"userId": u, "sessionId": "s1"},
        200,
        {"sessionId": "s" * 200},
        "sessionId",
    ),
    Endpoint(
        "otr-off",
        "delete",
        lambda w: "/api/v1/off-the-record",
        lambda w, u: {"userId": u, "sessionId": "s1"},
        200,
        {"surface": "teletext"},
        "surface",
    ),
]
IDS = [e.name for e in ENDPOINTS]


def call(client: APIClient, endpoint: Endpoint, world: World, data: dict[str, Any]):
    data = {k: v for k, v in data.items() if v is not None}
    url = endpoint.url(world)
    if endpoint.method in {"get", "delete"}:
        return getattr(client, endpoint.method)(url, data)
    return getattr(client, endpoint.method)(url, data, format="json")


def delete_query(client: APIClient, url: str, data: dict[str, Any]):
    from urllib.parse import urlencode

    return client.delete(f"{url}?{urlencode(data)}")


def request(client: APIClient, endpoint: Endpoint, world: World, data: dict[str, Any]):
    data = {k: v for k, v in data.items() if v is not None}
    if endpoint.method == "delete":
        return delete_query(client, endpoint.url(world), data)
    return call(client, endpoint, world, data)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_works_for_a_surface_acting_for_its_member(surface_api, world, endpoint) -> None:
    response = request(
        surface_api, endpoint, world, endpoint.data(world, str(world.member.public_id))
    )
    assert response.status_code == endpoint.ok, response.content


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_works_for_the_member_themself(member_api, world, endpoint) -> None:
    data = endpoint.data(world, str(world.member.public_id))
    data.pop("userId")  # a member acts for themself without naming anyone
    response = request(member_api, endpoint, world, data)
    assert response.status_code == endpoint.ok, response.content


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_anonymous_is_401(api, world, endpoint) -> None:
    before = counts()
    response = request(api, endpoint, world, endpoint.data(world, str(world.member.public_id)))
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM
    assert counts() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_another_tenants_surface_gets_404(foreign_surface_token, world, endpoint) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    before = counts()
    response = request(client, endpoint, world, endpoint.data(world, str(world.member.public_id)))
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not-found"
    assert counts() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_another_member_gets_404(other_member, world, endpoint) -> None:
    client = APIClient()
    client.force_login(other_member)
    before = counts()
    response = request(client, endpoint, world, endpoint.data(world, str(world.member.public_id)))
    assert response.status_code == 404, response.content
    assert counts() == before


ENTRY_ROUTES = [
    e
    for e in ENDPOINTS
    if e.name
    in {
        "get",
        "correct",
        "history",
        "forget",
        "pause",
        "resume",
        "confirm",
        "scope",
        "conflict-answer",
    }
]


@pytest.mark.parametrize("endpoint", ENTRY_ROUTES, ids=[e.name for e in ENTRY_ROUTES])
def test_another_member_cannot_reach_the_entry_by_id(other_member, world, endpoint) -> None:
    client = APIClient()
    client.force_login(other_member)
    data = endpoint.data(world, str(other_member.public_id))
    data.pop("userId")
    if endpoint.name == "scope":
        data["scope"]["userId"] = str(other_member.public_id)
    before = counts()
    response = request(client, endpoint, world, data)
    assert response.status_code == 404, response.content
    assert counts() == before


@pytest.mark.parametrize("endpoint", ENTRY_ROUTES, ids=[e.name for e in ENTRY_ROUTES])
def test_a_surface_naming_another_member_cannot_reach_the_entry(
    surface_api, other_member, world, endpoint
) -> None:
    data = endpoint.data(world, str(other_member.public_id))
    if endpoint.name == "scope":
        data["scope"]["userId"] = str(other_member.public_id)
    before = counts()
    response = request(surface_api, endpoint, world, data)
    assert response.status_code == 404, response.content
    assert counts() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_an_operator_gets_404(make_operator, world, endpoint) -> None:
    client = APIClient()
    client.force_login(make_operator("admin"))
    before = counts()
    response = request(client, endpoint, world, endpoint.data(world, str(world.member.public_id)))
    assert response.status_code == 404, response.content
    assert counts() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_bad_input_is_400_naming_the_field(surface_api, world, endpoint) -> None:
    data = {**endpoint.data(world, str(world.member.public_id)), **endpoint.bad}
    before = counts()
    response = request(surface_api, endpoint, world, data)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    fields = [e["field"] for e in response.json()["errors"]]
    assert endpoint.bad_field in fields
    assert counts() == before


# ----------------------------------------------------------------- the write contract


def post(client: APIClient, body: dict[str, Any]):
    return client.post("/api/v1/memories", body, format="json")


@pytest.mark.parametrize(
    ("override", "field", "rule"),
    [
        ({"body": ""}, "body", "blank"),
        ({"body": "   "}, "body", "blank"),
        ({"body": "x" * 4001}, "body", "max_length"),
        ({"category": "gossip"}, "category", "invalid_choice"),
        ({"origin": "hearsay"}, "origin", "invalid_choice"),
        ({"adapterScope": "everywhere"}, "adapterScope", "invalid_choice"),
        ({"scope": {"kind": "session", "userId": "U"}}, "scope.sessionId", "missing"),
        (
            {"scope": {"kind": "profile", "userId": "U", "sessionId": "s"}},
            "scope.sessionId",
            "unexpected",
        ),
        ({"scope": {"kind": "cosmos", "userId": "U"}}, "scope.kind", "invalid_choice"),
        (
            {"multiActor": {"actorName": "Anna", "relationshipNote": "n" * 501}},
            "multiActor.relationshipNote",
            "max_length",
        ),
        (
            {"multiActor": {"relationshipNote": "sister"}},
            "multiActor.actorName",
            "one-of-actorName-actorHandle",
        ),
        (
            {"suppression": {"reason": "forgetful", "startedAt": "2025-01-01T00:00:00Z"}},
            "suppression.reason",
            "invalid_choice",
        ),
        (
            {
                "provenanceChain": [
                    {"kind": "rumour", "ref": "r", "capturedAt": "2025-01-01T00:00:00Z"}
                ]
            },
            "provenanceChain[0].kind",
            "invalid_choice",
        ),
        (
            {
                "provenanceChain": [
                    {"kind": "session-turn", "ref": "r", "capturedAt": "2025-01-01T00:00:00"}
                ]
            },
            "provenanceChain[0].capturedAt",
            "timezone",
        ),
    ],
)
def test_bad_writes_name_field_and_rule_and_write_nothing(
    surface_api, ready, override, field, rule
) -> None:
    body = payload(ready, **override)
    if "scope" in override:
        body["scope"] = {
            k: (str(ready.public_id) if v == "U" else v) for k, v in override["scope"].items()
        }
    before = counts()
    response = post(surface_api, body)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    names = {field}
    assert any(e["field"] in names and e["rule"] == rule for e in errors), errors
    if rule == "invalid_choice":
        assert "allowed values" in next(e["message"] for e in errors if e["field"] in names)
    assert counts() == before


def test_service_rules_answer_with_field_rule_and_allowed_values(surface_api, ready) -> None:
    before = counts()
    response = post(surface_api, payload(ready, adapterScope="session"))
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "adapterScope" and "assistant_profile" in error["allowed"]
    response = post(
        surface_api,
        payload(
            ready,
            suppression={"reason": "user-pause", "startedAt": "2025-01-01T00:00:00Z"},
        ),
    )
    assert response.json()["errors"][0]["rule"] == "set-by-pause-only"
    assert counts() == before


def test_another_tenants_member_is_404_and_nothing_is_written(
    surface_api, ready, foreign_member
) -> None:
    before = counts()
    response = post(surface_api, {**payload(ready), "userId": str(foreign_member.public_id)})
    assert response.status_code == 404
    assert counts() == before


def test_a_surface_must_name_the_member(surface_api, ready) -> None:
    body = payload(ready)
    body.pop("userId")
    response = post(surface_api, body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "userId"


def test_sensitive_write_without_consent_is_403_with_reason(surface_api, ready) -> None:
    before_rows = MemoryEntry.objects.count()
    response = post(surface_api, payload(ready, category="medical", body="I have asthma"))
    assert response.status_code == 403
    assert response.json()["code"] == "sensitive-category-without-consent"
    assert MemoryEntry.objects.count() == before_rows
    assert not AuditEvent.objects.filter(action__startswith="iris.memory.").exists()


def test_a_suppressed_scope_is_403_with_the_policy_notes(surface_api, member) -> None:
    response = post(surface_api, payload(member))
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "scope-suppressed"
    assert "Assistant profile memory requires data processing consent." in body["notes"]


def test_written_entry_is_the_spec_contract(surface_api, ready) -> None:
    response = post(surface_api, payload(ready))
    assert response.status_code == 201
    body = response.json()
    assert set(body) == ENTRY_FIELDS
    assert body["scope"] == {"kind": "profile", "userId": str(ready.public_id)}
    assert body["userId"] == str(ready.public_id) and body["tenantId"] == str(ready.tenant_id)
    assert body["createdAt"].endswith("Z") and body["lastReferencedAt"] is None
    assert (body["revision"], body["supersedes"], body["lifecycle"]) == (1, None, "active")
    assert response["Location"] == f"/api/v1/memories/{body['id']}"


def test_off_the_record_write_says_nothing_was_written(surface_api, ready) -> None:
    user = str(ready.public_id)
    assert (
        surface_api.post("/api/v1/off-the-record", {"userId": user}, format="json").json()["active"]
        is True
    )
    before = counts()
    response = post(surface_api, payload(ready))
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "off-the-record" and "nothing was written" in problem["detail"]
    assert "errors" not in problem and "entry" not in problem
    assert counts() == before
    status = surface_api.get("/api/v1/off-the-record", {"userId": user, "sessionId": "any"})
    assert status.json()["active"] is True
    surface_api.delete(f"/api/v1/off-the-record?userId={user}")
    assert post(surface_api, payload(ready)).status_code == 201


def test_a_replayed_write_returns_the_first_answer(surface_api, ready) -> None:
    first = surface_api.post(
        "/api/v1/memories", payload(ready), format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    again = surface_api.post(
        "/api/v1/memories", payload(ready), format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert MemoryEntry.objects.count() == 1


def test_forgetting_drops_stored_answers_that_quote_the_memory(surface_api, ready) -> None:
    from governance.models import IdempotencyRecord

    body = payload(ready, body="Canary-k2 my lucky number is 7", category="fact")
    created = surface_api.post("/api/v1/memories", body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert IdempotencyRecord.objects.filter(subject_id=ready.public_id).count() == 1
    forgotten = surface_api.post(
        f"/api/v1/memories/{created.json()['id']}/forget",
        {"userId": str(ready.public_id)},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-3",
    )
    assert forgotten.status_code == 200 and "body" not in forgotten.json()
    stored = IdempotencyRecord.objects.filter(subject_id=ready.public_id)
    assert all("Canary-k2" not in str(r.response_body) for r in stored)


def test_list_pages_and_filters(surface_api, ready) -> None:
    user = str(ready.public_id)
    for i in range(5):
        post(surface_api, payload(ready, body=f"Fact {i} is remembered", category="fact"))
    post(surface_api, payload(ready, body="I like tea", category="preference"))
    seen: list[str] = []
    cursor = None
    while True:
        params = {"userId": user, "category": "fact", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = surface_api.get("/api/v1/memories", params).json()
        seen += [e["id"] for e in page["results"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5
    by_scope = surface_api.get("/api/v1/memories", {"userId": user, "scope": f"profile:{user}"})
    assert len(by_scope.json()["results"]) == 6
    bad = surface_api.get("/api/v1/memories", {"userId": user, "cursor": "%%%"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "cursor"


def test_list_query_count_does_not_grow_with_entries(
    surface_api, ready, django_assert_max_num_queries
) -> None:
    for i in range(12):
        post(surface_api, payload(ready, body=f"Fact {i} is remembered", category="fact"))
    with django_assert_max_num_queries(6):
        response = surface_api.get("/api/v1/memories", {"userId": str(ready.public_id)})
    assert len(response.json()["results"]) == 12


def test_held_destructive_call_answers_202_with_the_approval(surface_api, ready) -> None:
    response = surface_api.post(
        "/api/v1/actors/forget",
        {"userId": str(ready.public_id), "actorName": "Anna"},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["code"] == "held-for-approval" and response.json()["approvalId"]


def test_history_lists_every_revision(surface_api, ready) -> None:
    user = str(ready.public_id)
    entry = post(surface_api, payload(ready)).json()
    surface_api.patch(
        f"/api/v1/memories/{entry['id']}",
        {"userId": user, "body": "My favourite colour is green"},
        format="json",
    )
    history = surface_api.get(f"/api/v1/memories/{entry['id']}/history", {"userId": user}).json()
    revisions = history["revisions"]
    assert [r["revision"] for r in revisions] == [1, 2]
    assert [r["lifecycle"] for r in revisions] == ["superseded", "active"]
    assert revisions[1]["supersedes"] == revisions[0]["revisionId"]


def test_writing_into_a_forgotten_entry_is_409(surface_api, ready) -> None:
    user = str(ready.public_id)
    entry = post(surface_api, payload(ready)).json()
    surface_api.post(f"/api/v1/memories/{entry['id']}/forget", {"userId": user}, format="json")
    before = counts()
    response = surface_api.patch(
        f"/api/v1/memories/{entry['id']}", {"userId": user, "body": "again"}, format="json"
    )
    assert response.status_code == 409 and response.json()["code"] == "entry-tombstoned"
    assert counts() == before
    assert surface_api.get(f"/api/v1/memories/{entry['id']}", {"userId": user}).status_code == 404
