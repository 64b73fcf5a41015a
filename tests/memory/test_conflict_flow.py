"""The conflict ladder on stored memory: one test per rule, the member's question, answers."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from governance.errors import Conflict
from memory.models import ForgottenValue, MemoryEntry, PendingConflict
from memory.rules.conflicts import ConflictRule
from memory.selectors import text_fingerprint
from memory.services import memory_conflict_answer
from tests.factories import (
    as_member,
    as_surface,
    current,
    memory_audits,
    payload,
    write,
)

pytestmark = pytest.mark.django_db

CITY_BERLIN = "My home city is Berlin"
CITY_PARIS = "My home city is Paris"


def claim(member, body, origin, **kw):
    """A fact about the member, from `origin`, told by a surface unless `principal` says."""
    kw.setdefault("principal", as_surface(member))
    return write(member, body, category="fact", origin=origin, **kw)


def answer(member, conflict_id, reply):
    return memory_conflict_answer(
        principal=as_member(member), member=member, conflict_id=conflict_id, answer=reply
    )


def audited_text() -> str:
    return json.dumps([e.payload for e in memory_audits()])


# ------------------------------------------------------------------- one per rule


def test_rule_1_operator_copilot_never_trumps_what_the_member_stated(ready) -> None:
    stated = claim(ready, CITY_BERLIN, "user-stated").entry
    outcome = claim(ready, CITY_PARIS, "operator-copilot")
    assert outcome.status == "not-written"
    assert outcome.reason == f"kept-existing:{ConflictRule.OPERATOR_NEVER_TRUMPS_MEMBER}"
    assert current(stated.entry_id).revision == 1 and current(stated.entry_id).body == CITY_BERLIN
    assert PendingConflict.objects.count() == 0  # never shown to the member as a question
    event = memory_audits()[-1]
    assert event.action == "iris.memory.conflict.resolved"
    assert event.reason_code == "operator-never-trumps-member"
    assert event.payload["ladderWinner"] == "prior"
    assert event.payload["incoming"]["bodyFingerprint"] == text_fingerprint(CITY_PARIS)
    assert "Paris" not in audited_text()


def test_rule_2_explicit_statement_replaces_an_inference_without_asking(ready) -> None:
    imported = claim(ready, CITY_BERLIN, "imported").entry
    outcome = claim(ready, CITY_PARIS, "user-stated")
    assert outcome.written and outcome.reason == "explicit-beats-inferred"
    entry = current(imported.entry_id)
    assert (entry.revision, entry.body, entry.origin) == (2, CITY_PARIS, "user-stated")
    assert memory_audits()[-1].payload["conflict"]["rule"] == "explicit-beats-inferred"


def test_rule_2_an_inference_against_a_stated_fact_becomes_a_question(ready) -> None:
    stated = claim(ready, CITY_BERLIN, "user-stated").entry
    outcome = claim(ready, CITY_PARIS, "model-inferred", session_id="s1")
    assert outcome.status == "conflict"
    assert outcome.conflict.rule == "explicit-beats-inferred"
    assert outcome.question == (
        "You mentioned “My home city is Berlin” earlier — should I update it to "
        "“My home city is Paris”?"
    )
    assert current(stated.entry_id).revision == 1
    assert MemoryEntry.objects.count() == 1
    event = memory_audits()[-1]
    assert event.action == "iris.memory.conflict.raised"
    assert "Berlin" not in audited_text() and "Paris" not in audited_text()


def test_rule_3_a_confirmed_fact_is_kept_against_a_new_inference(ready) -> None:
    confirmed = claim(ready, CITY_BERLIN, "user-confirmed").entry
    outcome = claim(ready, CITY_PARIS, "summarized-from-session")
    assert outcome.status == "conflict" and outcome.conflict.rule == "confirmed-beats-inferred"
    assert outcome.conflict.ladder_winner == "prior"
    kept = answer(ready, outcome.conflict.id, "keep")
    assert kept.reason == "conflict-answered-keep"
    assert current(confirmed.entry_id).revision == 1
    # The refused inference is not proposed again.
    again = claim(ready, CITY_PARIS, "summarized-from-session")
    assert again.reason == "forgotten-not-recreated"
    assert ForgottenValue.objects.filter(reason="rejected").count() == 1


def test_rule_3_a_confirmation_replaces_an_inference(ready) -> None:
    inferred = claim(ready, CITY_BERLIN, "summarized-from-session").entry
    outcome = claim(ready, CITY_PARIS, "user-confirmed")
    assert outcome.written and outcome.reason == "confirmed-beats-inferred"
    assert current(inferred.entry_id).origin == "user-confirmed"


def test_rule_4_most_recent_wins_between_inferences_silently(ready) -> None:
    first = claim(ready, CITY_BERLIN, "summarized-from-session").entry
    outcome = claim(ready, CITY_PARIS, "imported")
    assert outcome.written and outcome.reason == "most-recent-wins"
    assert current(first.entry_id).body == CITY_PARIS
    assert PendingConflict.objects.count() == 0


def test_rule_4_between_the_members_own_words_asks_before_overwriting(ready) -> None:
    stated = claim(ready, CITY_BERLIN, "user-stated").entry
    outcome = claim(ready, CITY_PARIS, "user-stated")
    assert outcome.status == "conflict"
    assert (outcome.conflict.rule, outcome.conflict.ladder_winner) == (
        "most-recent-wins",
        "incoming",
    )
    updated = answer(ready, outcome.conflict.id, "update")
    entry = updated.entry
    assert (entry.entry_id, entry.revision, entry.body) == (stated.entry_id, 2, CITY_PARIS)
    assert entry.origin == "user-stated"
    event = [e for e in memory_audits() if e.action == "iris.memory.conflict.answered"][0]
    assert event.payload["answer"] == "update"
    assert event.payload["rule"] == "most-recent-wins"
    assert event.payload["prior"]["bodyFingerprint"] == text_fingerprint(CITY_BERLIN)
    assert event.payload["proposed"]["bodyFingerprint"] == text_fingerprint(CITY_PARIS)
    assert event.payload["result"]["revision"] == 2
    assert "Paris" not in audited_text()


def test_restating_the_same_value_changes_nothing(ready) -> None:
    stated = claim(ready, CITY_BERLIN, "user-stated").entry
    outcome = claim(ready, "my home city is berlin.", "user-stated")
    assert outcome.reason == "already-known" and outcome.entry.entry_id == stated.entry_id
    assert MemoryEntry.objects.count() == 1


# -------------------------------------------------------------- answering questions


def test_an_accepted_inference_becomes_user_confirmed(ready) -> None:
    claim(ready, CITY_BERLIN, "user-stated")
    conflict = claim(ready, CITY_PARIS, "model-inferred", session_id="s1").conflict
    entry = answer(ready, conflict.id, "update").entry
    assert (entry.body, entry.origin, entry.lifecycle) == (CITY_PARIS, "user-confirmed", "active")


def test_the_proposal_text_is_erased_once_answered(ready) -> None:
    claim(ready, CITY_BERLIN, "user-stated")
    conflict = claim(ready, CITY_PARIS, "user-stated").conflict
    assert PendingConflict.objects.get(pk=conflict.id).proposal["body"] == CITY_PARIS
    answer(ready, conflict.id, "keep")
    row = PendingConflict.objects.get(pk=conflict.id)
    assert (row.status, row.answer, row.proposal) == ("answered", "keep", {})
    assert row.proposal_fingerprint == text_fingerprint(CITY_PARIS)
    with pytest.raises(Conflict) as twice:
        answer(ready, conflict.id, "update")
    assert twice.value.code == "conflict-closed"


def test_a_newer_contradiction_replaces_the_open_question(ready) -> None:
    claim(ready, CITY_BERLIN, "user-stated")
    first = claim(ready, CITY_PARIS, "user-stated").conflict
    second = claim(ready, "My home city is Rome", "user-stated").conflict
    assert PendingConflict.objects.get(pk=first.id).status == "replaced"
    assert PendingConflict.objects.get(pk=first.id).proposal == {}
    assert PendingConflict.objects.get(pk=second.id).status == "open"


def test_an_expired_or_stale_question_changes_nothing(ready) -> None:
    stated = claim(ready, CITY_BERLIN, "user-stated").entry
    conflict = claim(ready, CITY_PARIS, "user-stated").conflict
    PendingConflict.objects.filter(pk=conflict.id).update(
        expires_at=conflict.created_at - timedelta(seconds=1)
    )
    with pytest.raises(Conflict) as expired:
        answer(ready, conflict.id, "update")
    assert expired.value.code == "conflict-expired"
    assert PendingConflict.objects.get(pk=conflict.id).proposal == {}
    assert current(stated.entry_id).revision == 1

    conflict = claim(ready, CITY_PARIS, "user-stated").conflict
    from memory.services import Correction, memory_correct

    memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=stated.entry_id,
        correction=Correction(body="My home city is Lisbon"),
    )
    assert PendingConflict.objects.get(pk=conflict.id).status == "replaced"


def test_conflict_through_the_api_is_409_then_answered(surface_api, ready) -> None:
    first = surface_api.post(
        "/api/v1/memories", payload(ready, body=CITY_BERLIN, category="fact"), format="json"
    )
    assert first.status_code == 201
    response = surface_api.post(
        "/api/v1/memories", payload(ready, body=CITY_PARIS, category="fact"), format="json"
    )
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "memory-conflict"
    assert body["question"].startswith("You mentioned “My home city is Berlin” earlier")
    assert body["entryId"] == first.json()["id"]
    answered = surface_api.post(
        f"/api/v1/memories/conflicts/{body['conflictId']}/answer",
        {"userId": str(ready.public_id), "answer": "update"},
        format="json",
    )
    assert answered.status_code == 200
    assert answered.json()["entry"]["body"] == CITY_PARIS
    assert answered.json()["entry"]["revision"] == 2
    bad = surface_api.post(
        f"/api/v1/memories/conflicts/{body['conflictId']}/answer",
        {"userId": str(ready.public_id), "answer": "maybe"},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "answer"
