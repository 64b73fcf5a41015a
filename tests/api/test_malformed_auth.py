"""Issue 19, finding 2: a malformed `Authorization` header is a 401 problem+json, never a
500, on every API route.

gunicorn hands the header to Django decoded as latin-1, so `\\xa0` and `\\x85` arrive as
characters that `str.split()` treats as whitespace. The test client puts the same string
in the WSGI environ (`HTTP_AUTHORIZATION`), and the class is also called directly.
"""

from __future__ import annotations

import pytest
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from governance import auth
from governance.auth import SurfaceTokenAuthentication
from tests.api.helpers import PROBLEM, snapshot

pytestmark = pytest.mark.django_db

MALFORMED = [
    "\xa0",
    "\x85",
    " ",
    "\t",
    "Bearer",
    "Bearer ",
    "Bearer  two-spaces",
    "Bearer a b",
    "Bearer\xa0token",
    "Bearer tok\x85en",
    "\xa0Bearer token",
    "Bearer tök",
]

SOME_ID = "7b0c3a52-0d5e-4c39-9d7e-4f7f8f0c1e2a"  # fixed: parametrize ids must match across workers
ROUTES = [
    ("get", "/api/v1/memories"),
    ("post", "/api/v1/memories"),
    ("get", f"/api/v1/memories/{SOME_ID}"),
    ("patch", f"/api/v1/memories/{SOME_ID}"),
    ("post", f"/api/v1/memories/{SOME_ID}/pause"),
    ("post", "/api/v1/recall"),
    ("get", "/api/v1/consents"),
    ("post", "/api/v1/consents"),
    ("get", "/api/v1/consents/active"),
    ("post", "/api/v1/continuation-tokens"),
    ("get", "/api/v1/approvals"),
    ("post", f"/api/v1/runs/{SOME_ID}/steps"),
    ("delete", "/api/v1/off-the-record"),
]


@pytest.mark.parametrize("header", MALFORMED, ids=repr)
def test_malformed_authorization_header_is_401_problem(header: str) -> None:
    client = APIClient(raise_request_exception=False)
    before = snapshot()
    response = client.get("/api/v1/memories", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401, response.content
    assert response["Content-Type"] == PROBLEM
    assert response.json()["code"] == "not-authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert snapshot() == before


@pytest.mark.parametrize(("method", "url"), ROUTES, ids=lambda v: str(v))
@pytest.mark.parametrize("header", ["\xa0", "\x85"], ids=repr)
def test_nbsp_or_nel_header_is_401_on_every_route(header: str, method: str, url: str) -> None:
    client = APIClient(raise_request_exception=False)
    response = getattr(client, method)(url, HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM


def test_health_stays_open_whatever_the_header() -> None:
    response = APIClient().get("/api/v1/health", HTTP_AUTHORIZATION="\xa0")
    assert response.status_code in {200, 503}


@pytest.mark.parametrize("header", MALFORMED, ids=repr)
def test_authentication_class_refuses_malformed_header(header: str) -> None:
    request = Request(APIRequestFactory().get("/api/v1/memories", HTTP_AUTHORIZATION=header))
    with pytest.raises(exceptions.AuthenticationFailed):
        SurfaceTokenAuthentication().authenticate(request)


@pytest.mark.parametrize("header", [b"\xa0", b"\x85", b"Bearer \xff"], ids=repr)
def test_header_given_as_bytes_is_read_as_latin_1(header: bytes) -> None:
    with pytest.raises(exceptions.AuthenticationFailed):
        auth.bearer_token(header)


def test_another_scheme_is_left_to_session_auth() -> None:
    assert auth.bearer_token("Basic dXNlcjpwYXNz") is None
    assert auth.bearer_token("") is None
    assert auth.bearer_token(None) is None
    assert auth.bearer_token("Bearer iris_abc-DEF_123") == "iris_abc-DEF_123"


def test_another_scheme_over_the_api_is_401_not_500() -> None:
    client = APIClient(raise_request_exception=False)
    response = client.get("/api/v1/memories", HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM


def test_a_real_token_still_authenticates(surface_token: str, member) -> None:
    client = APIClient()
    response = client.get(
        "/api/v1/consents/active",
        {"userId": str(member.public_id)},
        HTTP_AUTHORIZATION=f"Bearer {surface_token}",
    )
    assert response.status_code == 200
