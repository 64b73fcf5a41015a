"""The memory pages in a real browser: keyboard only, axe-clean list and detail."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from memory.models import MemoryEntry
from memory.services import memory_write
from tests.factories import as_member, draft, grant_storage

pytestmark = pytest.mark.browser

FOCUSED_TEXT = "document.activeElement ? document.activeElement.textContent.trim() : ''"
FOCUSED_ID = "document.activeElement ? document.activeElement.id : ''"


def tab_until(page: Page, test, what: str, *, max_tabs: int = 80) -> None:
    for _ in range(max_tabs):
        page.keyboard.press("Tab")
        if test():
            return
    raise AssertionError(f"{what!r} not reached in {max_tabs} Tab presses")


def tab_to_text(page: Page, text: str) -> None:
    tab_until(page, lambda: " ".join(page.evaluate(FOCUSED_TEXT).split()) == text, text)


def tab_to_id(page: Page, element_id: str) -> None:
    tab_until(page, lambda: page.evaluate(FOCUSED_ID) == element_id, element_id)


def test_member_edits_and_forgets_a_memory_with_the_keyboard(
    page: Page, live_server, member, login, axe_check
) -> None:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "I live in Lyon")
    ).entry
    login(page, "ada", "pw-ada", next_path="/memory/")
    expect(page.get_by_role("heading", level=1)).to_have_text("What we remember")
    expect(page.locator("main")).to_contain_text("I live in Lyon")
    axe_check(page)

    tab_to_text(page, "Edit")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit a memory")
    tab_to_id(page, "id_body")
    page.keyboard.press("Control+A")
    page.keyboard.type("I live in Paris")
    tab_to_text(page, "Save correction")
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{live_server.url}/memory/{entry.entry_id}/")
    expect(page.get_by_role("status")).to_contain_text("Saved.")
    expect(page.locator("blockquote")).to_have_text("I live in Paris")
    axe_check(page)
    assert MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True).revision == 2

    tab_to_text(page, "Forget")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget this memory?")
    axe_check(page)
    tab_to_text(page, "Yes, forget it")
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{live_server.url}/memory/")
    expect(page.get_by_role("status")).to_contain_text("Forgotten.")
    expect(page.locator("main")).not_to_contain_text("I live in Paris")
    current = MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True)
    assert current.lifecycle == "tombstoned"
