"""Keyboard only: sign in, skip to the content, see where focus is, sign out."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

FOCUSED_ID = "document.activeElement && document.activeElement.id"
FOCUSED_CLASS = "document.activeElement && document.activeElement.className"


def tab_to(page: Page, element_id: str, *, max_tabs: int = 8) -> int:
    """Press Tab until the element with `element_id` has focus; return how many presses."""
    for presses in range(1, max_tabs + 1):
        page.keyboard.press("Tab")
        if page.evaluate(FOCUSED_ID) == element_id:
            return presses
    raise AssertionError(f"#{element_id} not reached in {max_tabs} Tab presses")


def test_member_signs_in_with_the_keyboard_and_skips_to_main(page: Page, live_server, member):
    page.goto("/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")

    # Login page: skip link, then the brand link, then the username field; nothing steals focus.
    assert tab_to(page, "id_username") == 3
    page.keyboard.type("ada")
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED_ID) == "id_password"
    page.keyboard.type("pw-ada")
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, ada")

    skip_link = page.get_by_role("link", name="Skip to main content")
    assert skip_link.bounding_box()["y"] < 0, "the skip link is off-screen until focused"

    page.keyboard.press("Tab")
    expect(skip_link).to_be_focused()
    box = skip_link.bounding_box()
    assert box["y"] >= 0 and box["height"] > 0, "the focused skip link is on screen"
    expect(skip_link).to_be_in_viewport()

    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()
    expect(page).to_have_url(f"{live_server.url}/#main")


def test_focus_ring_is_thick_and_solid(page: Page, member):
    page.goto("/accounts/login/")
    tab_to(page, "id_username")
    style = page.evaluate(
        "(() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth), s.boxShadow]; })()"
    )
    outline_style, outline_width, box_shadow = style
    assert outline_style == "solid"
    assert outline_width >= 3
    assert box_shadow != "none", "the dark halo keeps the ring visible on light backgrounds"


def test_sign_out_with_the_keyboard(page: Page, live_server, member, login):
    login(page, "ada", "pw-ada")
    sign_out = page.get_by_role("button", name="Sign out")
    sign_out.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")
    page.goto("/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")


def test_main_navigation_is_a_labelled_landmark(page: Page, member, login):
    login(page, "ada", "pw-ada")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_visible()
    expect(nav.get_by_role("link", name="Home")).to_have_attribute("aria-current", "page")
    for landmark in ("banner", "main", "contentinfo"):
        expect(page.get_by_role(landmark)).to_have_count(1)


@pytest.mark.parametrize("path", ["/accounts/login/", "/"])
def test_pages_reflow_at_320_css_pixels(new_page, member, login, path):
    # WCAG 1.4.10: no horizontal scrolling at 320 CSS px (a 1280px screen at 400 % zoom).
    page = new_page(viewport={"width": 320, "height": 640})
    if path == "/":
        login(page, "ada", "pw-ada")
    else:
        page.goto(path)
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
