"""Session and CSRF cookies as production sets them, and sign-in throttling (django-axes):
locked after the configured failures, per username and per address, with a plain page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "/accounts/login/"
COOKIE_SETTINGS = [
    "SESSION_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE",
    "CSRF_COOKIE_SECURE",
    "CSRF_COOKIE_HTTPONLY",
    "CSRF_COOKIE_SAMESITE",
]


@pytest.fixture(scope="module")
def production(tmp_path_factory) -> dict[str, object]:
    """The cookie settings of iris_site.settings (with Django's defaults under them) as
    production starts it, DEBUG off and its secrets given, read in a fresh interpreter:
    the test settings relax them for plain HTTP."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DEBUG", "IRIS_"))}
    env.update(
        DEBUG="0",
        SECRET_KEY="production-like-" + "k" * 50,
        IRIS_MASTER_KEY="qDyBtHbH3rYqZfHqWvKp0hJ8p6hVqCk7m1sVx2rF8uA=",
        ALLOWED_HOSTS="iris.example",
        REDIS_URL="redis://127.0.0.1:6379/0",  # read, never connected to here
        IRIS_ENV_FILE=os.devnull,
        DJANGO_SETTINGS_MODULE="iris_site.settings",
        IRIS_VAR_DIR=str(tmp_path_factory.mktemp("production-var")),
    )
    code = (
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {COOKIE_SETTINGS!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        ("SESSION_COOKIE_SECURE", True),
        ("SESSION_COOKIE_HTTPONLY", True),
        ("SESSION_COOKIE_SAMESITE", "Lax"),
        ("CSRF_COOKIE_SECURE", True),
        ("CSRF_COOKIE_HTTPONLY", True),
        ("CSRF_COOKIE_SAMESITE", "Lax"),
    ],
)
def test_production_cookie_settings(production, name, wanted) -> None:
    assert production[name] == wanted


def test_the_cookies_a_sign_in_sets_carry_the_production_flags(member, settings) -> None:
    # The test settings serve plain HTTP; switch on what production has.
    settings.SESSION_COOKIE_SECURE = True
    settings.CSRF_COOKIE_SECURE = True
    client = Client(enforce_csrf_checks=True)
    client.get(LOGIN, secure=True)
    token = client.cookies["csrftoken"].value
    response = client.post(
        LOGIN,
        {"username": member.username, "password": "pw-" + member.username},
        headers={"X-CSRFToken": token, "Referer": "https://testserver/accounts/login/"},
        secure=True,
    )
    assert response.status_code == 302
    session = response.cookies[settings.SESSION_COOKIE_NAME]
    assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"
    csrf = client.cookies[settings.CSRF_COOKIE_NAME]
    assert csrf["secure"] and csrf["httponly"] and csrf["samesite"] == "Lax"


# -- sign-in throttling --------------------------------------------------------------------


def sign_in(username: str, password: str, address: str) -> tuple[Client, object]:
    client = Client()
    response = client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)
    return client, response


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


# (what varies between the failed attempts, who then tries the right password, locked?)
THROTTLE_CASES = [
    # one username from many addresses: the username is locked everywhere
    ("addresses", "same-user-new-address", True),
    # one address trying many usernames: the address is locked for everyone
    ("usernames", "other-user-same-address", True),
    # the same failures, then someone else from elsewhere: not locked
    ("usernames", "other-user-other-address", False),
]


@pytest.mark.parametrize(("varies", "then", "locked"), THROTTLE_CASES)
def test_sign_in_locks_after_the_configured_failures(
    member, other_member, varies, then, locked
) -> None:
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(limit):
        if varies == "addresses":
            sign_in(member.username, "wrong", f"10.0.0.{attempt + 1}")
        else:
            sign_in(f"nobody-{attempt}", "wrong", "10.1.1.1")
    user, address = {
        "same-user-new-address": (member, "10.9.9.9"),
        "other-user-same-address": (other_member, "10.1.1.1"),
        "other-user-other-address": (other_member, "10.2.2.2"),
    }[then]
    client, response = sign_in(user.username, "pw-" + user.username, address)
    assert signed_in(client) is not locked
    assert (response.status_code == 429) is locked


def test_one_failure_fewer_than_the_limit_does_not_lock(member) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(member.username, "wrong", "10.3.3.3")
    client, _ = sign_in(member.username, "pw-" + member.username, "10.3.3.3")
    assert signed_in(client)


def test_the_lockout_page_is_plain(member) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(member.username, "wrong-password-7", "10.4.4.4")
    _, response = sign_in(member.username, "pw-" + member.username, "10.4.4.4")

    assert response.status_code == 429
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Signing in is paused" in page
    # It says nothing of who, from where, or how many tries, and offers no form to retry.
    for absent in (
        member.username,
        "10.4.4.4",
        "wrong-password-7",
        "pw-" + member.username,
        "Traceback",
        'name="password"',
        f"{settings.AXES_FAILURE_LIMIT} attempts",
    ):
        assert absent not in page, absent
