"""The consent page in a real browser: keyboard only, axe-clean, history visible."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from consent.selectors import active_consent_types

pytestmark = pytest.mark.browser

FOCUSED_TEXT = "document.activeElement ? document.activeElement.textContent.trim() : ''"


def tab_to(page: Page, text: str, *, max_tabs: int = 80) -> int:
    """Press Tab until the focused element's text (visible and visually hidden) is `text`."""
    for presses in range(1, max_tabs + 1):
        page.keyboard.press("Tab")
        if " ".join(page.evaluate(FOCUSED_TEXT).split()) == text:
            return presses
    raise AssertionError(f"{text!r} not reached in {max_tabs} Tab presses")


def test_member_grants_and_revokes_a_sensitive_category_with_the_keyboard(
    page: Page, live_server, member, login, axe_check
) -> None:
    login(page, "ada", "pw-ada", next_path="/consent/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Consent")
    axe_check(page)

    # Grant: reach the category's one button with Tab, press Enter.
    tab_to(page, "Give consent for Medical care")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/consent/#consent-category-medical")
    expect(page.get_by_role("status")).to_have_text("Consent given: Medical care.")
    card = page.locator("#consent-category-medical")
    expect(card.locator(".badge")).to_have_text("On")
    expect(card).to_contain_text("since")
    assert active_consent_types(tenant_id=member.tenant_id, member=member) == {"category:medical"}

    # Focus carries on where the member was: the next Tab is the same card's button.
    page.keyboard.press("Tab")
    withdraw = card.get_by_role("button", name="Withdraw consent for Medical care")
    expect(withdraw).to_be_focused()
    page.keyboard.press("Enter")

    # A revocation that deletes memory says what goes before anything happens.
    expect(page.get_by_role("heading", level=1)).to_have_text("Withdraw consent for Medical care?")
    expect(page.locator("main")).to_contain_text(
        "Everything Iris remembers about medical care is deleted"
    )
    axe_check(page)
    tab_to(page, "Withdraw consent and delete")
    page.keyboard.press("Enter")

    expect(page.get_by_role("status")).to_have_text("Consent withdrawn: Medical care.")
    expect(card).to_contain_text("Off")
    assert active_consent_types(tenant_id=member.tenant_id, member=member) == frozenset()

    # The history, folded away, opens and shows both acts, newest first.
    page.locator("#history-details summary").click()
    rows = page.locator("section[aria-labelledby=history] tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("Medical care")
    expect(rows.nth(0)).to_contain_text("Withdrawn")
    expect(rows.nth(1)).to_contain_text("Given")
    axe_check(page)


def test_the_terms_open_from_the_keyboard(page: Page, member, login) -> None:
    login(page, "ada", "pw-ada", next_path="/consent/")
    tab_to(page, "Read the terms you agree to (version 2025-09)")
    page.keyboard.press("Enter")
    terms = page.locator("details").first
    expect(terms).to_have_attribute("open", "")
    expect(terms.locator("p")).to_be_visible()
