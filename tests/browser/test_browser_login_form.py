"""The login form: works without JavaScript, and says what went wrong out loud."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def test_login_works_with_javascript_disabled(new_page, live_server, member):
    page = new_page(java_script_enabled=False)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("pw-ada")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, ada")


def test_wrong_password_is_announced_as_an_alert(page: Page, member):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()

    alert = page.get_by_role("alert")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("Please enter a correct username and password")
    expect(page).to_have_title("Error: Sign in · Iris")
    expect(page.get_by_label("Username")).to_have_value("ada")
    expect(page.get_by_label("Password")).to_have_value("")


def test_empty_form_names_each_missing_field(page: Page, db):
    page.goto("/accounts/login/")
    page.get_by_role("button", name="Sign in").click()

    alert = page.get_by_role("alert")
    expect(alert.get_by_role("link", name="Username: This field is required.")).to_have_count(1)
    expect(alert.get_by_role("link", name="Password: This field is required.")).to_have_count(1)
    for name in ("username", "password"):
        field = page.locator(f"#id_{name}")
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(field).to_have_accessible_description("This field is required.")

    # The summary's links lead to the fields they name.
    alert.get_by_role("link", name="Password: This field is required.").click()
    expect(page.get_by_label("Password")).to_be_focused()
