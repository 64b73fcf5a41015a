"""Determinism suite (DESIGN invariant 5): same request, same memory state, same `now` ⇒
the same answer, byte for byte, with every ranker, whether the worker answers from its
recall snapshot or reads the database afresh. Requests are drawn by hypothesis from the
synthetic world's questions, scopes, contexts, surfaces and limits."""

from __future__ import annotations

import random

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memory.enums import RecallSurface
from memory.models import MemoryEntry
from memory.recall import snapshot as recall_snapshot
from tests.evals.generators import (
    SENSITIVE_TOPICS,
    STANDARD_TOPICS,
    T0,
    UNANSWERABLE,
    facts,
)
from tests.evals.support import ask, remember, scope_body
from tests.factories import grant_category

pytestmark = pytest.mark.django_db

SEED = 2603
RANKERS = ["hybrid", "lexical", "jaccard"]
QUESTIONS = (
    [t.question for t in STANDARD_TOPICS + SENSITIVE_TOPICS]
    + list(UNANSWERABLE)
    + [
        "",
        "give me a briefing",
    ]
)
SCOPES = [scope_body(), scope_body("session", sessionId="s-1")]
CONTEXTS = ["general", "health", "financial", "crisis"]
SURFACES = [s.value for s in RecallSurface if s is not RecallSurface.ADMIN]


@pytest.fixture
def fixed_clock(monkeypatch):
    """Iris's clock stands still at T0 + 40 days for the whole test."""
    moment = T0.replace(day=11, month=4)
    monkeypatch.setattr(timezone, "now", lambda: moment)
    return moment


@pytest.fixture
def state(ready, surface_api, fixed_clock):
    rng = random.Random(SEED)
    for topic in SENSITIVE_TOPICS:
        grant_category(ready, topic.category)
    for fact in facts(rng, "ada") + facts(rng, "ada", SENSITIVE_TOPICS):
        remember(surface_api, ready, fact)
    for fact in facts(rng, "ada-s1", STANDARD_TOPICS[:5]):
        remember(surface_api, ready, fact, kind="session", ids={"sessionId": "s-1"})
    # Uneven usage, so the reference term of the blend has something to order.
    for entry in MemoryEntry.objects.filter(member=ready, is_current=True).order_by("body"):
        MemoryEntry.objects.filter(pk=entry.pk).update(reference_count=rng.randrange(0, 12))
    return usage(ready)


def usage(member) -> dict[int, tuple[int, object]]:
    rows = MemoryEntry.objects.filter(member=member).values_list(
        "pk", "reference_count", "last_referenced_at"
    )
    return {pk: (count, at) for pk, count, at in rows}


def restore(saved: dict[int, tuple[int, object]]) -> None:
    """Undo what a recall changed (reference counts and times): the same state again."""
    changed = [
        MemoryEntry(pk=pk, reference_count=saved[pk][0], last_referenced_at=saved[pk][1])
        for pk, (count, at) in usage_of(saved).items()
        if (count, at) != saved[pk]
    ]
    MemoryEntry.objects.bulk_update(changed, ["reference_count", "last_referenced_at"])


def usage_of(saved: dict[int, tuple[int, object]]) -> dict[int, tuple[int, object]]:
    rows = MemoryEntry.objects.filter(pk__in=saved).values_list(
        "pk", "reference_count", "last_referenced_at"
    )
    return {pk: (count, at) for pk, count, at in rows}


def twice(client, member, saved, **request) -> tuple[bytes, bytes]:
    recall_snapshot.clear()
    first = ask(client, member, **request)
    assert first.status_code == 200, first.content
    restore(saved)
    # The second answer comes from the snapshot the first one built.
    second = ask(client, member, **request)
    restore(saved)
    recall_snapshot.clear()
    third = ask(client, member, **request)  # and once more from the database afresh
    restore(saved)
    assert second.content == third.content
    return first.content, second.content


@pytest.mark.parametrize("ranker", RANKERS)
def test_same_request_state_and_now_give_the_same_bytes(
    state, ready, surface_api, settings, ranker, metric
) -> None:
    settings.IRIS_RECALL_SEMANTIC = ranker
    compared = 0

    @settings_for_db
    @given(
        query=st.sampled_from(QUESTIONS),
        scope=st.sampled_from(SCOPES),
        context=st.sampled_from(CONTEXTS),
        surface=st.sampled_from(SURFACES),
        limit=st.sampled_from([None, 1, 3, 12]),
    )
    def check(query, scope, context, surface, limit) -> None:
        nonlocal compared
        extra = {} if limit is None else {"limit": limit}
        first, second = twice(
            surface_api,
            ready,
            state,
            query=query,
            scope=scope,
            context=context,
            surface=surface,
            **extra,
        )
        assert first == second, (query, scope, context, surface, limit)
        compared += 1

    check()
    assert compared >= 8
    metric("determinism", **{f"{ranker}_requests_compared": compared, "mismatches": 0})


settings_for_db = hypothesis_settings(
    max_examples=8,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


def test_a_different_now_is_a_different_answer(state, ready, surface_api, monkeypatch) -> None:
    """The control: the bytes above are equal because the inputs are, not by accident."""
    asked = {"query": "how do I take my morning coffee"}
    first = ask(surface_api, ready, **asked)
    restore(state)
    later = timezone.now().replace(year=2027)
    monkeypatch.setattr(timezone, "now", lambda: later)
    recall_snapshot.clear()
    second = ask(surface_api, ready, **asked)
    assert first.status_code == second.status_code == 200
    assert first.json()["entries"][0]["score"] != second.json()["entries"][0]["score"]
