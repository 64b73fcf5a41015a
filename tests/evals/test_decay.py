"""Decay-accuracy suite (spec: "usage-weighted decay (30-day half-life), not FSRS"):
synthetic timelines of inferred memories, written and recalled at fixed moments through
the API, then the beat's decay job at a fixed evaluation day. The expected verdicts are
computed here from the spec's formula, independently of Iris's code: recency halves every
30 days since the last reference, usage scales it by 1 + min(1, references / 10), and an
unconfirmed inference retires once that falls below 0.1. What the member stated never
decays."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from memory import tasks
from memory.rules.retention import recency_score
from tests.evals.generators import T0, canary, timeline
from tests.evals.support import MEMORIES, ask, recalled
from tests.factories import payload

pytestmark = pytest.mark.django_db

SEED = 2604
HALF_LIFE_DAYS = 30
THRESHOLD = 0.1
EVALUATED_ON = T0 + timedelta(days=200)
INFERRED, STATED = "summarized-from-session", "user-stated"


def expected_weight(last_day: float, references: int) -> float:
    age = (EVALUATED_ON - (T0 + timedelta(days=last_day))).total_seconds() / 86400
    return 0.5 ** (age / HALF_LIFE_DAYS) * (1 + min(1.0, references / 10))


def test_recency_halves_every_thirty_days() -> None:
    for n in range(0, 8):
        later = T0 + timedelta(days=HALF_LIFE_DAYS * n)
        assert recency_score(later, T0) == 0.5**n
    assert recency_score(T0 + timedelta(days=15), T0) == pytest.approx(2**-0.5, abs=1e-12)


def test_synthetic_timelines_retire_exactly_the_stale_inferences(
    ready, surface_api, member_api, clock, settings, metric
) -> None:
    settings.IRIS_RECALL_SEMANTIC = "lexical"  # a canary question finds exactly its memory
    rng = random.Random(SEED)
    user = str(ready.public_id)
    memories = []
    for i in range(18):
        word = canary(rng)
        origin = STATED if i % 6 == 5 else INFERRED
        written_day = rng.uniform(0, 20)
        moments = [m for m in timeline(rng, rng.randrange(0, 4), 190) if m.day > written_day]
        memories.append((word, origin, written_day, moments))

    # Play every timeline in time order on the one clock.
    events = []
    for index, (_, _, written_day, moments) in enumerate(memories):
        events.append((written_day, index, "write", 0))
        events.extend((m.day, index, "recall", m.references) for m in moments)
    ids: dict[int, str] = {}
    references = dict.fromkeys(range(len(memories)), 0)
    last_day = {i: memories[i][2] for i in range(len(memories))}
    for day, index, what, count in sorted(events):
        clock.move_to(T0 + timedelta(days=day))
        word, origin = memories[index][0], memories[index][1]
        if what == "write":
            body = payload(ready, body=f"{word} is my name for project {index}", origin=origin)
            answer = surface_api.post(MEMORIES, body, format="json")
            assert answer.status_code == 201, answer.content
            ids[index] = answer.json()["id"]
            continue
        for _ in range(count):
            assert recalled(ask(surface_api, ready, word, limit=1)) == [ids[index]]
            references[index] += 1
        if count:
            last_day[index] = day

    clock.move_to(EVALUATED_ON)
    tasks.decay.delay(str(ready.tenant_id))

    # The member sees what was forgotten; to a surface it is simply gone.
    listed = member_api.get(MEMORIES, {"lifecycle": "tombstoned", "limit": 50})
    assert listed.status_code == 200, listed.content
    forgotten = {e["id"] for e in listed.json()["results"]}
    agree = 0
    retired = 0
    expected_retired = 0
    for index, (_, origin, _, _) in enumerate(memories):
        weight = expected_weight(last_day[index], references[index])
        should_retire = origin == INFERRED and weight < THRESHOLD
        got = surface_api.get(f"{MEMORIES}/{ids[index]}", {"userId": user})
        did_retire = ids[index] in forgotten
        # A forgotten memory is gone from the member's view; a kept one shows its usage.
        assert got.status_code == (404 if did_retire else 200), got.content
        if not did_retire:
            assert got.json()["referenceCount"] == references[index]
        assert did_retire == should_retire, (index, origin, weight)
        agree += 1
        retired += did_retire
        expected_retired += should_retire
    assert 0 < expected_retired < len(memories)  # the timelines exercise both verdicts
    metric(
        "decay",
        timelines=len(memories),
        retired=retired,
        expected_retired=expected_retired,
        accuracy=agree / len(memories),
        half_life_days=HALF_LIFE_DAYS,
        seed=SEED,
    )
