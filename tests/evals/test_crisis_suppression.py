"""Crisis-suppression suite (spec: "verify no normal recall during a crisis frame").

A synthetic member with everyday, sensitive, safety and paused memories in profile and
session scope; recalls under a crisis frame, from every surface and scope, return nothing
(or, with `safetyCriticalContext`, only safety memories), and the audit envelope counts
every other reachable memory under `crisis-frame`, in the answer and in the audit chain."""

from __future__ import annotations

import itertools
import random

import pytest

from governance.models import AuditEvent
from memory.enums import RecallSurface
from memory.recall.pipeline import CRISIS_FRAME
from memory.recall.service import AUDIT_ACTION
from tests.evals.generators import SENSITIVE_TOPICS, STANDARD_TOPICS, Topic, facts
from tests.evals.support import ask, recalled, remember, scope_body
from tests.factories import grant_category

pytestmark = pytest.mark.django_db

SEED = 2602
SAFETY_TOPICS = (
    Topic(
        "plan",
        "safety",
        "My safety plan is to call my sister at the {c} number",
        "what is my safety plan",
        frozenset({"safety", "crisis"}),
    ),
    Topic(
        "contact",
        "safety",
        "My crisis contact is the {c} helpline",
        "who do I call in a crisis",
        frozenset({"safety", "crisis"}),
    ),
)
SURFACES = [s.value for s in RecallSurface if s is not RecallSurface.ADMIN]


@pytest.fixture
def crisis_world(ready, surface_api):
    rng = random.Random(SEED)
    for topic in SENSITIVE_TOPICS + SAFETY_TOPICS:
        grant_category(ready, topic.category)
    everyday = facts(rng, "ada")
    sensitive = facts(rng, "ada", SENSITIVE_TOPICS)
    safety = facts(rng, "ada", SAFETY_TOPICS)
    in_session = facts(rng, "ada-s1", STANDARD_TOPICS[:4])
    ids: dict[str, list[str]] = {"profile": [], "safety": [], "session": []}
    for fact in everyday + sensitive:
        ids["profile"].append(remember(surface_api, ready, fact))
    for fact in safety:
        ids["safety"].append(remember(surface_api, ready, fact))
    for fact in in_session:
        ids["session"].append(
            remember(surface_api, ready, fact, kind="session", ids={"sessionId": "s-1"})
        )
    paused = ids["profile"][0]
    answer = surface_api.post(
        f"/api/v1/memories/{paused}/pause", {"userId": str(ready.public_id)}, format="json"
    )
    assert answer.status_code == 200, answer.content
    return ids


CASES = [
    # (scope, reachable groups)
    (scope_body(), ("profile", "safety")),
    (scope_body("session", sessionId="s-1"), ("profile", "safety", "session")),
]


def test_no_normal_recall_in_a_crisis_frame_and_every_memory_is_counted(
    crisis_world, ready, surface_api, metric
) -> None:
    recalls = 0
    suppressed = 0
    for surface, (scope, groups) in itertools.product(SURFACES, CASES):
        reachable = sum(len(crisis_world[g]) for g in groups)
        for context in ("crisis", "general", "health"):
            for query in ("", "what is my safety plan", "how do I take my morning coffee"):
                answer = ask(
                    surface_api,
                    ready,
                    query,
                    scope=scope,
                    context=context,
                    surface=surface,
                    crisisFrame=True,
                )
                assert recalled(answer) == [], (scope, context, query)
                envelope = answer.json()["auditEnvelope"]
                counts = envelope["suppressionCounts"]
                # The crisis gate comes before pause, lifecycle and sensitivity: every
                # reachable memory of the member is counted there, the paused one too.
                assert counts.get(CRISIS_FRAME) == reachable, (scope, counts)
                assert envelope["evaluatedCount"] == sum(counts.values())
                event = AuditEvent.objects.filter(action=AUDIT_ACTION).order_by("-seq")[0]
                assert event.payload["suppressionCounts"] == counts
                assert event.payload["returnedIds"] == []
                recalls += 1
                suppressed += counts[CRISIS_FRAME]
    metric(
        "crisis-suppression",
        recalls=recalls,
        normal_entries_returned=0,
        crisis_frame_counted=suppressed,
    )


def test_a_safety_critical_crisis_recall_returns_safety_memory_only(
    crisis_world, ready, surface_api
) -> None:
    for scope, groups in CASES:
        reachable = sum(len(crisis_world[g]) for g in groups)
        answer = ask(
            surface_api,
            ready,
            "",
            scope=scope,
            context="crisis",
            crisisFrame=True,
            safetyCriticalContext=True,
        )
        assert sorted(recalled(answer)) == sorted(crisis_world["safety"])
        counts = answer.json()["auditEnvelope"]["suppressionCounts"]
        assert counts[CRISIS_FRAME] == reachable - len(crisis_world["safety"])


def test_outside_the_frame_the_same_questions_recall_normally(
    crisis_world, ready, surface_api
) -> None:
    answer = ask(surface_api, ready, "what is my dog called")
    assert recalled(answer)  # the control: the suppression above is the frame's doing
    assert CRISIS_FRAME not in answer.json()["auditEnvelope"]["suppressionCounts"]
