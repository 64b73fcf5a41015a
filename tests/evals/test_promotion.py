"""Promotion suite (spec: "Inference threshold / promotion"): synthetic timelines of one
inference recurring across sessions, written by a surface through the API. An inference
is a draft (never recalled) until it has recurred in 3 distinct sessions; the same session
twice counts once, no session never counts; a sensitive inference is never promoted by
recurrence, however often; the member's confirmation promotes at once."""

from __future__ import annotations

import random

import pytest

from memory.rules.promotion import PROMOTION_THRESHOLD
from tests.evals.generators import SENSITIVE_TOPICS, STANDARD_TOPICS, canary
from tests.evals.support import MEMORIES, ask, recalled
from tests.factories import grant_category, payload

pytestmark = pytest.mark.django_db

SEED = 2605
THRESHOLD = 3  # the spec's IRIS_SESSION_PROFILE_PROMOTION_THRESHOLD
SESSIONS = ["s-1", "s-2", "s-3", "s-4", None]


def sessions_timeline(rng: random.Random) -> list[str | None]:
    return [rng.choice(SESSIONS) for _ in range(rng.randrange(1, 8))]


def infer(client, member, body: str, category: str, session: str | None):
    fields = {"origin": "model-inferred", "category": category, "body": body}
    if session is not None:
        fields["sessionId"] = session
    return client.post(MEMORIES, payload(member, **fields), format="json")


def test_the_threshold_is_the_specs() -> None:
    assert PROMOTION_THRESHOLD == THRESHOLD


def test_synthetic_timelines_promote_at_the_third_distinct_session(
    ready, surface_api, metric
) -> None:
    rng = random.Random(SEED)
    for topic in SENSITIVE_TOPICS:
        grant_category(ready, topic.category)
    user = str(ready.public_id)
    writes = promoted = expected_promotions = blocked = 0
    topics = [(t, False) for t in STANDARD_TOPICS] + [(t, True) for t in SENSITIVE_TOPICS]
    for topic, sensitive in topics:
        word = canary(rng)
        body = topic.body.format(c=word)
        timeline = sessions_timeline(rng)
        entry_id = None
        seen: set[str] = set()
        was_active = False
        for session in timeline:
            answer = infer(surface_api, ready, body, topic.category, session)
            writes += 1
            if session is not None:
                seen.add(session)
            should_be_active = not sensitive and len(seen) >= THRESHOLD
            assert answer.status_code in (200, 201), answer.content
            data = answer.json()
            if entry_id is None:
                assert answer.status_code == 201 and data["lifecycle"] == "draft", data
                entry_id = data["id"]
            elif answer.status_code == 200 and data.get("promotion") and not was_active:
                assert data["promotion"]["distinctSessions"] == len(seen)
                assert data["promotion"]["allowed"] is False
                reason = data["promotion"]["reason"]
                assert reason == (
                    "implicit-promotion-blocked"
                    if sensitive
                    else "repeated-occurrence-threshold-not-met"
                ), data
            stored = surface_api.get(f"{MEMORIES}/{entry_id}", {"userId": user}).json()
            assert stored["lifecycle"] == ("active" if should_be_active else "draft"), (
                topic.name,
                timeline,
                stored["lifecycle"],
            )
            assert stored["origin"] == "model-inferred"  # recurring is not the member's word
            was_active = should_be_active
        expected_promotions += was_active
        blocked += sensitive and len(seen) >= THRESHOLD
        # A draft never reaches a surface; a promoted inference does (in its context).
        context = sorted(topic.contexts)[0]
        found = entry_id in recalled(ask(surface_api, ready, topic.question, context=context))
        assert found == was_active, (topic.name, timeline)
        promoted += found
        if sensitive:
            confirmed = surface_api.post(
                f"{MEMORIES}/{entry_id}/confirm", {"userId": user}, format="json"
            )
            assert confirmed.status_code == 200, confirmed.content
            assert (confirmed.json()["lifecycle"], confirmed.json()["origin"]) == (
                "active",
                "user-confirmed",
            )
    assert 0 < expected_promotions < len(STANDARD_TOPICS)  # both verdicts exercised
    metric(
        "promotion",
        timelines=len(topics),
        writes=writes,
        promoted=promoted,
        expected_promoted=expected_promotions,
        sensitive_blocked_past_threshold=blocked,
        threshold=THRESHOLD,
        seed=SEED,
    )
