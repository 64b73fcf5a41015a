"""The spec's contract round-trip fixture, through the API and back.

"The contract round-trip fixture covers every origin, every lifecycle, every sensitive
category, and the suppression marker." Each fixture entry is written with `POST memories`,
read back with `GET memories/{id}` (and the history for superseded revisions), compared
field by field with what was sent, and then sent back as a write: the contract Iris emits
is valid input, and writing it again changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from consent.enums import SENSITIVE_CATEGORIES, ConsentType, category_consent_type
from memory.enums import Lifecycle, Origin
from memory.models import MemoryEntry
from tests.factories import grant, grant_storage

pytestmark = pytest.mark.django_db

STARTED = datetime(2025, 5, 1, 8, 30, tzinfo=UTC)
CAPTURED = "2025-05-01T08:00:00.000000Z"
SENT_FIELDS = ("scope", "category", "body", "subject", "origin", "provenanceChain")


def _rfc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fixture_entries(user: str) -> list[dict[str, Any]]:
    profile = {"kind": "profile", "userId": user}
    entries: list[dict[str, Any]] = []
    for origin in Origin:
        entries.append(
            {
                "scope": profile,
                "category": "fact",
                "body": f"Origin fixture for {origin.value} holds",
                "subject": f"origin {origin.value}",
                "origin": origin.value,
                "provenanceChain": [
                    {"kind": "session-turn", "ref": f"turn-{origin.value}", "capturedAt": CAPTURED}
                ],
            }
        )
    for category in sorted(SENSITIVE_CATEGORIES):
        entries.append(
            {
                "scope": profile,
                "category": category.value,
                "body": f"Sensitive fixture for {category.value}",
                "subject": f"sensitive {category.value}",
                "origin": "user-stated",
                "provenanceChain": [],
            }
        )
    # The suppression marker, set by the surface at write time (a crisis frame).
    entries.append(
        {
            "scope": {"kind": "session", "userId": user, "sessionId": "sess-1"},
            "category": "safety",
            "body": "Felt unsafe walking home",
            "subject": "walk home",
            "origin": "user-stated",
            "provenanceChain": [{"kind": "scene-event", "ref": "scene-9", "capturedAt": CAPTURED}],
            "suppression": {
                "reason": "crisis-frame",
                "startedAt": _rfc(STARTED),
                "endsAt": _rfc(STARTED + timedelta(hours=6)),
                "notes": "crisis frame open",
            },
        }
    )
    # A mention with a sensitive interaction.
    entries.append(
        {
            "scope": profile,
            "category": "relationship",
            "body": "We had a hard talk about money",
            "subject": "hard talk",
            "origin": "user-stated",
            "provenanceChain": [],
            "multiActor": {
                "actorName": "Robin Ashgrove",
                "relationshipNote": "my partner",
                "sensitiveInteraction": True,
            },
        }
    )
    return entries


@pytest.fixture
def consenting(member):
    grant_storage(member)
    grant(member, ConsentType.MULTI_ACTOR_SENSITIVE)
    grant(member, *(category_consent_type(c) for c in sorted(SENSITIVE_CATEGORIES)))
    return member


def test_every_origin_lifecycle_sensitive_category_and_suppression_round_trips(
    surface_api, member_api, consenting
) -> None:
    user = str(consenting.public_id)
    written: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for sent in fixture_entries(user):
        response = surface_api.post("/api/v1/memories", {**sent, "userId": user}, format="json")
        assert response.status_code == 201, response.content
        read = surface_api.get(f"/api/v1/memories/{response.json()['id']}", {"userId": user})
        assert read.status_code == 200
        entry = read.json()
        assert entry == response.json()
        written.append((sent, entry))

    handles: set[str] = set()
    for sent, entry in written:
        for field in SENT_FIELDS:
            assert entry[field] == sent[field], (field, entry[field], sent[field])
        assert entry["scopeKey"] == ":".join(
            [sent["scope"]["kind"], *[v for k, v in sent["scope"].items() if k != "kind"]]
        )
        assert entry["userId"] == user and entry["tenantId"] == str(consenting.tenant_id)
        assert entry["suppression"] == sent.get("suppression")
        if "multiActor" in sent:
            actor = entry["multiActor"]
            assert actor["actorHandle"].startswith("actor_")
            assert actor["relationshipNote"] == sent["multiActor"]["relationshipNote"]
            assert actor["sensitiveInteraction"] is True
            handles.add(actor["actorHandle"])
        else:
            assert entry["multiActor"] is None
        if entry["category"] in {c.value for c in SENSITIVE_CATEGORIES}:
            [consent] = entry["consents"]
            assert consent["category"] == entry["category"]
            assert consent["revokedAt"] is None and consent["source"] == "settings-toggle"
            assert consent["grantedAt"].endswith("Z")
        else:
            assert entry["consents"] == []
        expected = "draft" if sent["origin"] == Origin.MODEL_INFERRED else "active"
        assert entry["lifecycle"] == expected
        assert (entry["revision"], entry["supersedes"], entry["referenceCount"]) == (1, None, 0)
        for stamp in ("createdAt", "updatedAt"):
            assert entry[stamp].endswith("Z")
            datetime.fromisoformat(entry[stamp])

    origins = {entry["origin"] for _, entry in written}
    assert origins == {o.value for o in Origin}
    sensitive = {entry["category"] for _, entry in written} & {
        c.value for c in SENSITIVE_CATEGORIES
    }
    assert sensitive == {c.value for c in SENSITIVE_CATEGORIES}

    # And back: the contract Iris emits is valid input; writing it again changes nothing.
    # Bodies are strict (issue 19), so the server-set fields (id, revision, stamps…) go.
    from memory.serializers import MemoryWriteIn

    writable = set(MemoryWriteIn().fields)
    rows = MemoryEntry.objects.count()
    for _, entry in written:
        body = {k: v for k, v in entry.items() if k in writable}
        response = surface_api.post("/api/v1/memories", dict(body, userId=user), format="json")
        assert response.status_code == 200, response.content
        assert response.json()["written"] is False
        assert response.json()["entry"] == entry
    assert MemoryEntry.objects.count() == rows
    assert len(handles) == 1

    # Every lifecycle, through the member operations.
    stated = next(e for s, e in written if s["origin"] == "user-stated")
    entry_id = stated["id"]
    paused = member_api.post(f"/api/v1/memories/{entry_id}/pause", {}, format="json").json()
    assert paused["lifecycle"] == "paused"
    assert paused["suppression"]["reason"] == "user-pause"
    assert paused["suppression"]["endsAt"] is None
    corrected = member_api.patch(
        f"/api/v1/memories/{entry_id}", {"body": "Origin fixture corrected"}, format="json"
    ).json()
    assert (corrected["revision"], corrected["lifecycle"]) == (3, "paused")
    history = member_api.get(f"/api/v1/memories/{entry_id}/history").json()["revisions"]
    assert [r["lifecycle"] for r in history] == ["superseded", "superseded", "paused"]
    assert history[1]["supersedes"] == history[0]["revisionId"]
    forgotten = member_api.post(f"/api/v1/memories/{entry_id}/forget", {}, format="json").json()
    assert forgotten == {"id": entry_id, "revision": 4, "lifecycle": "tombstoned"}
    assert member_api.get(f"/api/v1/memories/{entry_id}").json()["lifecycle"] == "tombstoned"

    seen = {
        r["lifecycle"]
        for r in member_api.get(f"/api/v1/memories/{entry_id}/history").json()["revisions"]
    }
    seen |= {entry["lifecycle"] for _, entry in written} | {paused["lifecycle"]}
    assert seen == {lc.value for lc in Lifecycle}

    # The hand-written wire mapping is the schema serializer's output, for every revision
    # this fixture stored (every origin, lifecycle, sensitive category, suppression, actor).
    from memory.serializers import MemoryEntryOut, entry_contract

    revisions = list(MemoryEntry.objects.filter(member=consenting).order_by("created_at"))
    assert len(revisions) > len(written)
    for revision in revisions:
        by_hand = entry_contract(revision, member=consenting)
        assert by_hand == dict(MemoryEntryOut(revision, context={"member": consenting}).data)
        assert list(by_hand) == list(MemoryEntryOut().fields)
        assert entry_contract(revision) == by_hand
