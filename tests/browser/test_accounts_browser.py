"""Two-step sign-in and the lockout page in a real browser: without JavaScript, by keyboard,
and with no axe-core WCAG 2.1 A/AA violation."""

from __future__ import annotations

from datetime import UTC, datetime

import pyotp
import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def code(secret_text: str, steps_ahead: int = 0) -> str:
    """The app's code now (or a step ahead: inside the window, and not yet spent)."""
    totp = pyotp.TOTP(secret_text.replace(" ", ""))
    return totp.generate_otp(totp.timecode(datetime.now(UTC)) + steps_ahead)


@pytest.fixture
def operator(make_operator):
    return make_operator("support")


def enrol_through_the_page(page: Page) -> str:
    page.goto("/accounts/two-step/")
    secret = page.locator("#totp-secret").inner_text()
    page.get_by_label("Code from your app").fill(code(secret))
    page.get_by_role("button", name="Turn on two-step sign-in").click()
    expect(page.get_by_role("status")).to_contain_text("Two-step sign-in is on")
    return secret


def test_operator_enrols_and_signs_in_with_a_code_without_javascript(
    new_page, live_server, operator, login
):
    page = new_page(java_script_enabled=False)
    login(page, operator.username, "pw-" + operator.username)
    secret = enrol_through_the_page(page)
    expect(page.locator("#totp-uri")).to_have_count(0)  # the key is shown only before
    page.get_by_role("button", name="Sign out").click()

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(operator.username)
    page.get_by_label("Password").fill("pw-" + operator.username)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/accounts/login/code/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Enter your code")

    page.get_by_label("Code").fill("000000" if code(secret, 1) != "000000" else "111111")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("That code is not right")
    expect(page.get_by_label("Code")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("Code").fill(code(secret, 1))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Operator console")


def test_code_step_by_keyboard_only(page: Page, live_server, operator, login):
    login(page, operator.username, "pw-" + operator.username)
    secret = enrol_through_the_page(page)
    page.get_by_role("button", name="Sign out").click()

    page.goto("/accounts/login/")
    page.get_by_label("Username").focus()
    page.keyboard.type(operator.username)
    page.keyboard.press("Tab")
    page.keyboard.type("pw-" + operator.username)
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/code/")
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "id_code":
            break
    assert page.evaluate("document.activeElement.id") == "id_code"
    page.keyboard.type(code(secret, 1))
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/")


def test_totp_setup_page_has_no_axe_violations(page: Page, axe_check, operator, login):
    login(page, operator.username, "pw-" + operator.username)
    page.goto("/accounts/two-step/")
    expect(page.locator("#totp-secret")).to_be_visible()
    axe_check(page)
    page.get_by_label("Code from your app").fill("12")
    page.get_by_role("button", name="Turn on two-step sign-in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    axe_check(page)


def test_code_page_has_no_axe_violations(page: Page, axe_check, operator, login):
    login(page, operator.username, "pw-" + operator.username)
    enrol_through_the_page(page)
    page.get_by_role("button", name="Sign out").click()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(operator.username)
    page.get_by_label("Password").fill("pw-" + operator.username)
    page.get_by_role("button", name="Sign in").click()
    axe_check(page)
    page.get_by_label("Code").fill("12")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    axe_check(page)


def test_lockout_page_is_plain_and_has_no_axe_violations(page: Page, axe_check, operator):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(operator.username)
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Signing in is paused")
    expect(page.get_by_role("alert")).to_contain_text("15 minutes")
    axe_check(page)
