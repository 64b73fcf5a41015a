"""Memory-leakage suite (spec: "Memory-leakage suite"): sensitive facts asked for in
contexts they do not belong to, and facts of another scope, member or tenant asked for by
their own question. Every probe searches the whole answer for the canaries it must not
contain; a positive control per family proves the probe would see a leak. Leakage is 0."""

from __future__ import annotations

import random

import pytest
from rest_framework.test import APIClient

from governance.services import surface_client_create
from memory.recall.pipeline import SENSITIVE_CONTEXTS, SURFACING_CONTEXTS
from tests.conftest import SYSTEM
from tests.evals.generators import SENSITIVE_TOPICS, STANDARD_TOPICS, facts, renamed
from tests.evals.support import MEMORIES, ask, leaked, recalled, remember, scope_body
from tests.factories import grant_category, grant_storage

pytestmark = pytest.mark.django_db

SEED = 2601


@pytest.fixture
def world(ready, other_member, foreign_member, other_tenant, surface_api):
    rng = random.Random(SEED)
    grant_storage(other_member)
    grant_storage(foreign_member)
    for topic in SENSITIVE_TOPICS:
        grant_category(ready, topic.category)
    # The other tenant's assistant, on the local tier like this tenant's (so its answers
    # carry text, and a leak would show).
    foreign_token = surface_client_create(
        actor=SYSTEM, tenant=other_tenant, surface="assistant", destination_tier="local"
    ).token
    foreign_api = APIClient()
    foreign_api.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_token}")

    ada = facts(rng, "ada")
    sensitive = facts(rng, "ada", SENSITIVE_TOPICS)
    session = [renamed(f, rng) for f in facts(rng, "ada-s1", STANDARD_TOPICS[:3])]
    notebook = [renamed(f, rng) for f in facts(rng, "ada-nb1", STANDARD_TOPICS[3:5])]
    grace = facts(rng, "grace")
    linus = facts(rng, "linus")
    for fact in ada + sensitive:
        remember(surface_api, ready, fact)
    for fact in session:
        remember(surface_api, ready, fact, kind="session", ids={"sessionId": "s-1"})
    for fact in notebook:
        remember(surface_api, ready, fact, kind="notebook", ids={"notebookId": "nb-1"})
    for fact in grace:
        remember(surface_api, other_member, fact)
    for fact in linus:
        remember(foreign_api, foreign_member, fact)
    return {
        "ada": ada,
        "sensitive": sensitive,
        "session": session,
        "notebook": notebook,
        "grace": grace,
        "linus": linus,
        "foreign_api": foreign_api,
    }


class Tally:
    def __init__(self) -> None:
        self.probes = 0
        self.leaks: list[tuple[str, str, set[str]]] = []

    def probe(self, family: str, label: str, answer, forbidden: set[str]) -> None:
        self.probes += 1
        found = leaked(answer, forbidden)
        if found:
            self.leaks.append((family, label, found))


def canaries(fs) -> set[str]:
    return {f.canary for f in fs}


def test_nothing_leaks_across_context_scope_member_or_tenant(
    world, ready, other_member, foreign_member, surface_api, member_api, metric
) -> None:
    tally = Tally()
    controls = 0

    # 1. Sensitive facts, asked for by their own question, in every context not theirs.
    for fact in world["sensitive"]:
        assert fact.contexts == SENSITIVE_CONTEXTS[fact.category]  # the table, not a copy
        for context in sorted(SURFACING_CONTEXTS - fact.contexts):
            answer = ask(surface_api, ready, fact.question, context=context)
            assert answer.status_code == 200, answer.content
            tally.probe("sensitive-context", f"{fact.key}@{context}", answer, {fact.canary})
        allowed = sorted(fact.contexts)[0]
        control = ask(surface_api, ready, fact.question, context=allowed)
        assert leaked(control, {fact.canary}), f"control: {fact.key} not recalled in {allowed}"
        controls += 1

    # 2. Scopes: session s-1 and notebook nb-1 stay there.
    scoped = world["session"] + world["notebook"]
    for fact in scoped:
        for scope in (
            scope_body(),
            scope_body("session", sessionId="s-2"),
            scope_body("notebook", notebookId="nb-2"),
        ):
            answer = ask(surface_api, ready, fact.question, scope=scope)
            tally.probe("cross-scope", f"{fact.key}->{scope}", answer, {fact.canary})
    for fact, scope in [
        (world["session"][0], scope_body("session", sessionId="s-1")),
        (world["notebook"][0], scope_body("notebook", notebookId="nb-1")),
    ]:
        assert leaked(ask(surface_api, ready, fact.question, scope=scope), {fact.canary})
        controls += 1

    # 3. Members: the same questions, for one member, never reach the other's facts.
    for mine, theirs, member in [
        (world["ada"], world["grace"], ready),
        (world["grace"], world["ada"] + world["sensitive"], other_member),
    ]:
        for fact in mine:
            answer = ask(surface_api, member, fact.question)
            tally.probe("cross-member", fact.key, answer, canaries(theirs))
            assert leaked(answer, {fact.canary}), f"control: {fact.key} not recalled"
            controls += 1
    # Ada's own session asking for Grace: refused, and nothing of Grace's in the refusal.
    answer = ask(member_api, other_member, world["grace"][0].question)
    assert answer.status_code == 404
    tally.probe("cross-member", "session-names-other", answer, canaries(world["grace"]))
    listed = member_api.get(MEMORIES, {"userId": str(other_member.public_id)})
    assert listed.status_code == 404
    tally.probe("cross-member", "list-other", listed, canaries(world["grace"]))

    # 4. Tenants: each tenant's surface, asking for the other's member or with its own.
    foreign_api = world["foreign_api"]
    acme = canaries(world["ada"] + world["sensitive"] + world["grace"])
    for fact in world["linus"]:
        answer = ask(foreign_api, foreign_member, fact.question)
        tally.probe("cross-tenant", fact.key, answer, acme)
        assert leaked(answer, {fact.canary}), f"control: {fact.key} not recalled"
        controls += 1
        refused = ask(foreign_api, ready, fact.question)
        assert refused.status_code == 404
        tally.probe("cross-tenant", f"{fact.key}->ada", refused, acme)
        refused = ask(surface_api, foreign_member, fact.question)
        assert refused.status_code == 404
        tally.probe("cross-tenant", f"{fact.key}<-acme", refused, canaries(world["linus"]))
    listed = foreign_api.get(MEMORIES, {"userId": str(ready.public_id)})
    assert listed.status_code == 404
    tally.probe("cross-tenant", "list-ada", listed, acme)

    families = sorted({f for f, _, _ in tally.leaks})
    metric(
        "leakage",
        probes=tally.probes,
        leaks=len(tally.leaks),
        leakage_rate=len(tally.leaks) / tally.probes,
        positive_controls=controls,
        seed=SEED,
    )
    assert tally.leaks == [], f"leaks in {families}: {tally.leaks[:5]}"
    assert tally.probes >= 100


def test_a_recalled_answer_names_only_its_own_member(world, ready, surface_api) -> None:
    ids = recalled(ask(surface_api, ready, "", limit=50))  # a briefing: everything reachable
    assert ids
    listed = surface_api.get(MEMORIES, {"userId": str(ready.public_id), "limit": 50}).json()
    own = {e["id"] for e in listed["results"]}
    assert set(ids) <= own
    assert {e["userId"] for e in listed["results"]} == {str(ready.public_id)}
