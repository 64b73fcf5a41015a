"""Multi-actor suite (spec: '"forget all mentions of" removes every tagged entry and the
actor handle'): a member mentions several people across scopes and categories, another
member mentions the same names; a surface asks to forget one person, the member approves,
and every tagged entry and the handle are gone while nothing else changes."""

from __future__ import annotations

import random

import pytest

from consent.enums import ConsentType
from tests.evals.generators import STANDARD_TOPICS, canary
from tests.evals.support import MEMORIES, ask, recalled
from tests.factories import grant, grant_storage, payload
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

SEED = 2606
PEOPLE = ["Anna Petrova", "Jordan Lee", "Sam Okafor"]
SCOPES = [
    {},
    {"kind": "session", "sessionId": "s-1"},
    {"kind": "notebook", "notebookId": "nb-1"},
]


def mention(client, member, person: str | None, body: str, scope: dict, sensitive: bool):
    # A subject of its own per memory: these are separate facts, never one conflict.
    fields: dict = {"body": body, "category": "relationship", "subject": body[-8:]}
    if scope:
        fields["scope"] = {**scope, "userId": str(member.public_id)}
    if person is not None:
        fields["multiActor"] = {
            "actorName": person,
            "relationshipNote": "a friend",
            "sensitiveInteraction": sensitive,
        }
    answer = client.post(MEMORIES, payload(member, **fields), format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def test_forget_all_mentions_removes_every_tagged_entry_and_the_handle(
    ready, other_member, surface_api, member_api, metric
) -> None:
    rng = random.Random(SEED)
    grant_storage(other_member)
    grant(ready, ConsentType.MULTI_ACTOR_SENSITIVE)
    user = str(ready.public_id)
    by_person: dict[str | None, list[str]] = {p: [] for p in [*PEOPLE, None]}
    handles: dict[str, str] = {}
    for i in range(24):
        person = rng.choice([*PEOPLE, None])
        topic = STANDARD_TOPICS[i % len(STANDARD_TOPICS)]
        body = f"{topic.body.format(c=canary(rng))}, note {i}"
        entry = mention(
            surface_api, ready, person, body, rng.choice(SCOPES), sensitive=rng.random() < 0.3
        )
        by_person[person].append(entry["id"])
        if person is not None:
            handle = entry["multiActor"]["actorHandle"]
            assert person not in str(entry)  # the name never comes back, only its handle
            assert handles.setdefault(person, handle) == handle
    theirs = mention(surface_api, other_member, PEOPLE[0], "Anna lent me a book", {}, False)
    forgotten_person = PEOPLE[0]
    assert by_person[forgotten_person], "the seed gives the forgotten person no mention"

    # A surface asks; forgetting everything about someone waits for the member's approval.
    held = surface_api.post(
        "/api/v1/actors/forget", {"userId": user, "actorName": "anna petrova"}, format="json"
    )
    assert held.status_code == 202, held.content
    approval_id = held.json()["approvalId"]
    for entry_id in by_person[forgotten_person]:
        assert surface_api.get(f"{MEMORIES}/{entry_id}", {"userId": user}).status_code == 200
    decided = member_api.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": "approve"}, format="json"
    )
    assert decided.status_code == 200, decided.content

    gone = set(by_person[forgotten_person])
    for person, ids in by_person.items():
        for entry_id in ids:
            status = surface_api.get(f"{MEMORIES}/{entry_id}", {"userId": user}).status_code
            assert status == (404 if person == forgotten_person else 200), (person, entry_id)
    tombstoned = member_api.get(MEMORIES, {"lifecycle": "tombstoned", "limit": 100}).json()
    assert {e["id"] for e in tombstoned["results"]} == gone
    # The handle is gone: forgetting again by handle or name finds nothing.
    again = surface_api.post(
        "/api/v1/actors/forget",
        {"userId": user, "actorHandle": handles[forgotten_person]},
        format="json",
    )
    if again.status_code == 202:  # asked again, approved again
        again = member_api.post(
            f"/api/v1/approvals/{again.json()['approvalId']}/decide",
            {"decision": "approve"},
            format="json",
        )
        again_result = again.json()["resume"]
    else:
        again_result = again.json()
    assert again.status_code == 200, again.content
    assert "forgottenEntryIds" not in again_result or again_result["forgottenEntryIds"] == []
    # Recall never brings them back; the other member's mention of the same name stays.
    answer = ask(surface_api, ready, "tell me about my friend Anna")
    assert not gone & set(recalled(answer))
    other = surface_api.get(f"{MEMORIES}/{theirs['id']}", {"userId": str(other_member.public_id)})
    assert other.status_code == 200
    assert other.json()["multiActor"]["actorHandle"] == theirs["multiActor"]["actorHandle"]
    assert find_in_database("Petrova") == []  # names were never stored, only handles
    metric(
        "multi-actor-forget",
        people=len(PEOPLE),
        mentions=sum(len(v) for k, v in by_person.items() if k),
        tagged=len(gone),
        forgotten=len(gone),
        untouched_wrongly_forgotten=0,
        seed=SEED,
    )
