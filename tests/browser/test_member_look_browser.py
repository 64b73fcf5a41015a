"""The member's pages in a real browser, with the demo data: the off-the-record banner on
every page and in a new browser, its switch and the consent page by keyboard alone, axe
clean in each state, and a screenshot of every page.

Screenshots go to IRIS_SCREENSHOT_DIR, else tests/browser/artifacts/ (not committed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from governance.principal import Principal
from memory import demo
from memory.models import MemoryEntry
from memory.services import Correction, memory_correct, memory_forget, memory_pause

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).parent / "artifacts"
BANNER = "You are off the record."

FOCUSED = (
    "document.activeElement ? [document.activeElement.id,"
    " document.activeElement.textContent.trim().replace(/\\s+/g, ' ')] : ['', '']"
)
PAGE_HEIGHT = "document.documentElement.scrollHeight"


def tab_to(page: Page, *, text: str, max_tabs: int = 150) -> None:
    """Press Tab until the focused element's text starts with `text`."""
    for _ in range(max_tabs):
        page.keyboard.press("Tab")
        _, focused_text = page.evaluate(FOCUSED)
        if focused_text.startswith(text):
            return
    raise AssertionError(f"{text!r} not reached in {max_tabs} Tab presses")


def shot(page: Page, name: str) -> None:
    folder = Path(os.environ.get("IRIS_SCREENSHOT_DIR") or ARTIFACTS)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@pytest.fixture
def demo_member(member):
    """The demo member's memories, one paused, one corrected, one forgotten."""
    demo.seed(tenant=member.tenant, member=member)
    principal = Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)
    entries = list(MemoryEntry.objects.filter(member=member, is_current=True).order_by("body"))
    memory_pause(principal=principal, member=member, entry_id=entries[0].entry_id)
    memory_correct(
        principal=principal,
        member=member,
        entry_id=entries[1].entry_id,
        correction=Correction(body="I live in Lisbon, near the river", category="spatial"),
    )
    memory_forget(principal=principal, member=member, entry_id=entries[2].entry_id)
    return member, {"paused": entries[0], "corrected": entries[1], "forgotten": entries[2]}


def member_pages(entries) -> list[tuple[str, str]]:
    pages = [
        ("home", "/"),
        ("memory-home", "/memory/"),
        ("consent", "/consent/"),
        ("data-rights", "/data-rights/"),
        ("approvals", "/approvals/"),
        ("who-looked", "/inspections/mine/"),
    ]
    for name, entry in entries.items():
        pages.append((f"memory-detail-{name}", f"/memory/{entry.entry_id}/"))
    corrected = entries["corrected"].entry_id
    pages += [
        ("memory-edit", f"/memory/{corrected}/edit/"),
        ("memory-forget", f"/memory/{corrected}/forget/"),
        ("error-404", "/no-such-page/"),
        ("error-403", "/accounts/two-step/"),
    ]
    return pages


def go_off_the_record(page: Page) -> None:
    page.goto("/memory/")
    page.get_by_role("button", name="Go off the record").click()
    expect(page.locator(".banner")).to_contain_text(BANNER)


def test_every_member_page_is_axe_clean_on_and_off_the_record(
    new_page, demo_member, login, axe_check
) -> None:
    _, entries = demo_member
    page = new_page()
    login(page, "ada", "pw-ada")
    for state in ("on-the-record", "off-the-record"):
        if state == "off-the-record":
            go_off_the_record(page)
        for name, url in member_pages(entries):
            page.goto(url)
            banner = page.get_by_role("region", name=BANNER)
            if state == "off-the-record":
                expect(banner).to_be_visible()
                expect(banner.get_by_role("button", name="Go back on the record")).to_be_visible()
            else:
                expect(banner).to_have_count(0)
            axe_check(page)
            shot(page, f"{name}--{state}")


def test_the_banner_survives_a_new_browser_and_its_switch_works(
    new_page, demo_member, login, axe_check
) -> None:
    first = new_page()
    login(first, "ada", "pw-ada")
    go_off_the_record(first)

    # Another browser, nothing shared with the first: it signs in and sees the banner.
    second = new_page()
    login(second, "ada", "pw-ada")
    expect(second.get_by_role("region", name=BANNER)).to_be_visible()
    second.goto("/consent/")
    expect(second.get_by_role("region", name=BANNER)).to_be_visible()

    # The banner's switch, from the second browser; the first sees it gone on its next page.
    second.get_by_role("button", name="Go back on the record").click()
    expect(second.get_by_role("status")).to_contain_text("Back on the record")
    expect(second.get_by_role("region", name=BANNER)).to_have_count(0)
    first.reload()
    expect(first.get_by_role("region", name=BANNER)).to_have_count(0)


def test_the_banner_switch_works_by_keyboard_alone(new_page, demo_member, login) -> None:
    page = new_page()
    login(page, "ada", "pw-ada")
    go_off_the_record(page)
    page.goto("/consent/")
    tab_to(page, text="Go back on the record")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("Back on the record")
    expect(page.get_by_role("region", name=BANNER)).to_have_count(0)


def test_the_consent_page_by_keyboard_alone(new_page, demo_member, login, axe_check) -> None:
    page = new_page()
    login(page, "ada", "pw-ada", next_path="/consent/")
    height = page.evaluate(PAGE_HEIGHT)
    print(f"consent page height at 1280x720: {height}px")
    # Close topics sit side by side in one group, each with its own switch.
    money = page.get_by_role("region", name="Money")
    expect(money.get_by_role("heading", level=4)).to_have_text(["Money", "Money worries"])

    tab_to(page, text="Give consent for Money worries")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_have_text("Consent given: Money worries.")
    expect(page.locator("#consent-category-financial-distress .badge")).to_have_text("On")

    # The history is folded away; it opens from the keyboard.
    tab_to(page, text="Show every consent you gave or withdrew")
    page.keyboard.press("Enter")
    history = page.locator("#history-details")
    expect(history).to_have_attribute("open", "")
    rows = history.locator("tbody tr")
    expect(rows.first).to_contain_text("Money worries")
    # The demo's own consents were set up by Iris: the history does not claim you did it.
    expect(rows.last).to_contain_text("Recorded by Iris, not by you")
    axe_check(page)
    shot(page, "consent--history-open")
