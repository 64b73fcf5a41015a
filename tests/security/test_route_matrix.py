"""Every route of the URL resolver, called by every kind of caller: anonymous, member A
(who owns the objects in the URL), member B of the same tenant, each operator role, and
the other tenant's member and operator. What each caller gets is compared with an
explicit table (tests/security/expectations.py): the callers a route serves reach it,
anonymous is sent to sign in (pages) or refused (API), everyone else gets 403 or 404, and
no one but its owner (or the operators of its own tenant, where the console serves them)
reaches member A's objects. The cross-tenant and cross-member rows are part of the table.

A page that answers GET is read; a route that refuses GET with 405 is sent an empty POST
(a form or JSON body with nothing in it), which the routes it serves answer with 200, a
redirect or a 400/409 naming what is missing, and the routes it does not serve refuse
before reading the body."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governance.models import User
from tests.security.expectations import (
    ANON,
    CALLERS,
    FOREIGN_MEMBER,
    FOREIGN_OPERATOR,
    MEMBER_A,
    MEMBER_B,
    OPERATOR_ROLES,
    expected_outcome,
)
from tests.security.routes import Route, all_routes, unnamed_patterns
from tests.security.world import World, leaked

pytestmark = pytest.mark.django_db

ROUTES = all_routes()
MATRIX_SIZE = len(ROUTES) * len(CALLERS)


def outcome(route: Route, response: Any) -> str:
    """The kind of answer: ok, login (redirect to a sign-in page), refused (401/403),
    hidden (404), or the status itself for anything unexpected (a 5xx above all)."""
    status = response.status_code
    location = response.get("Location", "")
    if status in (301, 302, 303) and (
        location.startswith("/accounts/login/") or location.startswith("/admin/login/")
    ):
        return "login"
    if status in (401, 403):
        return "refused"
    if status == 404:
        return "hidden"
    if status >= 500:
        return str(status)
    return "ok"


@pytest.fixture
def callers(people: dict[str, User]) -> dict[str, Client | None]:
    clients: dict[str, Client | None] = {ANON: None}
    for name, user in people.items():
        client = Client()
        client.force_login(user)
        clients[name] = client
    return clients


# Routes whose empty POST is refused for its body before the object is looked up (which
# reveals nothing, as any id gets it): these get a well-formed body, so the matrix sees
# whether the object itself is reachable.
BODIES: dict[str, dict[str, str]] = {
    "approvals-decide": {"decision": "deny"},
    "api-approvals-decide": {"decision": "deny"},
    "api-data-rights-transition": {"to": "cancelled"},
    "api-data-rights-code": {"method": "email-link"},
    "api-data-rights-extend": {"reason": "A complex request."},
    "api-inspection-transition": {"to": "denied", "reasonCode": "not-needed"},
    "api-memory-conflict-answer": {"answer": "keep"},
    "dsar:hold_place": {"hold-reason": "Litigation hold."},
}


def post(client: Client, route: Route, url: str, values: dict[str, str]) -> Any:
    body = dict(BODIES.get(route.name, {}))
    if route.name == "dsar:hold_place":
        body["request_id"] = values["request_id"]
    if route.name.startswith("api-"):
        return client.post(url, json.dumps(body), content_type="application/json")
    return client.post(url, body)


SIGN_OUT = {"logout", "admin:logout"}


def post_order(route: Route) -> tuple[bool, bool, bool]:
    # Pages before the API (an answered conflict is gone for the page), forgetting and
    # signing out last.
    return (route.name in SIGN_OUT, "forget" in route.name, route.name.startswith("api-"))


TEXT_TYPES = ("text/html", "application/json", "application/problem+json")


def shown_to_stranger(caller: str, world: World, text: str) -> list[str]:
    """What of other people's a caller's page shows: a member sees nothing of another
    member; the tenant's operators may see its members' ids (queues, inspections), never
    a memory's text, and nothing of the other tenant; anonymous sees nobody's."""
    own = {MEMBER_A: world.a, MEMBER_B: world.b, FOREIGN_MEMBER: world.foreign}.get(caller)
    lowered = text.lower()
    if caller in OPERATOR_ROLES:
        return leaked(text, [world.foreign]) + [
            o.canary for o in (world.a, world.b) if o.canary.lower() in lowered
        ]
    if caller == FOREIGN_OPERATOR:
        return leaked(text, [world.a, world.b]) + (
            [world.foreign.canary] if world.foreign.canary.lower() in lowered else []
        )
    return leaked(text, [o for o in world.owners() if o is not own])


def test_every_route_has_a_name() -> None:
    # An unnamed route could not be put in the table; name it in its urls.py. The admin's
    # own unnamed patterns only redirect to its named change pages, which are in the table.
    assert [p for p in unnamed_patterns() if not p.startswith("admin/")] == []


def test_every_route_is_in_the_table() -> None:
    missing = [r.name for r in ROUTES if expected_outcome(r.name, MEMBER_A) is None]
    assert missing == [], "routes with no row in tests/security/expectations.py"


def test_route_matrix(
    world: World, callers: dict[str, Client | None], url_values: dict[str, str]
) -> None:
    values = url_values
    mismatches: list[str] = []
    tally: Counter[str] = Counter()
    # The owner last: member A's own POSTs (forget, cancel) may change the objects the
    # other callers are sent to.
    order = [c for c in CALLERS if c != MEMBER_A] + [MEMBER_A]
    for caller in order:
        client = callers[caller] or Client()
        # Every GET first, then the POSTs of the routes that refused GET, forgetting and
        # signing out last, so no call changes what an earlier one was meant to see.
        answers = {r.name: client.get(r.url(values)) for r in ROUTES}
        for route in sorted(ROUTES, key=post_order):
            if answers[route.name].status_code == 405:
                answers[route.name] = post(client, route, route.url(values), values)
        for route in ROUTES:
            response = answers[route.name]
            got = outcome(route, response)
            tally[got] += 1
            want = expected_outcome(route.name, caller)
            if got != want:
                mismatches.append(f"{route.name} as {caller}: {got} ({response.status_code})")
            if got == "ok" and response.get("Content-Type", "").startswith(TEXT_TYPES):
                found = shown_to_stranger(caller, world, response.content.decode(errors="replace"))
                if found:
                    mismatches.append(f"{route.name} as {caller} showed {found}")
    if os.environ.get("IRIS_MATRIX_PROBE"):
        Path(os.environ["IRIS_MATRIX_PROBE"]).write_text("\n".join(mismatches))
    print(f"route matrix: {len(ROUTES)} routes x {len(CALLERS)} callers; {dict(tally)}")
    assert mismatches == []
