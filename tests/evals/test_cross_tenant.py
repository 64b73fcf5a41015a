"""Cross-tenant suite (spec: "every cross-tenant query rejected at the tenant-boundary
gate"): a generated matrix of every route of the API and every page that takes an id,
each method, called by another tenant's surface, member and operators, aimed at this
tenant's member and objects. Routes are read from the URL resolver, so a route added
later is covered without editing this file. Each call is also made with made-up ids (the
control): an object of another tenant must be indistinguishable from one that does not
exist — a 404 where the caller's role may use the route, or the very same refusal (a
role's 403, a validation 400) as for the made-up ids. No answer carries anything of this
tenant, and nothing of this tenant changes."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from dsar import work
from dsar.models import DataRightsRequest
from governance.models import AuditEvent
from inspection.models import Inspection
from memory.continuity.models import ContinuationToken
from memory.models import MemoryEntry
from tests.evals.support import MEMORIES, place
from tests.factories import payload

pytestmark = pytest.mark.django_db

CANARY = "Qvellichor8812"
METHODS = ("get", "post", "patch", "put", "delete")
OPEN_ROUTES = {"api/v1/health", "api/v1/data-rights/signing-key"}  # nobody's data
PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


def routes() -> Iterator[tuple[str, object]]:
    def walk(patterns, prefix: str = "") -> Iterator[tuple[str, object]]:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.callback

    yield from walk(get_resolver().url_patterns)


def api_routes() -> list[tuple[str, list[str]]]:
    found = []
    for route, view in routes():
        cls = getattr(view, "cls", None)
        if route.startswith("api/v1/") and route not in OPEN_ROUTES and cls is not None:
            found.append((route, [m for m in METHODS if hasattr(cls, m)]))
    return found


def page_routes() -> list[str]:
    return [
        r
        for r, _ in routes()
        if not r.startswith(("api/", "admin/")) and PARAM.search(r) and "uuid" in r
    ]


@pytest.fixture
def ours(ready, surface_api, make_operator, ops, remembered):
    """The member's data in this tenant: a memory, an open question, a processed export, a
    granted inspection, an approval waiting, a continuation token."""
    user = str(ready.public_id)
    entry = surface_api.post(
        MEMORIES, payload(ready, body=f"My home city is {CANARY}", category="fact"), format="json"
    ).json()
    conflict = surface_api.post(
        MEMORIES, payload(ready, body="My home city is Porto", category="fact"), format="json"
    ).json()
    request = surface_api.post(
        "/api/v1/data-rights", {"userId": user, "kind": "export"}, format="json"
    ).json()
    work.process(request["id"])
    held = surface_api.post(
        "/api/v1/actors/forget", {"userId": user, "actorName": "Anna"}, format="json"
    ).json()
    support = APIClient()
    support.force_login(ops["support"])
    inspection = support.post(
        "/api/v1/inspections",
        {"userId": user, "path": "routine-review", "justification": "A reminder was wrong."},
        format="json",
    ).json()
    admin = APIClient()
    admin.force_login(ops["admin"])
    assert (
        admin.post(
            f"/api/v1/inspections/{inspection['id']}/transition", {"to": "granted"}, format="json"
        ).status_code
        == 200
    )
    token = surface_api.post("/api/v1/continuation-tokens", place(user), format="json").json()
    ids = {
        "entry_id": entry["id"],
        "conflict_id": conflict["conflictId"],
        "request_id": request["id"],
        "approval_id": held["approvalId"],
        "inspection_id": inspection["id"],
        "member_id": user,
        "run_id": "run-ours-1",
    }
    secrets = {CANARY, user, str(ready.tenant_id), token["token"]["id"], *ids.values()}
    return ids, secrets


def fill(route: str, ids: dict[str, str]) -> str:
    return "/" + PARAM.sub(lambda m: ids[m.group(2)], route)


def body_for(route: str, user: str) -> dict:
    """A plausible body, so a refusal is the tenant gate's and not a validation error."""
    bodies = {
        "api/v1/memories": payload(None or _Member(user), body="I like tea"),
        "api/v1/recall": {
            "userId": user,
            "scope": {"kind": "profile"},
            "query": "home city",
            "surface": "assistant",
            "context": "general",
        },
        "api/v1/consents": {
            "userId": user,
            "type": "data_processing",
            "status": "granted",
            "legalBasis": "consent",
            "captureMethod": "inline-prompt",
        },
        "api/v1/data-rights": {"userId": user, "kind": "access"},
        "api/v1/inspections": {
            "userId": user,
            "path": "routine-review",
            "justification": "Routine check.",
        },
        "api/v1/actors/forget": {"userId": user, "actorName": "Anna"},
    }
    if route in bodies:
        return bodies[route]
    extra: dict = {"userId": user}
    if route.endswith("/transition"):
        extra["to"] = "closed"
    if route.endswith("/decide"):
        extra["decision"] = "approve"
    if route.endswith("/answer"):
        extra["answer"] = "update"
    if route.endswith("/scope"):
        extra["scope"] = {"kind": "session", "userId": user, "sessionId": "s-9"}
    if route.endswith("<uuid:entry_id>"):
        extra["body"] = "I like tea"
    return extra


class _Member:
    def __init__(self, user: str) -> None:
        self.public_id = user


def state_of_ours(ids) -> tuple:
    return (
        ContinuationToken.objects.filter(member__public_id=ids["member_id"]).count(),
        MemoryEntry.objects.filter(entry_id=ids["entry_id"]).count(),
        MemoryEntry.objects.get(entry_id=ids["entry_id"], is_current=True).lifecycle,
        DataRightsRequest.objects.get(id=ids["request_id"]).state,
        Inspection.objects.get(id=ids["inspection_id"]).state,
    )


@pytest.fixture
def foreigners(foreign_member, foreign_surface_token, other_tenant, make_operator):
    surface = APIClient()
    surface.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    callers = {"surface": surface}
    member = APIClient()
    member.force_login(foreign_member)
    callers["member"] = member
    # The operator roles that own member-data routes (inspections, the data-rights queue);
    # the per-role matrix within one tenant is the security suite's.
    for role in ("admin", "legal"):
        client = APIClient()
        client.force_login(make_operator(role, of_tenant=other_tenant))
        callers[role] = client
    return callers


def made_up(ids: dict[str, str]) -> dict[str, str]:
    return {k: ("run-made-up-1" if k == "run_id" else str(uuid.uuid4())) for k in ids}


def call(client, method: str, url: str, route: str, user: str):
    if method == "get":
        return client.get(url, {"userId": user})
    if method == "delete":
        # The member named in the query and in the body alike.
        return client.delete(
            f"{url}?userId={user}", json.dumps({"userId": user}), content_type="application/json"
        )
    return getattr(client, method)(url, body_for(route, user), format="json")


def verdict(answer) -> tuple[int, str | None]:
    code = None
    if answer.get("Content-Type", "").startswith("application/problem+json"):
        code = json.loads(answer.content).get("code")
    return answer.status_code, code


def test_every_route_refuses_every_caller_of_another_tenant(ours, foreigners, metric) -> None:
    ids, secrets = ours
    control_ids = made_up(ids)
    before = state_of_ours(ids)
    tenant_events = AuditEvent.objects.filter(tenant_id=ours_tenant(ids)).count()
    statuses: Counter[int] = Counter()
    leaks: list[tuple] = []
    distinguishable: list[tuple] = []
    calls = 0

    def check(who: str, kind: str, route: str, answer, control: Callable[[], object]) -> None:
        nonlocal calls
        calls += 1
        statuses[answer.status_code] += 1
        if any(s in _text(answer) for s in secrets):
            leaks.append((who, kind, route, answer.status_code))
        if answer.status_code != 404:
            expected = verdict(control())
            if verdict(answer) != expected:
                distinguishable.append((who, kind, route, verdict(answer), expected))

    for route, methods in api_routes():
        for method in methods:
            for who, client in foreigners.items():
                answer = call(client, method, fill(route, ids), route, ids["member_id"])
                check(
                    who,
                    method,
                    route,
                    answer,
                    lambda c=client, m=method, r=route: call(
                        c, m, fill(r, control_ids), r, control_ids["member_id"]
                    ),
                )
    for route in page_routes():
        for who, client in foreigners.items():
            if who == "surface":
                continue
            method = "get"
            answer = client.get(fill(route, ids))
            if answer.status_code == 405:
                method = "post"
                answer = client.post(fill(route, ids), {})
            check(
                who,
                "page",
                route,
                answer,
                lambda c=client, m=method, r=route: getattr(c, m)(fill(r, control_ids)),
            )
    metric(
        "cross-tenant",
        calls=calls,
        refused_404=statuses[404],
        refused_same_as_made_up_ids=calls - statuses[404] - len(distinguishable),
        distinguishable=len(distinguishable),
        leaks=len(leaks),
        api_routes=len(api_routes()),
        page_routes=len(page_routes()),
    )
    assert leaks == []
    assert distinguishable == [], "\n".join(map(str, distinguishable))
    assert state_of_ours(ids) == before
    assert AuditEvent.objects.filter(tenant_id=ours_tenant(ids)).count() == tenant_events


def ours_tenant(ids) -> object:
    return MemoryEntry.objects.get(entry_id=ids["entry_id"], is_current=True).tenant_id


def _text(answer) -> str:
    if getattr(answer, "streaming", False):
        return b"".join(answer.streaming_content).decode(errors="replace")
    return answer.content.decode(errors="replace")


def test_the_matrix_reaches_every_kind_of_object() -> None:
    text = json.dumps([r for r, _ in api_routes()] + page_routes())
    for name in ("entry_id", "conflict_id", "request_id", "approval_id", "inspection_id"):
        assert f"<uuid:{name}>" in text
