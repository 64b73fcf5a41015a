"""axe-core finds no WCAG 2.1 A/AA violation on the pages that exist."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from governance.roles import Role

pytestmark = pytest.mark.browser


def test_login_page_has_no_axe_violations(page: Page, axe_check, db):
    page.goto("/accounts/login/")
    axe_check(page)


def test_login_page_with_errors_has_no_axe_violations(page: Page, axe_check, member):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    axe_check(page)


def test_member_home_has_no_axe_violations(page: Page, axe_check, member, login):
    login(page, "ada", "pw-ada")
    axe_check(page)


@pytest.mark.parametrize("role", [r.value for r in Role])
def test_console_home_has_no_axe_violations(page: Page, axe_check, make_operator, login, role):
    operator = make_operator(role)
    login(page, operator.username, "pw-" + operator.username)
    expect(page.get_by_role("heading", level=1)).to_have_text("Operator console")
    expect(page.get_by_role("main")).to_contain_text(role)
    axe_check(page)


def test_not_found_page_has_no_axe_violations(page: Page, axe_check, member, login):
    login(page, "ada", "pw-ada")
    response = page.goto("/no-such-page/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    axe_check(page)


def test_page_chrome_passes_axe_best_practices(page: Page, axe_check, member, login):
    # Beyond WCAG: one main landmark, all content inside landmarks, a working skip link.
    login(page, "ada", "pw-ada")
    axe_check(page, tags=["best-practice"])
