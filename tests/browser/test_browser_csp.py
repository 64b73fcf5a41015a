"""Pages run under the strict CSP without a single violation; htmx is ours, not a CDN's."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

VENDOR = Path(settings.BASE_DIR) / "static" / "vendor"


def csp_violations(entries: list) -> list:
    return [e for e in entries if e.is_csp_violation]


def script_errors(entries: list) -> list:
    return [e for e in entries if e.type == "pageerror"]


def test_pages_log_no_csp_violation(page: Page, console_log, member, make_operator, login):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    login(page, "ada", "pw-ada")
    page.goto("/no-such-page/")
    page.get_by_role("button", name="Sign out").click()

    operator = make_operator("support")
    login(page, operator.username, "pw-" + operator.username)
    expect(page.get_by_role("heading", level=1)).to_have_text("Operator console")

    assert csp_violations(console_log) == []
    assert script_errors(console_log) == []


def test_csp_listener_catches_an_inline_style(page: Page, console_log, db):
    # The check above is only worth something if a violation would be seen.
    page.goto("/accounts/login/")
    page.evaluate("document.head.insertAdjacentHTML('beforeend', '<style>body{color:red}</style>')")
    page.wait_for_timeout(100)
    assert csp_violations(console_log), console_log
    console_log.clear()  # expected here; the fixture fails any other test that logs one


def test_htmx_is_the_vendored_copy(page: Page, live_server, db):
    readme = (VENDOR / "README.md").read_text()
    version = re.search(r"htmx\.org@(\d+\.\d+\.\d+)", readme).group(1)
    digest = hashlib.sha256((VENDOR / "htmx.min.js").read_bytes()).hexdigest()
    assert digest in readme, "static/vendor/README.md records the file's SHA-256"
    assert version.startswith("2.")

    page.goto("/accounts/login/")
    assert page.evaluate("window.htmx && htmx.version") == version
    sources = page.eval_on_selector_all("script[src]", "els => els.map(e => e.src)")
    assert sources and all(src.startswith(live_server.url + "/static/") for src in sources)
