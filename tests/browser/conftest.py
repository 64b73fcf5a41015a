"""Browser fixtures: Debian's headless Chromium, driven by Playwright, against the live server.

Fixtures for every browser test:

- ``playwright`` / ``browser``: a Playwright driver and a Chromium, one per test;
- ``new_page(**context_options)``: a fresh page in a fresh context whose base URL is the
  live server; ``page`` is ``new_page()``;
- ``console_log``: every console message and uncaught page error of those pages;
- ``login(page, username, password, next_path="/")``: sign in through the real form;
- ``axe_check(page)``: axe-core over the current page with the WCAG 2.1 A/AA rules; fails
  listing each violation.

Every page made by ``new_page`` is checked when its test ends: a Content-Security-Policy
violation or an uncaught script error fails the test, whatever it was about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from axe_playwright_python.base import AxeResults
from axe_playwright_python.sync_playwright import Axe
from django.db import connections
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Fail fast: every page here is local and small.
TIMEOUT_MS = 10_000

WCAG21_AA_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")


@dataclass(frozen=True)
class ConsoleEntry:
    url: str
    type: str
    text: str

    @property
    def is_csp_violation(self) -> bool:
        return "Content Security Policy" in self.text or "Content-Security-Policy" in self.text


def page_problems(entries: Sequence[ConsoleEntry]) -> list[ConsoleEntry]:
    """CSP violations and uncaught script errors: what no Iris page may ever produce."""
    return [e for e in entries if e.is_csp_violation or e.type == "pageerror"]


@pytest.fixture
def playwright() -> Iterator[Playwright]:
    # Playwright's sync API keeps an asyncio loop running in the test thread while it is
    # started, and Django refuses ORM calls from such a thread. Allow them for exactly as long
    # as the driver runs (one test), so no other test in the session loses Django's check.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as driver:
            yield driver
            # While the driver's loop runs, Django hands this thread other connection
            # objects than outside it; one left open kept the test database from being
            # dropped at the end of the session. Closed here, while they are still reachable.
            for conn in connections.all(initialized_only=True):
                if not conn.in_atomic_block:
                    conn.close()


@pytest.fixture
def browser(playwright: Playwright, chromium_path: str) -> Iterator[Browser]:
    chromium = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


@pytest.fixture
def console_log() -> list[ConsoleEntry]:
    return []


@pytest.fixture
def new_page(
    browser: Browser, live_server: Any, console_log: list[ConsoleEntry]
) -> Iterator[Callable[..., Page]]:
    contexts = []

    def record(page: Page, kind: str, text: str) -> None:
        console_log.append(ConsoleEntry(page.url, kind, text))

    def make(**context_options: Any) -> Page:
        context = browser.new_context(base_url=live_server.url, **context_options)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda msg: record(page, msg.type, msg.text))
        page.on("pageerror", lambda error: record(page, "pageerror", str(error)))
        return page

    yield make
    for context in contexts:
        context.close()
    problems = page_problems(console_log)
    assert not problems, "pages logged CSP violations or script errors:\n" + "\n".join(
        f"  {e.url} [{e.type}] {e.text}" for e in problems
    )


@pytest.fixture
def page(new_page: Callable[..., Page]) -> Page:
    return new_page()


@pytest.fixture
def login(live_server: Any) -> Callable[..., None]:
    """Sign in through the login form, as a person would, and land on ``next_path``."""

    def sign_in(page: Page, username: str, password: str, *, next_path: str = "/") -> None:
        page.goto(f"/accounts/login/?next={next_path}")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(f"{live_server.url}{next_path}")

    return sign_in


@pytest.fixture
def axe_check() -> Callable[..., AxeResults]:
    """Run axe-core (shipped inside axe-playwright-python, no network) on the current page."""
    axe = Axe()

    def check(
        page: Page, *, tags: Sequence[str] = WCAG21_AA_TAGS, context: Any = None
    ) -> AxeResults:
        options = {"runOnly": {"type": "tag", "values": list(tags)}, "resultTypes": ["violations"]}
        results = axe.run(page, context=context, options=options)
        if results.violations_count:
            report = results.generate_report()
            print(report)
            pytest.fail(f"axe-core found violations on {page.url}:\n{report}", pytrace=False)
        assert results.violations_count == 0
        return results

    return check
