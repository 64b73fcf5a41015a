"""The member's memory actions: forget a topic or everything (step-up, approval, grace
window and undo), guesses, conflict questions, every allowed scope move, and the refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from governance.kernel_models import Approval
from memory import step_up
from memory.models import MemoryEntry, PendingConflict
from memory.rules.retention import SOFT_DELETE_GRACE
from memory.rules.scopes import scope_change_targets
from memory.services import memory_forget
from tests.factories import as_member, as_surface, scope_of, write, written

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
PASSWORD = "pw-ada"


@pytest.fixture
def clock(monkeypatch):
    """A fixed clock for the pages and the step-up; `clock.at = ...` moves it."""

    class Clock:
        at = T0

    def now() -> datetime:
        return Clock.at

    monkeypatch.setattr(step_up, "now", now)
    return Clock


@pytest.fixture
def browser(client: Client, ready) -> Client:
    client.force_login(ready)
    return client


def url(name: str, entry=None, **kwargs) -> str:
    if entry is not None:
        kwargs["entry_id"] = entry.entry_id
    return reverse(f"memory:{name}", kwargs=kwargs or None)


def current(entry) -> MemoryEntry:
    return MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True)


def guess(member, body: str = "My favourite drink is tea", **fields) -> MemoryEntry:
    return written(member, body, origin="model-inferred", principal=as_surface(member), **fields)


def in_session(member, body: str) -> MemoryEntry:
    return written(
        member, body, kind="session", identifiers=scope_of(member, "session", sessionId="s1")
    )


def in_notebook(member, body: str, name: str = "travel") -> MemoryEntry:
    return written(
        member, body, kind="notebook", identifiers=scope_of(member, "notebook", notebookId=name)
    )


def in_tenant(member, body: str) -> MemoryEntry:
    return written(member, body, kind="tenant", identifiers=scope_of(member, "tenant"))


def approve_pending(client: Client, next_path: str) -> None:
    approval = Approval.objects.get(status=Approval.Status.PENDING)
    client.post(
        reverse("approvals-decide", args=[approval.id]),
        {"decision": "approve", "next": next_path},
    )


# ------------------------------------------------------------ forget a topic, everything


def test_forget_topic_asks_for_the_password_and_shows_the_undo_date(browser, ready, clock):
    written(ready, "I work as a baker", category="work")
    html = browser.get(url("forget_topic")).content.decode()
    assert 'type="password"' in html and 'autocomplete="current-password"' in html
    assert "16 December 2026" in html  # T0 + the 14-day grace window
    assert "Work (1 memory)" in html and "work</option>" not in html


@pytest.mark.parametrize("password", ["", "not-the-password"])
def test_forget_topic_without_the_right_password_forgets_nothing(
    browser, ready, clock, password
) -> None:
    entry = written(ready, "I work as a baker", category="work")
    response = browser.post(url("forget_topic"), {"category": "work", "password": password})
    assert response.status_code == 400
    assert "Nothing was forgotten" in response.content.decode()
    assert current(entry).lifecycle == "active"
    assert not Approval.objects.exists()
    assert step_up.SESSION_KEY not in browser.session


def test_forget_topic_with_step_up_waits_for_approval_then_forgets_only_that_topic(
    browser, ready, clock
) -> None:
    work = written(ready, "I work as a baker", category="work")
    home = written(ready, "I live in Lisbon", category="fact")
    response = browser.post(url("forget_topic"), {"category": "work", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == url("forget_topic")
    approval = Approval.objects.get()
    assert (approval.operation, approval.arguments) == (
        "memory.clear_category",
        {"category": "work"},
    )
    assert current(work).lifecycle == "active"  # nothing before the member's approval
    page = browser.get(url("forget_topic")).content.decode()
    assert "waiting for your approval" in page and str(approval.id) in page
    approve_pending(browser, url("forgotten"))
    assert current(work).lifecycle == "tombstoned"
    assert current(home).lifecycle == "active"
    assert "I work as a baker" in browser.get(url("forgotten")).content.decode()


def test_forget_everything_with_step_up_and_approval_forgets_every_live_memory(
    browser, ready, clock
) -> None:
    entries = [written(ready, "I live in Lisbon"), guess(ready), in_notebook(ready, "Rome in May")]
    html = browser.get(url("forget_everything")).content.decode()
    assert 'type="password"' in html and 'class="button button--danger"' in html
    browser.post(url("forget_everything"), {"password": PASSWORD})
    assert Approval.objects.get().operation == "memory.clear_all"
    approve_pending(browser, url("forgotten"))
    assert {current(e).lifecycle for e in entries} == {"tombstoned"}
    assert "Iris remembers nothing about you yet." in browser.get(url("home")).content.decode()


@pytest.mark.parametrize(
    ("later", "fresh"),
    [
        (timedelta(0), True),
        (timedelta(minutes=4, seconds=59), True),
        (step_up.STEP_UP_FRESH, False),
        (timedelta(hours=1), False),
        (-timedelta(seconds=1), False),  # a clock moved back does not extend it
    ],
)
def test_step_up_stays_fresh_for_five_minutes_only(browser, ready, clock, later, fresh) -> None:
    written(ready, "I work as a baker", category="work")
    browser.post(url("forget_topic"), {"category": "work", "password": PASSWORD})
    assert browser.session[step_up.SESSION_KEY] == T0.timestamp()
    clock.at = T0 + later
    page = browser.get(url("forget_topic")).content.decode()
    assert ('type="password"' not in page) is fresh
    response = browser.post(url("forget_everything"), {})
    if fresh:
        assert response.status_code == 302
        assert Approval.objects.filter(operation="memory.clear_all").exists()
    else:
        assert response.status_code == 400
        assert not Approval.objects.filter(operation="memory.clear_all").exists()


def test_forget_topic_with_no_memories_offers_no_form(browser, ready, clock) -> None:
    html = browser.get(url("forget_topic")).content.decode()
    assert "You have no memories to forget." in html and 'type="password"' not in html


def test_forget_topic_refuses_a_topic_the_member_has_no_memory_in(browser, ready, clock):
    written(ready, "I work as a baker", category="work")
    response = browser.post(url("forget_topic"), {"category": "medical", "password": PASSWORD})
    assert response.status_code == 400 and not Approval.objects.exists()


# --------------------------------------------------------------- grace window and undo


def test_forgetting_one_memory_says_until_when_it_can_be_undone(browser, ready, clock):
    entry = written(ready, "I live in Lisbon")
    page = browser.get(url("forget", entry)).content.decode()
    assert "You can undo this until 16 December 2026" in page
    response = browser.post(url("forget", entry), follow=True)
    assert "You can undo this until 16 December 2026" in response.content.decode()


@pytest.mark.parametrize(
    ("later", "undoable"),
    [
        (timedelta(0), True),
        (SOFT_DELETE_GRACE - timedelta(seconds=1), True),
        (SOFT_DELETE_GRACE, False),
        (SOFT_DELETE_GRACE + timedelta(days=1), False),
    ],
)
def test_undo_works_inside_the_grace_window_and_not_after(
    browser, ready, clock, later, undoable
) -> None:
    entry = written(ready, "I live in Lisbon")
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=T0)
    clock.at = T0 + later
    listed = browser.get(url("forgotten")).content.decode()
    detail = browser.get(url("detail", entry)).content.decode()
    assert ("I live in Lisbon" in listed) is undoable
    assert ("16 December 2026" in listed) is undoable
    assert ('action="' + url("restore", entry) + '"' in detail) is undoable
    assert ("Too late to undo" in detail) is not undoable
    response = browser.post(url("restore", entry), follow=True)
    if undoable:
        assert current(entry).lifecycle == "active"
        assert "Brought back." in response.content.decode()
    else:
        assert current(entry).lifecycle == "tombstoned"
        assert "grace window has passed" in response.content.decode()


def test_undo_brings_a_rejected_guess_back_unconfirmed(browser, ready, clock) -> None:
    entry = guess(ready)
    browser.post(url("reject", entry))
    browser.post(url("restore", entry))
    assert current(entry).lifecycle == "draft"


def test_the_home_page_links_to_recently_forgotten_with_a_count(browser, ready, clock):
    entry = written(ready, "I live in Lisbon")
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id, now=T0)
    html = browser.get(url("home")).content.decode()
    assert f'href="{url("forgotten")}"' in html and "Recently forgotten (1)" in html


# ---------------------------------------------------------------------------- guesses


def test_a_guess_offers_confirm_correct_and_reject(browser, ready) -> None:
    entry = guess(ready)
    assert current(entry).lifecycle == "draft"
    html = browser.get(url("detail", entry)).content.decode()
    assert "Iris guessed this" in html
    for name in ("confirm", "reject"):
        assert f'action="{url(name, entry)}"' in html
    assert f'href="{url("edit", entry)}"' in html and ">Correct<" in html
    assert 'class="button button--danger"' in html


def test_confirming_a_guess_makes_it_user_confirmed(browser, ready) -> None:
    entry = guess(ready)
    browser.post(url("confirm", entry))
    now = current(entry)
    assert (now.origin, now.lifecycle, now.body) == (
        "user-confirmed",
        "active",
        "My favourite drink is tea",
    )


def test_correcting_a_guess_says_it_becomes_what_you_said(browser, ready) -> None:
    entry = guess(ready)
    page = browser.get(url("edit", entry)).content.decode()
    assert "Correct a guess" in page and "kept as something you said" in page
    browser.post(url("edit", entry), {"body": "My favourite drink is coffee", "category": "fact"})
    now = current(entry)
    assert (now.origin, now.body, now.revision) == (
        "user-stated",
        "My favourite drink is coffee",
        2,
    )


def test_rejecting_a_guess_forgets_it(browser, ready) -> None:
    entry = guess(ready)
    browser.post(url("reject", entry))
    assert current(entry).lifecycle == "tombstoned"


def test_only_a_guess_can_be_rejected(browser, ready) -> None:
    entry = written(ready, "I live in Lisbon")
    answer = browser.post(url("reject", entry), follow=True)
    assert "Only a guess can be rejected; use Forget for this memory." in answer.content.decode()
    assert current(entry).lifecycle == "active"
    assert "Iris guessed this" not in browser.get(url("detail", entry)).content.decode()


# -------------------------------------------------------------------- conflict questions


def test_a_question_is_answered_on_the_memory_itself(browser, ready) -> None:
    prior = written(ready, "My favourite colour is blue", subject="favourite colour")
    assert write(ready, "My favourite colour is red", subject="favourite colour").status == (
        "conflict"
    )
    conflict = PendingConflict.objects.get()
    html = browser.get(url("detail", prior)).content.decode()
    assert "Should Iris update this?" in html and "“My favourite colour is red”" in html
    response = browser.post(
        url("answer_conflict", conflict_id=conflict.id), {"answer": "keep", "back": "detail"}
    )
    assert response["Location"] == url("detail", prior)
    assert current(prior).body == "My favourite colour is blue"
    assert not PendingConflict.objects.filter(status="open").exists()


# ------------------------------------------------------------------------ scope moves


def offered(client: Client, entry) -> set[str]:
    html = client.get(url("detail", entry)).content.decode()
    return {
        kind for kind in ("profile", "session", "notebook", "tenant") if f'value="{kind}"' in html
    }


@pytest.mark.parametrize(
    ("make", "source"),
    [
        (lambda m: in_session(m, "We talked about Rome"), "session"),
        (lambda m: written(m, "I live in Lisbon"), "profile"),
        (lambda m: in_notebook(m, "Rome in May"), "notebook"),
        (lambda m: in_tenant(m, "Office closes at six"), "tenant"),
    ],
)
def test_the_page_offers_every_move_the_rules_allow_and_refuses_the_rest(
    browser, ready, make, source
) -> None:
    entry = make(ready)
    allowed = {target.value for target, _ in scope_change_targets(source)}
    assert offered(browser, entry) == allowed
    for refused in {"profile", "session", "notebook", "tenant", "crisis"} - allowed:
        response = browser.post(url("scope", entry), {"scope_kind": refused}, follow=True)
        assert "cannot move there" in response.content.decode()
        assert current(entry).revision == 1 and current(entry).scope_kind == source


def test_a_move_to_a_notebook_and_back(browser, ready) -> None:
    entry = written(ready, "I live in Lisbon")
    browser.post(url("scope", entry), {"scope_kind": "notebook", "new_notebook": "Travel"})
    moved = current(entry)
    assert (moved.scope_kind, moved.scope_identifiers["notebookId"]) == ("notebook", "Travel")
    html = browser.get(url("detail", entry)).content.decode()
    assert "cannot be moved" not in html and "Back to about you" in html
    assert "Notebooks: “Travel”" in html
    browser.post(url("scope", entry), {"scope_kind": "profile"})
    assert current(entry).scope_kind == "profile"


def test_the_notebook_is_chosen_from_the_members_notebooks(browser, ready) -> None:
    in_notebook(ready, "Rome in May", name="travel")
    entry = in_session(ready, "We talked about Rome")
    html = browser.get(url("detail", entry)).content.decode()
    assert '<option value="travel">travel</option>' in html
    browser.post(url("scope", entry), {"scope_kind": "notebook", "notebook_id": "travel"})
    assert current(entry).scope_identifiers["notebookId"] == "travel"


def test_a_tenant_memory_gets_a_read_only_copy(browser, ready) -> None:
    entry = in_tenant(ready, "Office closes at six")
    browser.post(url("scope", entry), {"scope_kind": "notebook", "new_notebook": "work"})
    assert current(entry).scope_kind == "tenant"
    copy = MemoryEntry.objects.get(read_only_copy_of=entry.entry_id, is_current=True)
    html = browser.get(url("detail", copy)).content.decode()
    assert "read-only copy" in html and 'name="scope_kind"' not in html


def test_the_list_is_grouped_by_notebook(browser, ready) -> None:
    in_notebook(ready, "Rome in May", name="travel")
    in_notebook(ready, "Bread at six", name="work")
    html = browser.get(url("home")).content.decode()
    assert "Notebook “travel”" in html and "Notebook “work”" in html
    assert html.index("Rome in May") < html.index("Notebook “work”") < html.index("Bread at six")


# ---------------------------------------------------------------------------- headings


def test_the_detail_heading_is_the_memorys_subject(browser, ready) -> None:
    entry = written(ready, "My favourite colour is blue", subject="favourite colour")
    html = browser.get(url("detail", entry)).content.decode()
    assert "<h1>Favourite colour</h1>" in html and "A memory" not in html


# ------------------------------------------------------------------------ refusals


ENTRY_POSTS = ("confirm", "reject", "restore", "scope", "pause", "resume", "forget")


def test_another_member_gets_404_on_every_action(ready, other_member) -> None:
    entry = guess(ready)
    client = Client()
    client.force_login(other_member)
    for name in (*ENTRY_POSTS, "edit"):
        assert client.post(url(name, entry)).status_code == 404, name
    for name in ("detail", "edit", "forget"):
        assert client.get(url(name, entry)).status_code == 404, name
    prior = written(ready, "My favourite colour is blue", subject="favourite colour")
    write(ready, "My favourite colour is red", subject="favourite colour")
    conflict = PendingConflict.objects.get(entry_id=prior.entry_id)
    response = client.post(url("answer_conflict", conflict_id=conflict.id), {"answer": "update"})
    assert response.status_code == 404
    assert "My favourite drink" not in client.get(url("forgotten")).content.decode()
    assert current(entry).revision == 1 and current(prior).revision == 1


def test_another_members_forgotten_entry_cannot_be_restored(ready, other_member) -> None:
    entry = written(ready, "I live in Lisbon")
    memory_forget(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    client = Client()
    client.force_login(other_member)
    assert client.get(url("detail", entry)).status_code == 404
    assert client.post(url("restore", entry)).status_code == 404
    assert "I live in Lisbon" not in client.get(url("forgotten")).content.decode()
    assert current(entry).lifecycle == "tombstoned"


def test_every_form_needs_a_csrf_token(ready) -> None:
    entry = guess(ready)
    client = Client(enforce_csrf_checks=True)
    client.force_login(ready)
    for name in ENTRY_POSTS:
        assert client.post(url(name, entry)).status_code == 403, name
    for name in ("forget_topic", "forget_everything"):
        assert client.post(url(name), {"password": PASSWORD}).status_code == 403, name
    conflict_url = reverse("memory:answer_conflict", kwargs={"conflict_id": entry.entry_id})
    assert client.post(conflict_url, {"answer": "keep"}).status_code == 403
    assert current(entry).revision == 1 and not Approval.objects.exists()


def test_every_page_puts_a_csrf_token_in_every_form(browser, ready, clock) -> None:
    entry = guess(ready)
    in_session(ready, "We talked about Rome")
    pages = [url("home"), url("detail", entry), url("edit", entry), url("forget", entry)]
    pages += [url("forgotten"), url("forget_topic"), url("forget_everything")]
    for page in pages:
        html = browser.get(page).content.decode()
        forms = html.count('method="post"')
        assert forms and html.count('name="csrfmiddlewaretoken"') >= forms, page


@pytest.mark.parametrize("name", ["forgotten", "forget_topic", "forget_everything"])
def test_anonymous_and_operators_cannot_reach_the_forget_pages(ready, make_operator, name):
    assert "/accounts/login/" in Client().get(url(name))["Location"]
    client = Client()
    client.force_login(make_operator("support"))
    assert client.get(url(name)).status_code == 404
