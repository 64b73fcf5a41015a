"""CSRF on every route: a signed-in browser that POSTs without the token is refused on
every route of the resolver (pages and the session-authenticated API alike), the same
POST with the token gets past that check, and every form on every page a caller can
open carries the token. Each route is called by a caller it serves (from the route
matrix's table), so the refusal is the CSRF check's and not a role gate's."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from governance.models import User
from tests.security.expectations import (
    CALLERS,
    MEMBER_A,
    OK,
    TABLE,
    expected_outcome,
)
from tests.security.routes import all_routes

pytestmark = pytest.mark.django_db

ROUTES = all_routes()
FORM = re.compile(r"<form\b[^>]*>.*?</form>", re.S | re.I)
POST_FORM = re.compile(r"""method\s*=\s*["']?post""", re.I)
TOKEN_FIELD = 'name="csrfmiddlewaretoken"'


def server_of(route_name: str) -> str | None:
    """A signed-in caller the route serves, member A first; None when only anonymous
    callers or no one reaches it (sign-in steps, the superusers' admin)."""
    row = TABLE.get(route_name)
    if row is None:
        return None
    for caller in CALLERS[1:]:
        if expected_outcome(route_name, caller) == OK:
            return caller
    return None


@pytest.fixture
def browsers(people: dict[str, User]):
    def browser(caller: str, *, enforce: bool) -> Client:
        client = Client(enforce_csrf_checks=enforce)
        client.force_login(people[caller])
        return client

    return browser


def is_csrf_refusal(response) -> bool:
    return response.status_code == 403 and "csrf" in response.content.decode().lower()


def takes_no_post(response) -> bool:
    """A read-only route (health, the signing key, the API docs) that takes no POST at all
    says so in its Allow header; nothing can be forged there."""
    allowed = {m.strip() for m in response.get("Allow", "").split(",") if m.strip()}
    return response.status_code in (403, 405) and bool(allowed) and "POST" not in allowed


def test_every_post_without_the_token_is_refused(url_values: dict[str, str], browsers) -> None:
    values = url_values
    accepted: list[str] = []
    checked = 0
    for route in ROUTES:
        caller = server_of(route.name) or MEMBER_A
        url = route.url(values)
        response = browsers(caller, enforce=True).post(url, {})
        checked += 1
        if not (is_csrf_refusal(response) or takes_no_post(response)):
            accepted.append(f"{route.name} as {caller}: {response.status_code}")
    print(f"csrf: {checked - len(accepted)} of {checked} routes refused a tokenless POST")
    # The sign-in pages too: a login form posted from another site is refused.
    assert accepted == []
    assert is_csrf_refusal(Client(enforce_csrf_checks=True).post("/accounts/login/", {}))


def test_the_refusal_is_the_token_check(url_values: dict[str, str], browsers) -> None:
    """With the token, the same POSTs get past CSRF (whatever the route then answers)."""
    values = url_values
    still_refused = []
    for route in ROUTES:
        caller = server_of(route.name)
        if caller is None:
            continue
        client = browsers(caller, enforce=True)
        client.get("/")  # sets the CSRF cookie
        token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else ""
        response = client.post(
            route.url(values), {"csrfmiddlewaretoken": token}, headers={"X-CSRFToken": token}
        )
        if is_csrf_refusal(response):
            still_refused.append(route.name)
    assert still_refused == []


def test_every_form_on_every_page_carries_the_token(url_values: dict[str, str], browsers) -> None:
    values = url_values
    missing, forms = [], 0
    for route in ROUTES:
        caller = server_of(route.name)
        if caller is None or route.name.startswith(("api-", "admin:")):
            continue
        response = browsers(caller, enforce=False).get(route.url(values))
        if "text/html" not in response.get("Content-Type", ""):
            continue
        for form in FORM.findall(response.content.decode()):
            if POST_FORM.search(form.split(">", 1)[0]):
                forms += 1
                if TOKEN_FIELD not in form:
                    missing.append(route.name)
    print(f"csrf: {forms} POST forms carry the token")
    assert forms > 0 and missing == []
