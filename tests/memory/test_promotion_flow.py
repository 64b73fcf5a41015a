"""Inference vs confirmation on stored memory: timelines of distinct sessions."""

from __future__ import annotations

import pytest

from consent.enums import Category
from memory.models import InferenceObservation, MemoryEntry
from memory.rules.promotion import PROMOTION_THRESHOLD
from memory.services import memory_change_scope, memory_confirm, memory_write
from tests.factories import (
    as_member,
    as_surface,
    current,
    draft,
    grant_category,
    memory_audits,
    scope_of,
)

pytestmark = pytest.mark.django_db

INFERENCE = "My favourite drink is oat flat white"


def infer(member, session, body=INFERENCE, category="preference", **kw):
    return memory_write(
        principal=as_surface(member),
        member=member,
        draft=draft(
            member, body, category=category, origin="model-inferred", session_id=session, **kw
        ),
    )


def test_an_inference_is_a_draft_until_three_distinct_sessions(ready) -> None:
    first = infer(ready, "s1")
    assert first.written and first.entry.lifecycle == "draft"
    assert first.promotion.reason == "repeated-occurrence-threshold-not-met"
    entry_id = first.entry.entry_id

    # Said again in the same session: one session still.
    same = infer(ready, "s1")
    assert same.reason == "inference-observed" and same.distinct_sessions == 1

    second = infer(ready, "s2")
    assert second.status == "not-written" and second.reason == "inference-observed"
    assert second.distinct_sessions == 2
    assert second.promotion.reason == "repeated-occurrence-threshold-not-met"
    assert current(entry_id).lifecycle == "draft" and current(entry_id).revision == 1

    third = infer(ready, "s3")
    assert PROMOTION_THRESHOLD == 3
    assert third.written and third.distinct_sessions == 3
    assert third.promotion.reason == "repeated-occurrence-threshold-met"
    promoted = current(entry_id)
    assert (promoted.lifecycle, promoted.revision) == ("active", 2)
    # Recurring is evidence, not the member's word: the origin stays an inference.
    assert promoted.origin == "model-inferred"
    actions = [e.action for e in memory_audits()]
    assert actions.count("iris.memory.inference.observed") == 2
    assert actions[-1] == "iris.memory.entry.promoted"
    assert memory_audits()[-1].reason_code == "repeated-occurrence-threshold-met"
    # Only fingerprints are kept of what was observed.
    assert InferenceObservation.objects.count() == 3
    assert "oat" not in str(list(InferenceObservation.objects.values()))


def test_explicit_confirmation_promotes_at_once(ready) -> None:
    entry = infer(ready, "s1").entry
    outcome = memory_confirm(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    confirmed = outcome.entry
    assert (confirmed.lifecycle, confirmed.origin) == ("active", "user-confirmed")
    assert outcome.promotion.reason == "explicit-promotion"
    again = memory_confirm(principal=as_member(ready), member=ready, entry_id=entry.entry_id)
    assert not again.written


def test_a_member_stating_the_inferred_value_confirms_it(ready) -> None:
    entry = infer(ready, "s1").entry
    stated = memory_write(
        principal=as_member(ready),
        member=ready,
        draft=draft(ready, INFERENCE, category="preference", origin="user-stated"),
    )
    assert stated.written and stated.entry.entry_id == entry.entry_id
    assert (stated.entry.lifecycle, stated.entry.origin) == ("active", "user-stated")


def test_a_sensitive_inference_is_never_auto_persisted(ready) -> None:
    grant_category(ready, Category.MENTAL_HEALTH)
    body = "My mood is low in winter"
    outcomes = [infer(ready, f"s{i}", body=body, category="mental_health") for i in range(1, 6)]
    assert outcomes[0].entry.lifecycle == "draft"
    assert all(o.promotion.reason == "implicit-promotion-blocked" for o in outcomes)
    assert outcomes[-1].distinct_sessions == 5
    entry_id = outcomes[0].entry.entry_id
    assert current(entry_id).lifecycle == "draft"
    confirmed = memory_confirm(principal=as_member(ready), member=ready, entry_id=entry_id).entry
    assert (confirmed.lifecycle, confirmed.origin) == ("active", "user-confirmed")


def test_an_inference_without_a_session_never_counts(ready) -> None:
    for _ in range(4):
        outcome = infer(ready, None)
    assert outcome.distinct_sessions == 0
    assert MemoryEntry.objects.get(is_current=True).lifecycle == "draft"


def test_a_different_inference_replaces_an_inferred_fact_only_once_earned(ready) -> None:
    for session in ("s1", "s2", "s3"):
        infer(ready, session)
    entry_id = MemoryEntry.objects.get(is_current=True).entry_id
    other = "My favourite drink is green tea"
    assert infer(ready, "s4", body=other).reason == "inference-observed"
    assert infer(ready, "s5", body=other).reason == "inference-observed"
    assert current(entry_id).body == INFERENCE
    replaced = infer(ready, "s6", body=other)
    assert replaced.written and current(entry_id).body == other
    assert current(entry_id).lifecycle == "active"


def test_moving_a_session_inference_to_profile_is_an_explicit_promotion(ready) -> None:
    session = scope_of(ready, "session", sessionId="s1")
    entry = infer(ready, "s1", kind="session", identifiers=session).entry
    assert entry.lifecycle == "draft"
    moved = memory_change_scope(
        principal=as_member(ready),
        member=ready,
        entry_id=entry.entry_id,
        scope_kind="profile",
        scope_identifiers=scope_of(ready),
    ).entry
    assert (moved.scope_kind, moved.lifecycle, moved.origin) == (
        "profile",
        "active",
        "user-confirmed",
    )


def test_session_memory_is_never_silently_profile_memory(ready) -> None:
    session = scope_of(ready, "session", sessionId="s1")
    for sid in ("s1", "s2", "s3"):
        infer(ready, sid, kind="session", identifiers=session)
    assert set(MemoryEntry.objects.values_list("scope_kind", flat=True)) == {"session"}
