"""The inspection pages in a real browser: an operator requests access, a second operator
grants it, the first views the snapshot and closes it; the member sees the access on
"Who looked at my memory", and the notice once the delivery job ran. Every console page
and the member page are axe-clean; the review and the close are done by keyboard.

Set IRIS_SCREENSHOT_DIR to keep a screenshot of each page looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core import mail
from playwright.sync_api import Page, expect

from consent.enums import ConsentType
from inspection import jobs
from inspection.models import Inspection
from inspection.selectors import current_consent_snapshot
from tests.factories import grant, grant_category, written
from tests.inspection.conftest import operator_user

pytestmark = pytest.mark.browser

FOCUSED = (
    "document.activeElement ? [document.activeElement.id,"
    " document.activeElement.textContent.trim().replace(/\\s+/g, ' ')] : ['', '']"
)


def tab_to(page: Page, *, text: str = "", element_id: str = "", max_tabs: int = 120) -> None:
    """Press Tab until the focused element has `element_id`, or text starting with `text`."""
    for _ in range(max_tabs):
        page.keyboard.press("Tab")
        focused_id, focused_text = page.evaluate(FOCUSED)
        if (element_id and focused_id == element_id) or (text and focused_text.startswith(text)):
            return
    raise AssertionError(f"{element_id or text!r} not reached in {max_tabs} Tab presses")


def shot(page: Page, name: str) -> None:
    folder = os.environ.get("IRIS_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


@pytest.fixture
def sensitive_member(ready):
    ready.email = "ada@example.org"
    ready.save(update_fields=["email"])
    grant(ready, ConsentType.SENSITIVE_DATA)
    grant_category(ready, "medical")
    written(ready, "My favourite colour is blue")
    written(ready, "I take insulin every morning", category="medical")
    return ready


def test_request_grant_view_close_and_the_member_is_told(
    new_page, live_server, tenant, sensitive_member, login, axe_check
) -> None:
    requester = operator_user(tenant, "op-legal", "legal")
    reviewer = operator_user(tenant, "op-legal-2", "legal")
    snapshot_id = str(current_consent_snapshot(sensitive_member))

    # The requester asks, from the console.
    mine = new_page()
    login(mine, "op-legal", "pw-op-legal", next_path="/")
    mine.get_by_role("link", name="Inspections").first.click()
    expect(mine.get_by_role("heading", level=1)).to_have_text("Inspections")
    axe_check(mine)
    shot(mine, "inspection-console")
    mine.locator("#id_member").fill("ada")
    mine.get_by_label("Fulfil a data-rights request").check()
    mine.get_by_label("Sensitive memory too").check()
    mine.locator("#id_justification").fill("The member asked for everything we hold on health.")
    mine.locator("#id_consent_snapshot_id").fill(snapshot_id)
    mine.get_by_role("button", name="Request access").press("Enter")
    expect(mine.get_by_role("status")).to_have_text("Requested. Another operator reviews it next.")
    expect(mine.get_by_role("heading", level=1)).to_have_text("Inspection of ada")
    expect(mine.locator(".badge")).to_have_text("Waiting for a reviewer")
    axe_check(mine)
    shot(mine, "inspection-requested")
    inspection = Inspection.objects.get()

    # The reviewer finds it waiting and grants it, by keyboard.
    theirs = new_page()
    login(theirs, "op-legal-2", "pw-op-legal-2", next_path="/inspections/")
    tab_to(theirs, text="ada")
    theirs.keyboard.press("Enter")
    expect(theirs.get_by_role("heading", level=1)).to_have_text("Inspection of ada")
    axe_check(theirs)
    shot(theirs, "inspection-review")
    tab_to(theirs, text="Grant access")
    theirs.keyboard.press("Enter")
    expect(theirs.get_by_role("status")).to_contain_text("Granted.")
    expect(theirs.locator(".badge")).to_have_text("Granted")
    axe_check(theirs)

    # The requester views the snapshot and closes it, by keyboard.
    mine.reload()
    tab_to(mine, text="View the snapshot")
    mine.keyboard.press("Enter")
    expect(mine.get_by_role("heading", level=1)).to_have_text("Snapshot of ada's memory")
    expect(mine.get_by_role("main")).to_contain_text("I take insulin every morning")
    axe_check(mine)
    shot(mine, "inspection-snapshot")
    tab_to(mine, text="Close the inspection")
    mine.keyboard.press("Enter")
    expect(mine.get_by_role("status")).to_contain_text("Closed.")
    expect(mine.locator(".badge")).to_have_text("Closed")
    axe_check(mine)
    shot(mine, "inspection-closed")
    inspection.refresh_from_db()
    assert inspection.state == "closed" and inspection.sensitive_read
    assert inspection.requester == requester and inspection.reviewer == reviewer

    # The reviewer, an auditor, replays what was seen.
    theirs.reload()
    theirs.get_by_role("link", name="Replay what was seen").click()
    expect(theirs.get_by_role("heading", level=1)).to_contain_text("Replay of the snapshot")
    expect(theirs.get_by_role("main")).to_contain_text("I take insulin every morning")
    axe_check(theirs)
    shot(theirs, "inspection-replay")

    # The member sees the access, the notice still owed.
    member = new_page()
    login(member, "ada", "pw-ada", next_path="/")
    member.get_by_role("link", name="Who looked at my memory").click()
    expect(member.get_by_role("heading", level=1)).to_have_text("Who looked at my memory")
    card = member.locator(f"#access-{inspection.id}")
    expect(card).to_contain_text("Legal team")
    expect(card).to_contain_text("To answer a data-rights request you made")
    expect(card).to_contain_text("Medical care")
    expect(card).to_contain_text("We will tell you by email within 72 hours")
    axe_check(member)

    # The notice job runs: the member is told, by email and on the page.
    assert jobs.deliver_notices(tenant=tenant) == 1
    assert [m.to for m in mail.outbox] == [["ada@example.org"]]
    member.reload()
    expect(member.get_by_role("main")).to_contain_text("Staff looked at sensitive memory")
    expect(card).to_contain_text("You were told, on")
    axe_check(member)
    shot(member, "inspection-member")


def test_the_console_with_errors_the_audit_check_and_a_refusal_are_axe_clean(
    new_page, live_server, tenant, sensitive_member, login, axe_check
) -> None:
    operator_user(tenant, "op-admin", "admin")
    page = new_page()
    login(page, "op-admin", "pw-op-admin", next_path="/inspections/")
    page.locator("#id_member").fill("nobody")
    page.get_by_label("Routine review").check()
    page.locator("#id_justification").fill("The member reported a wrong reminder.")
    page.get_by_role("button", name="Request access").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "No member of your organisation has this username or id."
    )
    expect(page).to_have_title("Error: Inspections · Iris")
    expect(page.locator("#id_member")).to_have_attribute("aria-invalid", "true")
    axe_check(page)
    shot(page, "inspection-console-errors")

    # Granting your own request: refused, in words, on the page.
    page.locator("#id_member").fill("ada")
    page.get_by_role("button", name="Request access").click()
    expect(page.locator(".badge")).to_have_text("Waiting for a reviewer")
    inspection = Inspection.objects.get()
    page.evaluate(
        "(url) => { const f = document.createElement('form'); f.method = 'post';"
        " f.action = url; const t = document.querySelector('input[name=csrfmiddlewaretoken]');"
        " f.appendChild(t.cloneNode()); document.body.appendChild(f); f.submit(); }",
        f"/inspections/{inspection.id}/grant/",
    )
    expect(page.get_by_role("alert")).to_contain_text("You cannot grant your own request")
    axe_check(page)
    shot(page, "inspection-self-grant")

    page.goto("/inspections/audit/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit chain")
    axe_check(page)
    page.get_by_role("button", name="Check the chain now").click()
    expect(page.locator("#audit-result")).to_contain_text("The chain verifies.")
    axe_check(page)
    shot(page, "inspection-audit")


def test_the_member_page_with_nothing_to_show_is_axe_clean(page: Page, member, login, axe_check):
    login(page, "ada", "pw-ada", next_path="/inspections/mine/")
    expect(page.get_by_role("main")).to_contain_text("Nobody has looked at your memory.")
    axe_check(page)


def test_an_issued_reference_is_shown_once_and_axe_clean(
    page: Page, live_server, tenant, member, login, axe_check
) -> None:
    operator_user(tenant, "op-tns", "trust-and-safety")
    login(page, "op-tns", "pw-op-tns", next_path="/inspections/")
    page.locator("#id_issue-member").fill("ada")
    page.get_by_role("button", name="Issue a reference").click()
    expect(page.locator("#issued")).to_contain_text("iris-inc1.")
    axe_check(page)
    shot(page, "inspection-issued")
    page.reload()
    expect(page.locator("#issued")).to_have_count(0)


@pytest.mark.parametrize("who", ["operator", "member"])
def test_the_pages_reflow_at_320_css_pixels(
    new_page, live_server, tenant, member, login, who
) -> None:
    page = new_page(viewport={"width": 320, "height": 640})
    if who == "member":
        login(page, "ada", "pw-ada", next_path="/inspections/mine/")
    else:
        operator_user(tenant, "op-admin", "admin")
        login(page, "op-admin", "pw-op-admin", next_path="/inspections/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    shot(page, f"inspection-320-{who}")
