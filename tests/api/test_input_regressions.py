"""Issue 19, finding 3, finding 9 and the "also tidy" items, each as it was reproduced, from
outside: bad input is a 400 problem+json naming the field and the rule (and echoing none
of it), nothing is written or audited, no `Idempotency-Key` stays reserved; an allow
decision commits only with the change it allowed; a dead worker's reservation is
retryable; bodies are strict.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance.models import AuditEvent, IdempotencyRecord
from memory.models import MemoryEntry
from tests.api.helpers import (
    PROBLEM,
    World,
    consent,
    problem_fields,
    recall,
    send,
    snapshot,
    token,
    write,
)

pytestmark = pytest.mark.django_db

EDGE_LATE = "9999-12-31T23:59:59-10:00"
EDGE_EARLY = "0001-01-01T00:00:00+10:00"


def notebook(w: World, notebook_id: Any) -> dict[str, Any]:
    return {"kind": "notebook", "userId": w.user_id, "notebookId": notebook_id}


# (name, method, url, body, field the 400 must name)
CASES = [
    ("category-surrogate", "post", "/memories", lambda w: write(w, category="\ud800"), "category"),
    (
        "scope-kind-surrogate",
        "post",
        "/memories",
        lambda w: write(w, scope={"kind": "\ud800", "userId": w.user_id}),
        "scope.kind",
    ),
    (
        "extra-scope-key-surrogate",
        "post",
        "/memories",
        lambda w: write(w, scope={"kind": "profile", "userId": w.user_id, "\ud800": "x"}),
        "scope",
    ),
    (
        "scope-id-surrogate",
        "post",
        "/memories",
        lambda w: write(w, scope=notebook(w, "nb\ud800")),
        "scope.notebookId",
    ),
    (
        "notebook-id-nul",
        "post",
        "/memories",
        lambda w: write(w, scope=notebook(w, "nb\x00")),
        "scope.notebookId",
    ),
    (
        "session-id-nul",
        "post",
        "/memories",
        lambda w: write(w, sessionId="s\x001"),
        "sessionId",
    ),
    (
        "provenance-captured-at-late",
        "post",
        "/memories",
        lambda w: write(
            w, provenanceChain=[{"kind": "user-message", "ref": "m-1", "capturedAt": EDGE_LATE}]
        ),
        "provenanceChain[0].capturedAt",
    ),
    (
        "suppression-started-at-early",
        "post",
        "/memories",
        lambda w: write(
            w, suppression={"reason": "safety-hold", "startedAt": EDGE_EARLY, "notes": ""}
        ),
        "suppression.startedAt",
    ),
    ("consent-type-surrogate", "post", "/consents", lambda w: consent(w, type="\ud800"), "type"),
    (
        "recall-context-surrogate",
        "post",
        "/recall",
        lambda w: recall(w, context="\ud800"),
        "context",
    ),
    (
        "continuity-field-name-surrogate",
        "post",
        "/continuation-tokens",
        lambda w: {**token(w), "\ud800": 1},
        "body",
    ),
    (
        "continuation-client-timestamp-late",
        "post",
        "/continuation-tokens",
        lambda w: token(w, clientTimestamp=EDGE_LATE),
        "clientTimestamp",
    ),
    (
        "continuation-client-timestamp-early",
        "post",
        "/continuation-tokens",
        lambda w: token(w, clientTimestamp=EDGE_EARLY),
        "clientTimestamp",
    ),
]


def _url(w: World, path: str) -> str:
    return "/api/v1" + path.replace("{entry}", w.entry_id)


@pytest.mark.parametrize(
    ("name", "method", "path", "body", "field"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_400_naming_the_field_with_nothing_written(
    raw_surface, world, name, method, path, body, field
) -> None:
    before = snapshot()
    memories = MemoryEntry.objects.count()
    response = send(raw_surface, method, _url(world, path), body(world), key=f"k-{name}")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    assert field in problem_fields(response), response.json()
    assert "\\ud800" not in response.content.decode() and "\x00" not in response.json()["detail"]
    assert snapshot()[0] == before[0]  # no audit event
    assert snapshot()[1] == 0  # the key is not left reserved
    assert MemoryEntry.objects.count() == memories


@pytest.mark.parametrize("ends_at", [EDGE_LATE, EDGE_EARLY])
def test_pause_until_the_calendars_edge_is_400(raw_surface, world, ends_at) -> None:
    before = snapshot()
    response = send(
        raw_surface,
        "post",
        f"/api/v1/memories/{world.entry_id}/pause",
        {"userId": world.user_id, "endsAt": ends_at},
        key="pause-edge",
    )
    assert response.status_code == 400, response.content
    assert problem_fields(response) == {"endsAt"}
    assert snapshot() == (before[0], 0)


def test_a_crafted_list_cursor_at_the_calendars_edge_is_400(raw_surface, world) -> None:
    raw = f"{EDGE_LATE}|{uuid.uuid4()}".encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response = raw_surface.get("/api/v1/memories", {"userId": world.user_id, "cursor": cursor})
    assert response.status_code == 400, response.content
    assert problem_fields(response) == {"cursor"}


def test_nul_in_a_query_string_is_400(raw_surface, world) -> None:
    before = snapshot()
    response = raw_surface.delete(f"/api/v1/off-the-record?userId={world.user_id}&sessionId=s%00")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    assert problem_fields(response) == {"sessionId"}
    assert snapshot() == before


@pytest.mark.parametrize("depth", [40, 1000, 100_000])
def test_json_nested_deep_is_400(raw_surface, world, depth) -> None:
    deep = "[" * depth + "]" * depth
    raw = json.dumps(write(world)).replace('"I like jazz"', deep)
    before = snapshot()
    response = send(raw_surface, "post", "/api/v1/memories", raw=raw, key=f"deep-{depth}")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    assert "too-deep" in {e["rule"] for e in response.json()["errors"]}
    assert snapshot() == (before[0], 0)


def test_a_key_sent_twice_is_400(raw_surface, world) -> None:
    raw = json.dumps(write(world))[:-1] + ', "category": "preference"}'
    response = send(raw_surface, "post", "/api/v1/memories", raw=raw)
    assert response.status_code == 400
    assert response.json()["errors"][0]["rule"] == "duplicate-field"


def test_an_unknown_choice_is_not_echoed(raw_surface, world) -> None:
    response = send(raw_surface, "post", "/api/v1/recall", recall(world, context="<script>"))
    assert response.status_code == 400
    assert "<script>" not in response.content.decode()
    assert problem_fields(response) == {"context"}


# -------------------------------------------- a failure after governance rolls its allow back


def _allows() -> int:
    return AuditEvent.objects.filter(action="iris.governance.decision.allow").count()


def test_pause_that_fails_commits_no_allow_and_releases_the_key(
    raw_surface, world, monkeypatch
) -> None:
    from memory.services import lifecycle

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(lifecycle, "_insert_revision", broken)
    allows = _allows()
    url = f"/api/v1/memories/{world.entry_id}/pause"
    response = send(raw_surface, "post", url, {"userId": world.user_id}, key="pause-1")
    assert response.status_code == 500
    assert response["Content-Type"] == PROBLEM
    assert _allows() == allows
    assert not IdempotencyRecord.objects.filter(key="pause-1").exists()

    monkeypatch.undo()
    retry = send(raw_surface, "post", url, {"userId": world.user_id}, key="pause-1")
    assert retry.status_code == 200, retry.content
    assert retry.json()["lifecycle"] == "paused"
    assert _allows() == allows + 1


def test_continuation_write_that_fails_commits_no_allow_and_releases_the_key(
    raw_surface, world, monkeypatch
) -> None:
    from memory.continuity import services

    def broken(*args: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(services, "_fields", broken)
    allows = _allows()
    response = send(raw_surface, "post", "/api/v1/continuation-tokens", token(world), key="ct-1")
    assert response.status_code == 500
    assert _allows() == allows
    assert not IdempotencyRecord.objects.filter(key="ct-1").exists()


# ----------------------------------------------------------- finding 9: a worker that died


def _die_after_reserving(key: str, *, age: timedelta) -> None:
    """What a worker killed between reserving a key and storing its answer leaves."""
    IdempotencyRecord.objects.filter(key=key).update(
        status_code=None, response_body=None, created_at=timezone.now() - age
    )


def test_a_dead_workers_reservation_is_retryable_after_the_lease(raw_surface, world) -> None:
    url = f"/api/v1/memories/{world.entry_id}/pause"
    body = {"userId": world.user_id}
    assert send(raw_surface, "post", url, body, key="dead-1").status_code == 200
    _die_after_reserving("dead-1", age=timedelta(minutes=10))
    retry = send(raw_surface, "post", url, body, key="dead-1")
    assert retry.status_code == 200, retry.content
    assert retry.json()["lifecycle"] == "paused"  # the pause had committed: nothing new
    record = IdempotencyRecord.objects.get(key="dead-1")
    assert record.status_code == 200
    replay = send(raw_surface, "post", url, body, key="dead-1")
    assert replay["Idempotent-Replayed"] == "true"


def test_a_live_reservation_is_still_409(raw_surface, world) -> None:
    url = f"/api/v1/memories/{world.entry_id}/pause"
    body = {"userId": world.user_id}
    assert send(raw_surface, "post", url, body, key="live-1").status_code == 200
    _die_after_reserving("live-1", age=timedelta(seconds=1))
    again = send(raw_surface, "post", url, body, key="live-1")
    assert again.status_code == 409
    assert again.json()["code"] == "idempotency-in-progress"


def test_a_stale_reservation_with_another_body_is_still_422(raw_surface, world) -> None:
    url = f"/api/v1/memories/{world.entry_id}/pause"
    assert send(raw_surface, "post", url, {"userId": world.user_id}, key="k9").status_code == 200
    _die_after_reserving("k9", age=timedelta(minutes=10))
    other = send(raw_surface, "post", url, {"userId": world.user_id, "notes": "x"}, key="k9")
    assert other.status_code == 422


# ------------------------------------------------------------ strict bodies, strict booleans


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/memories", lambda w: write(w, colour="blue")),
        ("/memories", lambda w: write(w, multiActor={"actorName": "Anna", "mood": "x"})),
        (
            "/memories",
            lambda w: write(
                w,
                provenanceChain=[
                    {
                        "kind": "user-message",
                        "ref": "m",
                        "capturedAt": "2025-01-01T00:00:00Z",
                        "extra": 1,
                    }
                ],
            ),
        ),
        ("/recall", lambda w: recall(w, crisisFrme=True)),
        ("/consents", lambda w: consent(w, note="x")),
        ("/memories/{entry}/pause", lambda w: {"userId": w.user_id, "until": "later"}),
    ],
    ids=["write", "write-nested", "write-list-item", "recall", "consent", "pause"],
)
def test_an_unknown_field_is_400_naming_it(raw_surface, world, path, body) -> None:
    before = snapshot()
    response = send(raw_surface, "post", _url(world, path), body(world))
    assert response.status_code == 400, response.content
    assert {e["rule"] for e in response.json()["errors"]} == {"unknown-field"}
    fields = problem_fields(response)
    assert fields & {
        "colour",
        "multiActor.mood",
        "provenanceChain[0].extra",
        "crisisFrme",
        "note",
        "until",
    }, fields
    assert snapshot() == before


def test_an_unknown_field_that_is_not_a_name_is_not_echoed(raw_surface, world) -> None:
    response = send(raw_surface, "post", "/api/v1/memories", write(world, **{"a b<c>": 1}))
    assert response.status_code == 400
    assert "a b<c>" not in response.content.decode()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/recall", lambda w: recall(w, crisisFrame="yes"), "crisisFrame"),
        ("/recall", lambda w: recall(w, safetyCriticalContext=1), "safetyCriticalContext"),
        ("/recall", lambda w: recall(w, limit="5"), "limit"),
        ("/recall", lambda w: recall(w, limit=True), "limit"),
        (
            "/memories/{entry}/resume",
            lambda w: {"userId": w.user_id, "canPause": "yes"},
            "canPause",
        ),
        ("/memories", lambda w: write(w, body=42), "body"),
        ("/memories", lambda w: write(w, userId=5), "userId"),
        (
            "/memories",
            lambda w: write(w, multiActor={"actorName": "Anna", "sensitiveInteraction": "true"}),
            "multiActor.sensitiveInteraction",
        ),
    ],
    ids=[
        "crisis-yes",
        "safety-1",
        "limit-text",
        "limit-bool",
        "can-pause",
        "body-int",
        "user-int",
        "nested-bool",
    ],
)
def test_values_must_have_their_json_type(raw_surface, world, path, body, field) -> None:
    before = snapshot()
    response = send(raw_surface, "post", _url(world, path), body(world))
    assert response.status_code == 400, response.content
    assert field in problem_fields(response)
    assert snapshot() == before


def test_crisis_frame_true_still_works(raw_surface, world) -> None:
    response = send(raw_surface, "post", "/api/v1/recall", recall(world, crisisFrame=True))
    assert response.status_code == 200, response.content
