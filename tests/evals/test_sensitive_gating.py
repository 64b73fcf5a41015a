"""Sensitive-gating suite (spec: "the per-category surface allow-list enforced in every
surface (assistant, shell, notebooks, ritual resume, briefing)"). One memory per sensitive
category; every recall surface asks in every surfacing context, both with a question and
as a briefing (a query with no words); the allow-list below is the spec's table (written
out, not imported) plus Iris's own rows for the five categories the spec leaves out. A
sensitive memory outside its contexts is a leak (must be 0), and each drop is counted
under its reason. Ritual resume: a continuation token that carries a sensitive category is
not handed to another device once that category's consent is withdrawn."""

from __future__ import annotations

import itertools
import random

import pytest

from consent.enums import SENSITIVE_CATEGORIES, ConsentType
from memory.enums import RecallSurface
from memory.recall.pipeline import (
    SENSITIVE_CONTEXTS,
    SENSITIVE_OUTSIDE_CONTEXT,
    SENSITIVE_WITHOUT_CONSENT,
    SURFACING_CONTEXTS,
)
from tests.evals.generators import Fact, canary
from tests.evals.support import ask, consent, place, remember
from tests.factories import grant, grant_category

pytestmark = pytest.mark.django_db

SEED = 2607
HEALTH = {"health", "safety", "crisis"}
SPEC_ALLOW_LIST: dict[str, set[str]] = {
    **dict.fromkeys(
        [
            "pose_alignment",
            "biometric",
            "medical",
            "physical_health",
            "mental_health",
            "substance_use",
        ],
        HEALTH,
    ),
    **dict.fromkeys(["sexuality", "gender_identity"], {"identity", "safety", "crisis"}),
    "spiritual": {"spiritual"},
    "financial": {"financial", "safety", "crisis"},
    **dict.fromkeys(["legal", "immigration_status"], {"legal", "safety", "crisis"}),
    **dict.fromkeys(
        ["abuse_history", "relationship_violence"], {"relationship", "safety", "crisis"}
    ),
}
SURFACES = [s.value for s in RecallSurface if s is not RecallSurface.ADMIN]


def test_the_allow_list_is_the_specs_where_the_spec_has_one() -> None:
    for category, contexts in SPEC_ALLOW_LIST.items():
        assert SENSITIVE_CONTEXTS[category] == contexts, category
    assert set(SENSITIVE_CONTEXTS) == set(SENSITIVE_CATEGORIES)
    # Iris's own rows never open a general context.
    assert all("general" not in c for c in SENSITIVE_CONTEXTS.values())


@pytest.fixture
def sensitive_memories(ready, surface_api) -> dict[str, tuple[str, str]]:
    rng = random.Random(SEED)
    grant(ready, ConsentType.SENSITIVE_DATA)
    made = {}
    for category in sorted(SENSITIVE_CATEGORIES):
        grant_category(ready, category)
        word = canary(rng)
        fact = Fact(
            key=category,
            topic=category,
            category=category,
            body=f"Private note about {category.replace('_', ' ')}: {word}",
            question="private note",
            canary=word,
            contexts=frozenset(SENSITIVE_CONTEXTS[category]),
        )
        made[category] = (remember(surface_api, ready, fact), word)
    return made


def test_every_surface_and_context_shows_only_what_the_allow_list_allows(
    sensitive_memories, ready, surface_api, metric
) -> None:
    by_id = {entry_id: category for category, (entry_id, _) in sensitive_memories.items()}
    probes = leaks = shown = 0
    for surface, context, query in itertools.product(
        SURFACES, sorted(SURFACING_CONTEXTS), ["", "private note"]
    ):
        answer = ask(surface_api, ready, query, context=context, surface=surface, limit=50)
        assert answer.status_code == 200, answer.content
        data = answer.json()
        returned = [by_id[e["entry"]["id"]] for e in data["entries"]]
        allowed = {c for c in SENSITIVE_CATEGORIES if context in SENSITIVE_CONTEXTS[c]}
        outside = [c for c in returned if c not in allowed]
        leaks += len(outside)
        probes += 1
        shown += len(returned)
        counts = data["auditEnvelope"]["suppressionCounts"]
        assert counts.get(SENSITIVE_OUTSIDE_CONTEXT, 0) == len(SENSITIVE_CATEGORIES) - len(
            allowed
        ), (surface, context, counts)
        assert outside == [], (surface, context, outside)
    assert shown > 0  # the control: allowed memories do surface
    metric(
        "sensitive-gating",
        probes=probes,
        categories=len(SENSITIVE_CATEGORIES),
        surfaces=len(SURFACES),
        contexts=len(SURFACING_CONTEXTS),
        shown_in_allowed_contexts=shown,
        leaks=leaks,
        leakage_rate=leaks / max(1, probes),
    )


def test_a_request_narrowing_consent_to_nothing_drops_every_sensitive_memory(
    sensitive_memories, ready, surface_api
) -> None:
    for context in ("health", "safety", "crisis", "spiritual"):
        answer = ask(surface_api, ready, "", context=context, consentedCategories=[], limit=50)
        data = answer.json()
        assert data["entries"] == []
        counts = data["auditEnvelope"]["suppressionCounts"]
        assert counts[SENSITIVE_WITHOUT_CONSENT] == len(SENSITIVE_CATEGORIES)
        # A request may narrow the ledger's consent, never widen it: naming a category
        # is not consent to it.
    answer = ask(
        surface_api, ready, "", context="health", consentedCategories=["medical"], limit=50
    )
    assert {e["entry"]["category"] for e in answer.json()["entries"]} == {"medical"}


def test_ritual_resume_drops_a_sensitive_place_once_its_consent_is_withdrawn(
    ready, surface_api, django_capture_on_commit_callbacks
) -> None:
    user = str(ready.public_id)
    consented = consent(surface_api, user, "cross_device")
    grant_category(ready, "mental_health")
    token = place(
        user,
        surface="nyx",
        scope_key=f"session:{user}:ritual-1",
        anchor={"kind": "exercise", "ref": "breathing/step-4"},
        posture="practicing",
        sensitiveCategories=["mental_health"],
        crossDeviceConsentId=consented.json()["id"],
    )
    written = surface_api.post("/api/v1/continuation-tokens", token, format="json")
    assert written.status_code == 201, written.content
    before = surface_api.get("/api/v1/continuation-tokens", {"userId": user}).json()
    assert len(before["results"]) == 1
    with django_capture_on_commit_callbacks(execute=True):
        consent(surface_api, user, "category:mental_health", status="revoked")
    listed = surface_api.get("/api/v1/continuation-tokens", {"userId": user}).json()["results"]
    assert listed == []
