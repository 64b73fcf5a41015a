"""The data-rights pages in a real browser: a member files an export with the keyboard only,
sees it complete, downloads it and the bundle verifies; the member page and the legal
queue are axe-clean.

Set IRIS_SCREENSHOT_DIR to keep a screenshot of each page looked at.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import Page, expect

from dsar import services
from dsar.models import DataRightsRequest
from governance.principal import principal_of
from tests.factories import as_member, as_surface, write

pytestmark = pytest.mark.browser

WORK_TIMEOUT_MS = 30_000

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


def file_export_by_keyboard(page: Page) -> None:
    # Tick an opt-in box with the space bar, then send the form with Enter.
    tab_to(page, element_id="id_export-include_scene_memory")
    page.keyboard.press("Space")
    expect(page.locator("#id_export-include_scene_memory")).to_be_checked()
    tab_to(page, text="Ask for a copy")
    page.keyboard.press("Enter")
    # The work runs in-process when the request commits: give the answer time to come.
    expect(page.get_by_role("status")).to_have_text(
        "We received your request: a copy of your data.", timeout=WORK_TIMEOUT_MS
    )


def download_by_keyboard(page: Page, folder: Path) -> Path:
    tab_to(page, text="Download your copy")
    with page.expect_download() as info:
        page.keyboard.press("Enter")
    download = info.value
    target = folder / download.suggested_filename
    download.save_as(target)
    return target


def test_member_files_an_export_by_keyboard_downloads_it_and_it_verifies(
    page: Page, live_server, member, login, axe_check, tmp_path
) -> None:
    login(page, "ada", "pw-ada", next_path="/data-rights/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your data requests")
    axe_check(page)

    file_export_by_keyboard(page)
    request = DataRightsRequest.objects.get(member=member)
    # The work ran in-process on commit; the page shows the request done.
    expect(page.locator(f"#request-{request.id} .badge")).to_have_text("Done")
    axe_check(page)
    shot(page, "dsar-member-done")

    bundle = download_by_keyboard(page, tmp_path)
    call_command("verify_bundle", str(bundle))  # raises CommandError unless it verifies


def test_the_download_by_keyboard_serves_the_bundle(
    page: Page, live_server, member, login, axe_check, monkeypatch, tmp_path
) -> None:
    """The page's part alone, with the export work stood in for: filed by keyboard, shown
    done, downloaded through the page."""
    built = tmp_path / "built.zip"
    built.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    monkeypatch.setattr("dsar.export.run_export", lambda request: "a" * 64, raising=False)
    monkeypatch.setattr(
        "dsar.export.bundle_for_download",
        lambda *, principal, member, request_id: (built, "iris-export.zip"),
        raising=False,
    )
    login(page, "ada", "pw-ada", next_path="/data-rights/")
    file_export_by_keyboard(page)
    request = DataRightsRequest.objects.get(member=member)
    assert request.payload["includeSceneMemory"] is True
    expect(page.locator(f"#request-{request.id} .badge")).to_have_text("Done")
    axe_check(page)
    shot(page, "dsar-member-done")
    saved = download_by_keyboard(page, tmp_path / "downloads")
    assert saved.name == "iris-export.zip"
    assert saved.read_bytes() == built.read_bytes()


def test_member_page_with_requests_and_errors_is_axe_clean(
    page: Page, live_server, member, make_operator, login, axe_check, monkeypatch
) -> None:
    monkeypatch.setattr(services, "_queue_process", lambda request_id: None)
    services.data_rights_open(
        principal=as_surface(member), member=member, kind="access", payload={}
    )
    services.data_rights_open(
        principal=as_member(member),
        member=member,
        kind="delete",
        payload={"mode": "soft", "scopes": ["session"], "categories": ["medical"]},
    )
    legal = principal_of(make_operator("legal"))
    services.legal_hold_place(principal=legal, member=member, reason="Litigation")
    login(page, "ada", "pw-ada", next_path="/data-rights/")
    expect(page.locator("#legal-hold")).to_contain_text("A legal hold applies.")
    page.locator("details").first.locator("summary").click()
    axe_check(page)
    shot(page, "dsar-member")

    # A passphrase too short: the error is announced and tied to its field.
    tab_to(page, element_id="id_export-passphrase")
    page.keyboard.type("short")
    page.keyboard.press("Tab")
    page.keyboard.type("short")
    tab_to(page, text="Ask for a copy")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text(
        "Your passphrase needs between 12 and 200 characters."
    )
    expect(page).to_have_title("Error: Your data requests · Iris")
    expect(page.locator("#id_export-passphrase")).to_have_attribute("aria-invalid", "true")
    axe_check(page)
    shot(page, "dsar-member-errors")


def test_legal_queue_is_axe_clean_and_worked_by_keyboard(
    page: Page, live_server, member, other_member, make_operator, login, axe_check, monkeypatch
) -> None:
    monkeypatch.setattr(services, "_queue_process", lambda request_id: None)
    now = timezone.now()
    for who, kind, days_ago, by in (
        (member, "export", 40, as_member),
        (other_member, "access", 26, as_surface),
        (member, "delete", 2, as_member),
        (other_member, "export", 12, as_surface),
    ):
        services.data_rights_open(
            principal=by(who),
            member=who,
            kind=kind,
            payload={"mode": "soft", "categories": ["fact"]} if kind == "delete" else {},
            now=now - timedelta(days=days_ago),
        )
    operator = make_operator("legal")
    login(page, operator.username, "pw-" + operator.username, next_path="/data-rights/queue/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Data-rights queue")
    expect(page.locator("tbody tr").first).to_contain_text("Overdue")
    axe_check(page)
    shot(page, "dsar-queue")

    # The overdue export is past extending; the access request due soon is not.
    tab_to(page, text="Export request from ada")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Export request from ada")
    expect(page.get_by_role("main")).to_contain_text("it can no longer be extended")
    axe_check(page)
    shot(page, "dsar-queue-item-overdue")
    page.go_back()
    tab_to(page, text="Access request from grace")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Access request from grace")
    axe_check(page)
    shot(page, "dsar-queue-item")

    tab_to(page, element_id="id_extend-reason")
    page.keyboard.type("Your memory is spread over many apps.")
    tab_to(page, text="Extend")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("Extended.")
    axe_check(page)


def test_member_asks_to_see_everything_and_reads_the_report(
    page: Page, live_server, ready, login, axe_check
) -> None:
    write(ready, "I live in Lyon")
    login(page, "ada", "pw-ada", next_path="/data-rights/")
    tab_to(page, text="Ask to see everything")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(
        "We received your request", timeout=WORK_TIMEOUT_MS
    )
    request = DataRightsRequest.objects.get(member=ready)
    expect(page.locator(f"#request-{request.id} .badge")).to_have_text("Done")
    tab_to(page, text="See what Iris holds about you")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("What Iris holds about you")
    expect(page.get_by_role("main")).to_contain_text("I live in Lyon")
    axe_check(page)
    shot(page, "dsar-report")


@pytest.mark.parametrize("who", ["member", "legal"])
def test_the_pages_reflow_at_320_css_pixels(
    new_page, live_server, member, make_operator, login, monkeypatch, who
) -> None:
    # WCAG 1.4.10: no sideways scrolling of the page; a wide table scrolls in its own region.
    monkeypatch.setattr(services, "_queue_process", lambda request_id: None)
    services.data_rights_open(
        principal=as_member(member),
        member=member,
        kind="delete",
        payload={"mode": "soft", "categories": ["medical"]},
    )
    page = new_page(viewport={"width": 320, "height": 640})
    if who == "member":
        login(page, "ada", "pw-ada", next_path="/data-rights/")
    else:
        operator = make_operator("legal")
        login(page, operator.username, "pw-" + operator.username, next_path="/data-rights/queue/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    shot(page, f"dsar-320-{who}")
