"""The member's memory actions in a real browser, by keyboard only: forget a topic and
everything (step-up, then approval), undo inside the grace window and not after it, confirm
and reject a guess, answer a question, and every scope move the rules allow (and no other).
axe-core checks every page state visited.

Screenshots of each page go to IRIS_SCREENSHOT_DIR, or to `screenshots/memory/` under
IRIS_VAR_DIR when it is not set.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Page, expect

from memory import step_up
from memory.models import MemoryEntry, PendingConflict
from memory.rules.retention import SOFT_DELETE_GRACE
from memory.rules.scopes import scope_change_targets
from memory.services import memory_forget
from tests.browser.test_memory_browser import tab_to_id, tab_to_text
from tests.factories import as_member, as_surface, grant_storage, scope_of, write, written

pytestmark = pytest.mark.browser

PASSWORD = "pw-ada"


def shot(page: Page, name: str) -> None:
    folder = Path(os.environ.get("IRIS_SCREENSHOT_DIR") or settings.VAR_DIR / "screenshots")
    folder = folder / "memory" if "IRIS_SCREENSHOT_DIR" not in os.environ else folder
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def look(page: Page, axe_check, name: str) -> None:
    """Every page state visited: axe-clean, and kept as a screenshot."""
    axe_check(page)
    shot(page, name)


def current(entry) -> MemoryEntry:
    return MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True)


def status(page: Page):
    return page.locator(".messages")


@pytest.fixture
def clock(monkeypatch):
    """The pages' clock, fixed (the live server runs in this process)."""
    fixed = timezone.now().replace(microsecond=0)
    monkeypatch.setattr(step_up, "now", lambda: fixed)
    return fixed


@pytest.fixture
def ada(member):
    grant_storage(member)
    return member


def guess(member, body: str) -> MemoryEntry:
    return written(member, body, origin="model-inferred", principal=as_surface(member))


def press(page: Page, button: str, says: str = "") -> None:
    """Tab to `button`, press Enter, and (with `says`) wait for the page's message."""
    tab_to_text(page, button)
    page.keyboard.press("Enter")
    if says:
        expect(status(page)).to_contain_text(says)


def approve_by_keyboard(page: Page) -> None:
    press(page, "Approve")


def test_forget_a_topic_with_step_up_and_approval_then_undo(
    page: Page, live_server, ada, login, axe_check, clock
) -> None:
    work = written(ada, "I work as a baker", category="work")
    home = written(ada, "I live in Lisbon", category="fact")
    login(page, "ada", PASSWORD, next_path="/memory/")
    look(page, axe_check, "memory-home")

    tab_to_text(page, "Forget a topic")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget every memory about a topic?")
    undo_until = (clock + SOFT_DELETE_GRACE).strftime("%-d %B %Y")
    expect(page.locator("main")).to_contain_text(f"You can undo this until {undo_until}")
    look(page, axe_check, "memory-forget-topic")

    tab_to_id(page, "id_category")
    page.keyboard.type("Work")
    expect(page.locator("#id_category")).to_have_value("work")
    tab_to_id(page, "id_password")
    page.keyboard.type("not-my-password")
    tab_to_text(page, "Forget every memory about this topic")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("That password is not right.")
    look(page, axe_check, "memory-forget-topic-wrong-password")

    tab_to_id(page, "id_category")
    page.keyboard.type("Work")
    tab_to_id(page, "id_password")
    page.keyboard.type(PASSWORD)
    press(page, "Forget every memory about this topic", "waiting for your approval")
    # The card's phrase is the kernel's registry entry (other tests may re-register it).
    expect(page.locator(".approval")).to_be_visible()
    # Fresh now: the page no longer asks for the password.
    expect(page.locator("#id_password")).to_have_count(0)
    look(page, axe_check, "memory-forget-topic-approval")
    assert current(work).lifecycle == "active"

    approve_by_keyboard(page)
    expect(page).to_have_url(f"{live_server.url}/memory/forgotten/")
    expect(status(page)).to_contain_text("Approved. The change was made.")
    expect(page.locator("main")).to_contain_text("I work as a baker")
    expect(page.locator("main")).to_contain_text(f"you can undo until {undo_until}")
    look(page, axe_check, "memory-recently-forgotten")
    assert current(work).lifecycle == "tombstoned" and current(home).lifecycle == "active"

    press(page, "Undo", "Brought back.")
    expect(page.get_by_role("heading", level=1)).to_have_text("Work as baker")
    look(page, axe_check, "memory-detail-brought-back")
    assert current(work).lifecycle == "active"


def test_forget_everything_with_step_up_and_approval(
    page: Page, live_server, ada, login, axe_check, clock
) -> None:
    entries = [written(ada, "I live in Lisbon"), guess(ada, "You seem to enjoy jazz")]
    login(page, "ada", PASSWORD, next_path="/memory/")
    tab_to_text(page, "Forget everything")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget everything Iris remembers?")
    look(page, axe_check, "memory-forget-everything")

    tab_to_id(page, "id_password")
    page.keyboard.type(PASSWORD)
    tab_to_text(page, "Forget everything Iris remembers")
    page.keyboard.press("Enter")
    expect(page.locator(".approval")).to_contain_text("everything Iris remembers about you")
    look(page, axe_check, "memory-forget-everything-approval")

    approve_by_keyboard(page)
    expect(page).to_have_url(f"{live_server.url}/memory/forgotten/")
    expect(page.locator(".card.memory-row")).to_have_count(2)
    assert {current(e).lifecycle for e in entries} == {"tombstoned"}
    page.goto("/memory/")
    expect(page.locator("main")).to_contain_text("Iris remembers nothing about you yet.")
    look(page, axe_check, "memory-home-after-forgetting-everything")


def test_undo_inside_the_grace_window_and_not_after_it(
    page: Page, live_server, ada, login, axe_check, clock
) -> None:
    inside = written(ada, "I live in Lisbon", category="fact")
    after = written(ada, "I work as a baker", category="work")
    member = as_member(ada)
    memory_forget(principal=member, member=ada, entry_id=inside.entry_id, now=clock - timedelta(13))
    memory_forget(principal=member, member=ada, entry_id=after.entry_id, now=clock - timedelta(15))
    login(page, "ada", PASSWORD, next_path="/memory/forgotten/")
    expect(page.locator("main")).to_contain_text("I live in Lisbon")
    expect(page.locator("main")).not_to_contain_text("I work as a baker")
    look(page, axe_check, "memory-recently-forgotten-grace")

    page.goto(f"/memory/{after.entry_id}/")
    expect(page.locator("main")).to_contain_text("Too late to undo")
    expect(page.get_by_role("button", name="Undo")).to_have_count(0)
    look(page, axe_check, "memory-detail-too-late-to-undo")

    page.goto("/memory/forgotten/")
    press(page, "Undo", "Brought back.")
    assert current(inside).lifecycle == "active"
    assert current(after).lifecycle == "tombstoned"


def test_confirm_one_guess_and_reject_another(
    page: Page, live_server, ada, login, axe_check
) -> None:
    jazz = guess(ada, "You seem to enjoy jazz")
    tea = guess(ada, "Your favourite drink is tea")
    login(page, "ada", PASSWORD, next_path=f"/memory/{jazz.entry_id}/")
    expect(page.locator("main")).to_contain_text("Iris guessed this")
    look(page, axe_check, "memory-detail-guess")
    press(page, "Confirm", "Confirmed.")
    expect(page.locator("main")).to_contain_text("You confirmed")
    expect(page.locator("main")).not_to_contain_text("Iris guessed this")
    look(page, axe_check, "memory-detail-guess-confirmed")
    assert (current(jazz).origin, current(jazz).lifecycle) == ("user-confirmed", "active")

    page.goto(f"/memory/{tea.entry_id}/")
    press(page, "Reject", "Rejected.")
    expect(page.get_by_role("button", name="Undo")).to_be_visible()
    look(page, axe_check, "memory-detail-guess-rejected")
    assert current(tea).lifecycle == "tombstoned"


def test_answer_a_question_on_the_memory_page(
    page: Page, live_server, ada, login, axe_check
) -> None:
    prior = written(ada, "My favourite colour is blue", subject="favourite colour")
    assert write(ada, "My favourite colour is green", subject="favourite colour").status == (
        "conflict"
    )
    login(page, "ada", PASSWORD, next_path="/memory/")
    expect(page.locator("main")).to_contain_text("Questions for you")
    look(page, axe_check, "memory-home-question")
    press(page, "Update it", "Updated.")
    expect(page.locator("main")).not_to_contain_text("Questions for you")
    assert current(prior).body == "My favourite colour is green"
    assert not PendingConflict.objects.filter(status="open").exists()


def offered(page: Page) -> list[str]:
    return page.locator("input[name=scope_kind]").evaluate_all("els => els.map(e => e.value)")


def allowed(kind: str) -> list[str]:
    return [target.value for target, _ in scope_change_targets(kind)]


def move_by_keyboard(page: Page, target: str, *, notebook: str = "") -> None:
    options = offered(page)
    tab_to_id(page, f"move-{options[0]}")
    for _ in range(options.index(target)):
        page.keyboard.press("ArrowDown")
    expect(page.locator(f"#move-{target}")).to_be_checked()
    if notebook:
        tab_to_id(page, "id_new_notebook")
        page.keyboard.press("Control+A")
        page.keyboard.type(notebook)
    press(page, "Move", "Moved to")


def test_every_allowed_scope_move_and_no_other(
    page: Page, live_server, ada, login, axe_check
) -> None:
    chat = written(
        ada,
        "We talked about Rome",
        kind="session",
        identifiers=scope_of(ada, "session", sessionId="c1"),
    )
    shared = written(
        ada, "Office closes at six", kind="tenant", identifiers=scope_of(ada, "tenant")
    )
    written(
        ada,
        "Visit Kyoto",
        kind="notebook",
        identifiers=scope_of(ada, "notebook", notebookId="travel"),
    )
    login(page, "ada", PASSWORD, next_path=f"/memory/{chat.entry_id}/")

    # session → notebook (a new one, named), then notebook → profile, then profile → notebook.
    assert offered(page) == allowed("session") == ["profile", "notebook"]
    look(page, axe_check, "memory-detail-session-moves")
    move_by_keyboard(page, "notebook", notebook="Trips")
    expect(status(page)).to_contain_text("Moved to the notebook “Trips”.")
    assert offered(page) == allowed("notebook") == ["profile"]
    expect(page.locator("main")).not_to_contain_text("cannot be moved")
    look(page, axe_check, "memory-detail-notebook-moves")
    move_by_keyboard(page, "profile")
    expect(status(page)).to_contain_text("Moved to about you.")
    assert offered(page) == allowed("profile") == ["notebook"]
    look(page, axe_check, "memory-detail-profile-moves")
    # The member's notebooks are offered by name ("Trips" is empty again, so gone).
    expect(page.locator("#id_notebook_id option")).to_have_text(["travel"])
    move_by_keyboard(page, "notebook")
    assert current(chat).scope_identifiers["notebookId"] == "travel"

    # session → profile.
    other = written(
        ada,
        "We talked about Oslo",
        kind="session",
        identifiers=scope_of(ada, "session", sessionId="c2"),
    )
    page.goto(f"/memory/{other.entry_id}/")
    move_by_keyboard(page, "profile")
    assert current(other).scope_kind == "profile"

    # tenant → a read-only copy in a notebook; the copy itself moves nowhere.
    page.goto(f"/memory/{shared.entry_id}/")
    assert offered(page) == allowed("tenant") == ["notebook"]
    expect(page.get_by_text("A read-only copy in one of your notebooks")).to_be_visible()
    look(page, axe_check, "memory-detail-tenant-moves")
    move_by_keyboard(page, "notebook")
    copy = MemoryEntry.objects.get(read_only_copy_of=shared.entry_id, is_current=True)
    page.goto(f"/memory/{copy.entry_id}/")
    assert offered(page) == []
    expect(page.locator("main")).to_contain_text("read-only copy")
    look(page, axe_check, "memory-detail-read-only-copy")

    page.goto("/memory/")
    expect(page.get_by_role("heading", name="Notebook “travel”")).to_be_visible()
    look(page, axe_check, "memory-home-grouped-by-notebook")
