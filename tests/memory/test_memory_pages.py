"""The member's memory pages: list, detail, edit, forget, pause/resume, scope, questions."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memory.models import MemoryEntry, OffTheRecord, PendingConflict
from tests.factories import (
    scope_of,
    write,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(ready) -> Client:
    client = Client()
    client.force_login(ready)
    return client


@pytest.fixture
def entry(ready):
    return write(ready, "I live in Lyon").entry


def url(name: str, entry) -> str:
    return reverse(f"memory:{name}", kwargs={"entry_id": entry.entry_id})


def current(entry) -> MemoryEntry:
    return MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True)


def test_home_lists_current_memories_grouped_by_scope(browser, ready, entry) -> None:
    write(
        ready,
        "We discussed a trip",
        kind="session",
        identifiers=scope_of(ready, "session", sessionId="s1"),
    )
    response = browser.get(reverse("memory:home"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "What we remember" in html and "I live in Lyon" in html
    assert "About you" in html and "From a conversation" in html
    assert "Topic: Likes and preferences" in html and "Source: You said" in html
    assert "Waiting for your approval" in html


def test_the_nav_links_to_my_memory(browser) -> None:
    html = browser.get(reverse("memory:home")).content.decode()
    assert 'href="/memory/"' in html


def test_detail_shows_body_history_provenance_and_recalls(browser, entry) -> None:
    html = browser.get(url("detail", entry)).content.decode()
    assert "I live in Lyon" in html and "History" in html and "Where it came from" in html
    assert "No recalls recorded yet." in html


def test_edit_writes_a_new_revision(browser, entry) -> None:
    assert browser.get(url("edit", entry)).status_code == 200
    response = browser.post(url("edit", entry), {"body": "I live in Paris", "category": "fact"})
    assert response.status_code == 302 and response["Location"] == url("detail", entry)
    now = current(entry)
    assert (now.body, now.revision, now.category) == ("I live in Paris", 2, "fact")
    html = browser.get(url("detail", entry)).content.decode()
    assert "I live in Lyon" in html and "I live in Paris" in html  # both in the history


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"body": "   ", "category": "fact"}, "This field is required"),
        ({"body": "x" * 4001, "category": "fact"}, "at most 4000"),
        ({"body": "fine", "category": "not-a-topic"}, "Select a valid choice"),
    ],
)
def test_bad_edit_shows_the_error_and_changes_nothing(browser, entry, data, message) -> None:
    before = MemoryEntry.objects.count()
    response = browser.post(url("edit", entry), data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "There is a problem" in html and message in html
    assert 'aria-invalid="true"' in html
    assert MemoryEntry.objects.count() == before and current(entry).body == "I live in Lyon"


def test_an_edit_the_service_refuses_names_the_field(browser, entry, monkeypatch) -> None:
    from governance.errors import ValidationFailed
    from memory import services

    def refuse(**kwargs):
        raise ValidationFailed("body must not look like a secret.", field="body", rule="secret")

    monkeypatch.setattr(services, "memory_correct", refuse)
    response = browser.post(url("edit", entry), {"body": "sk-123", "category": "fact"})
    assert (
        response.status_code == 400
        and "body must not look like a secret." in response.content.decode()
    )


def test_forget_asks_first_then_tombstones(browser, entry) -> None:
    confirm = browser.get(url("forget", entry))
    assert confirm.status_code == 200 and "Forget this memory?" in confirm.content.decode()
    assert current(entry).lifecycle == "active"
    response = browser.post(url("forget", entry))
    assert response.status_code == 302 and response["Location"] == reverse("memory:home")
    assert current(entry).lifecycle == "tombstoned"
    assert "I live in Lyon" not in browser.get(reverse("memory:home")).content.decode()
    assert "Forgotten." in browser.get(url("detail", entry)).content.decode()


def test_pause_and_resume(browser, entry) -> None:
    browser.post(url("pause", entry))
    assert current(entry).lifecycle == "paused"
    assert current(entry).suppression_reason == "user-pause"
    browser.post(url("resume", entry))
    assert current(entry).lifecycle == "active"


def test_change_scope_moves_profile_memory_to_a_notebook(browser, entry) -> None:
    response = browser.post(
        url("scope", entry), {"scope_kind": "notebook", "notebook_id": "travel"}
    )
    assert response.status_code == 302
    assert current(entry).scope_kind == "notebook"


def test_a_refused_action_says_so_and_changes_nothing(browser, entry) -> None:
    response = browser.post(url("scope", entry), {"scope_kind": "profile"}, follow=True)
    assert "Nothing was changed" in response.content.decode()
    assert current(entry).revision == 1


def test_off_the_record_toggle_shows_a_banner(browser, ready) -> None:
    browser.post(reverse("memory:off_the_record"), {"enabled": "on"})
    assert OffTheRecord.objects.filter(member=ready).exists()
    assert "Off the record is on." in browser.get(reverse("memory:home")).content.decode()
    browser.post(reverse("memory:off_the_record"), {"enabled": ""})
    assert not OffTheRecord.objects.filter(member=ready).exists()


def test_member_answers_a_conflict_question(browser, ready) -> None:
    write(ready, "My favourite colour is blue", subject="favourite colour")
    outcome = write(ready, "My favourite colour is red", subject="favourite colour")
    assert outcome.status == "conflict"
    html = browser.get(reverse("memory:home")).content.decode()
    assert "Questions for you" in html
    conflict = PendingConflict.objects.get()
    browser.post(
        reverse("memory:answer_conflict", kwargs={"conflict_id": conflict.id}), {"answer": "update"}
    )
    assert MemoryEntry.objects.get(entry_id=conflict.entry_id, is_current=True).body == (
        "My favourite colour is red"
    )


def test_a_held_action_says_it_waits_for_approval(browser, entry, monkeypatch) -> None:
    from governance.pipeline import HeldForApproval
    from memory import services

    def held(**kwargs):
        raise HeldForApproval("held", extra={"approvalId": "x"})

    monkeypatch.setattr(services, "memory_forget", held)
    response = browser.post(url("forget", entry), follow=True)
    assert "waiting for your approval" in response.content.decode()


def test_a_denied_action_shows_a_clear_message(browser, entry, monkeypatch) -> None:
    from governance.pipeline import Denied
    from memory import services

    def denied(**kwargs):
        raise Denied("Sensitive memory needs your consent.")

    monkeypatch.setattr(services, "memory_pause", denied)
    response = browser.post(url("pause", entry), follow=True)
    assert "That was refused: Sensitive memory needs your consent." in response.content.decode()


# ------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("name", ["detail", "edit", "forget"])
def test_anonymous_is_sent_to_login(entry, name) -> None:
    response = Client().get(url(name, entry))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_anonymous_home_and_posts_go_to_login(entry) -> None:
    client = Client()
    assert "/accounts/login/" in client.get(reverse("memory:home"))["Location"]
    assert "/accounts/login/" in client.post(url("pause", entry))["Location"]
    assert current(entry).lifecycle == "active"


@pytest.mark.parametrize("name", ["detail", "edit", "forget"])
def test_another_members_entry_is_404(entry, other_member, name) -> None:
    client = Client()
    client.force_login(other_member)
    assert client.get(url(name, entry)).status_code == 404
    assert client.post(url("pause", entry)).status_code == 404
    assert client.post(url("forget", entry)).status_code == 404
    assert current(entry).lifecycle == "active"


def test_another_tenants_member_gets_404(entry, foreign_member) -> None:
    client = Client()
    client.force_login(foreign_member)
    assert client.get(url("detail", entry)).status_code == 404


def test_operators_get_404(entry, make_operator) -> None:
    client = Client()
    client.force_login(make_operator("support"))
    assert client.get(reverse("memory:home")).status_code == 404
    assert client.get(url("detail", entry)).status_code == 404
    assert client.post(url("forget", entry)).status_code == 404


def test_posts_need_a_csrf_token(ready, entry) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ready)
    assert client.post(url("pause", entry)).status_code == 403


def test_home_query_count_does_not_grow_with_entries(
    browser, ready, django_assert_max_num_queries
) -> None:
    for i in range(5):
        write(ready, f"Fact number {i}", subject=f"fact {i}")
    with django_assert_max_num_queries(20):
        assert browser.get(reverse("memory:home")).status_code == 200
