"""`GET /api/v1/events`: a tenant's events by cursor, for its surface clients only."""

from __future__ import annotations

import pytest

from tests.factories import written

URL = "/api/v1/events"
PROBLEM = "application/problem+json"
BODY = "My sister Maud is expecting twins in March"

pytestmark = pytest.mark.django_db


def test_a_surface_catches_up_page_by_page(surface_api, ready) -> None:
    written(ready, BODY)
    written(ready, "I live in Lisbon", category="fact")
    everything = surface_api.get(URL).json()
    cursors = [e["cursor"] for e in everything["results"]]
    assert cursors == list(range(1, len(cursors) + 1))
    assert everything["hasMore"] is False and everything["nextCursor"] == cursors[-1]
    types = [e["type"] for e in everything["results"]]
    assert types.count("memory.written") == 2 and "consent.changed" in types
    first = surface_api.get(URL, {"limit": 2}).json()
    assert [e["cursor"] for e in first["results"]] == [1, 2] and first["hasMore"] is True
    rest = surface_api.get(URL, {"after": first["nextCursor"], "limit": 500}).json()
    assert [e["cursor"] for e in rest["results"]] == cursors[2:]
    assert surface_api.get(URL, {"after": cursors[-1]}).json() == {
        "results": [],
        "nextCursor": cursors[-1],
        "hasMore": False,
    }
    response = surface_api.get(URL)
    assert BODY.encode() not in response.content and b"Maud" not in response.content


def test_another_tenant_s_events_never_appear(surface_api, foreign_surface_token, ready) -> None:
    from rest_framework.test import APIClient

    written(ready, BODY)
    foreign = APIClient()
    foreign.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    answer = foreign.get(URL).json()
    assert all(e["tenantId"] != str(ready.tenant_id) for e in answer["results"])
    assert str(ready.public_id) not in str(answer)
    mine = surface_api.get(URL).json()["results"]
    assert mine and all(e["tenantId"] == str(ready.tenant_id) for e in mine)


@pytest.mark.parametrize(
    ("params", "field", "rule"),
    [
        ({"after": "x"}, "after", "integer"),
        ({"after": "-1"}, "after", "range"),
        ({"limit": "0"}, "limit", "range"),
        ({"limit": "501"}, "limit", "range"),
        ({"limit": "1.5"}, "limit", "integer"),
    ],
)
def test_bad_paging_is_a_problem_naming_the_field(surface_api, params, field, rule) -> None:
    response = surface_api.get(URL, params)
    assert response.status_code == 400 and response["Content-Type"] == PROBLEM
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == (field, rule)


def test_anonymous_is_refused_and_a_member_session_is_not_a_consumer(api, member_api) -> None:
    assert api.get(URL).status_code == 401
    response = member_api.get(URL)
    assert response.status_code == 403 and response.json()["code"] == "events-surface-only"
