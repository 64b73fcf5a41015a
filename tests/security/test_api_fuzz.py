"""Schemathesis over every operation of `/api/schema/`, in-process through the WSGI app:
once as the tenant's surface client, once as member A's browser session. No answer is a
5xx, every answer fits the schema, and no answer carries a canary or identifier of a
member the caller may not see (the other tenant's member; for the member, member B too).

Ids in paths and `userId` fields are steered, from a hash of the generated case, to
member A's, member B's or the other tenant's objects (or left as generated), so the fuzz
reaches real rows and tries the other members' ones as well. Bounded and derandomised:
`IRIS_FUZZ_EXAMPLES` examples per operation and caller (default 25)."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.wsgi import get_wsgi_application
from django.middleware.csrf import get_token
from django.test import Client, RequestFactory
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
)

from tests.security.world import Owner, World, leaked

EXAMPLES = int(os.environ.get("IRIS_FUZZ_EXAMPLES", "25"))

# What the schema promises of every answer. status_code_conformance is left out: the
# schema lists each operation's successes, not yet its problem answers (docs/assurance.md).
CHECKS = [
    not_a_server_error,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

# The coverage phase (boundary values of every field, about 2,400 calls per caller) is
# for a deeper local run: IRIS_FUZZ_COVERAGE=1.
COVERAGE = os.environ.get("IRIS_FUZZ_COVERAGE") == "1"
SCHEMA = schemathesis.openapi.from_dict(
    SchemaGenerator().get_schema(request=None, public=True),
    config=schemathesis.Config.from_dict({"phases": {"coverage": {"enabled": COVERAGE}}}),
)
SCHEMA.app = get_wsgi_application()

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# Path parameters that name a member's object, and the Owner field that holds its id.
OWNED_PATH_IDS = {"entry_id": "entry_id", "conflict_id": "conflict_id", "request_id": "request_id"}


def _pick(case: Any, choices: list[Owner | None]) -> Owner | None:
    seed = repr((case.path_parameters, case.query, case.body)).encode()
    return choices[zlib.crc32(seed) % len(choices)]


def steer(case: Any, choices: list[Owner | None]) -> None:
    """Point the case's ids at a seeded member's objects (None keeps what was generated)."""
    owner = _pick(case, choices)
    if owner is None:
        return
    for name, attribute in OWNED_PATH_IDS.items():
        if case.path_parameters and name in case.path_parameters:
            case.path_parameters[name] = getattr(owner, attribute)
    if isinstance(case.query, dict) and "userId" in case.query:
        case.query["userId"] = owner.user_id
    if isinstance(case.body, dict) and "userId" in case.body:
        case.body["userId"] = owner.user_id


def request_text(case: Any) -> str:
    return json.dumps([case.path_parameters, case.query, case.body], default=str)


def assert_nothing_leaked(case: Any, response: Any, owners: list[Owner]) -> None:
    """No canary of `owners` in the answer; none of their ids either, unless the caller
    sent that id itself (an echo of one's own input discloses nothing)."""
    sent = request_text(case).lower()
    # Bytes, since an export bundle is binary (encrypted: a canary could not show anyway).
    body = response.content.decode("utf-8", errors="replace")
    found = [s for s in leaked(body, owners) if s.lower() not in sent]
    assert not found, f"{case.method} {case.formatted_path} answered with {found}"


@pytest.fixture
def member_session(world: World) -> tuple[dict[str, str], dict[str, str]]:
    """Cookies and headers of member A's signed-in browser, CSRF token included."""
    client = Client()
    client.force_login(world.a.member)
    request = RequestFactory().get("/")
    token = get_token(request)
    session = django_settings.SESSION_COOKIE_NAME
    cookies = {
        session: client.cookies[session].value,
        django_settings.CSRF_COOKIE_NAME: request.META["CSRF_COOKIE"],
    }
    return cookies, {"X-CSRFToken": token}


# Each call commits on its own, as in production: inside one test transaction a refused
# statement on PostgreSQL would break every later call of the test.
@pytest.mark.django_db(transaction=True)
@SCHEMA.parametrize()
@FUZZ
def test_surface_fuzz(case, world: World, surface_token: str) -> None:
    steer(case, [world.a, world.b, world.foreign, None])
    response = case.call(headers={"Authorization": f"Bearer {surface_token}"})
    case.validate_response(response, checks=CHECKS)
    # A surface acts for any member of its own tenant, never for the other tenant's.
    # The event feed is the tenant's own, by design (docs/decisions/events.md): ids of any
    # of its members, never of the other tenant's.
    named = request_text(case)
    tenant_feed = case.formatted_path == "/api/v1/events"
    hidden = [
        o
        for o in world.owners()
        if o is world.foreign or (o.user_id not in named and not tenant_feed)
    ]
    assert_nothing_leaked(case, response, hidden)


# Each call commits on its own, as in production: inside one test transaction a refused
# statement on PostgreSQL would break every later call of the test.
@pytest.mark.django_db(transaction=True)
@SCHEMA.parametrize()
@FUZZ
def test_member_session_fuzz(case, world: World, member_session) -> None:
    steer(case, [world.a, world.b, world.foreign, None])
    cookies, headers = member_session
    response = case.call(headers=headers, cookies=cookies)
    case.validate_response(response, checks=CHECKS)
    assert_nothing_leaked(case, response, [world.b, world.foreign])


@pytest.mark.django_db(transaction=True)
def test_the_fuzzing_callers_are_signed_in(world: World, surface_token: str, member_session):
    """The fuzz is not vacuous: the same transport, cookies and headers reach real answers
    (a read and a CSRF-checked write as the member, a read as the surface)."""
    cookies, headers = member_session
    as_member = {"headers": headers, "cookies": cookies}
    read = SCHEMA["/api/v1/memories"]["GET"].Case(query={"userId": world.a.user_id})
    assert read.call(**as_member).status_code == 200
    write = SCHEMA["/api/v1/off-the-record"]["POST"].Case(body={"userId": world.a.user_id})
    assert write.call(**as_member).status_code in (200, 409)
    surface = {"Authorization": f"Bearer {surface_token}"}
    assert read.call(headers=surface).status_code == 200
