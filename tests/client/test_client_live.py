"""The Python client (clients/python) against a live Iris server: every call below is a
real HTTP request to a real server, answered by the real views on this run's database."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from iris_client import (
    CategoryEnum,
    ConflictAnswerIn,
    ConsentRecordInput,
    ConsentRequired,
    ConsentTypeEnum,
    HeldForApproval,
    IrisClient,
    MemoryConflict,
    MemoryEntryOut,
    MemoryWriteIn,
    NotAuthenticated,
    NotFound,
    RateLimited,
    RecallIn,
    ValidationProblem,
)

from governance.auth import PrincipalRateThrottle


def consent(iris: IrisClient, user_id: str, *types: ConsentTypeEnum) -> None:
    for kind in types:
        iris.v1_consents_create(
            ConsentRecordInput(
                user_id=user_id,
                type=kind,
                status="granted",
                legal_basis="consent",
                capture_method="inline-prompt",
            )
        )


def memory(user_id: str, body: str, category: CategoryEnum = "preference") -> MemoryWriteIn:
    return MemoryWriteIn(
        user_id=user_id,
        scope={"kind": "profile", "userId": user_id},
        category=category,
        body=body,
        origin="user-stated",
    )


@pytest.fixture
def ready(iris, user_id) -> str:
    """The member, having consented (through the client) to processing and storage."""
    consent(iris, user_id, "data_processing", "data_storage")
    return user_id


def test_a_consent_is_recorded_and_read_back(iris, user_id):
    consent(iris, user_id, "data_processing", "data_storage")

    active = iris.v1_consents_active_retrieve(user_id=user_id)

    assert {c.type for c in active.consents} >= {"data_processing", "data_storage"}


def test_a_written_memory_is_recalled(iris, ready):
    written = iris.memories_write(memory(ready, "My favourite colour is teal"))
    assert isinstance(written, MemoryEntryOut)

    recalled = iris.recall(
        RecallIn(
            user_id=ready,
            scope={"kind": "profile", "userId": ready},
            query="favourite colour",
            surface="assistant",
            context="general",
        )
    )

    assert [r.entry.id for r in recalled.entries] == [written.id]
    assert recalled.entries[0].entry.body == "My favourite colour is teal"
    assert recalled.audit_envelope is not None


def test_a_contradiction_raises_memory_conflict_with_its_question(iris, ready):
    first = iris.memories_write(memory(ready, "My home city is Berlin"))
    assert isinstance(first, MemoryEntryOut)

    with pytest.raises(MemoryConflict) as raised:
        iris.memories_write(memory(ready, "My home city is Paris"))

    conflict = raised.value
    assert (conflict.status, conflict.code) == (409, "memory-conflict")
    assert conflict.question
    assert conflict.entry_id == first.id
    assert conflict.conflict_id
    answered = iris.memories_conflict_answer(
        conflict.conflict_id, ConflictAnswerIn(user_id=ready, answer="update")
    )
    assert answered.entry.body == "My home city is Paris"


def test_a_sensitive_memory_without_consent_raises_consent_required(iris, ready):
    with pytest.raises(ConsentRequired) as raised:
        iris.memories_write(memory(ready, "I take insulin daily", category="medical"))

    assert raised.value.status == 403
    assert raised.value.code == "sensitive-category-without-consent"
    assert iris.memories_list(user_id=ready).results == []


def test_a_bad_field_raises_validation_problem_with_field_and_rule(iris, ready):
    bad = dataclasses.replace(memory(ready, "I like jazz"), category="not-a-category")
    with pytest.raises(ValidationProblem) as raised:
        iris.memories_write(bad)

    problem = raised.value
    assert (problem.status, problem.code) == (400, "validation-failed")
    assert (problem.field, problem.rule) == ("category", "invalid_choice")
    assert iris.memories_list(user_id=ready).results == []


def test_an_unknown_memory_raises_not_found(iris, ready):
    with pytest.raises(NotFound) as raised:
        iris.memories_get(str(uuid.uuid4()), user_id=ready)

    assert raised.value.status == 404


def test_a_wrong_token_raises_not_authenticated(live_server, user_id):
    with IrisClient(live_server.url, "iris_not-a-real-token") as iris:
        with pytest.raises(NotAuthenticated) as raised:
            iris.memories_list(user_id=user_id)

    assert raised.value.status == 401


def test_every_mutating_call_sends_a_fresh_idempotency_key(iris, ready, recorder):
    recorder.sent_keys.clear()

    iris.memories_write(memory(ready, "I like jazz"))
    iris.memories_write(memory(ready, "I like tea"))
    iris.memories_list(user_id=ready)

    first, second, listing = recorder.sent_keys
    assert first and second and first != second
    assert listing is None


def test_a_replayed_key_returns_the_first_answer_and_writes_once(iris, ready, recorder):
    key = str(uuid.uuid4())

    first = iris.memories_write(memory(ready, "I like jazz"), idempotency_key=key)
    again = iris.memories_write(memory(ready, "I like jazz"), idempotency_key=key)

    assert isinstance(first, MemoryEntryOut) and isinstance(again, MemoryEntryOut)
    assert again.id == first.id
    assert recorder.responses[-1].headers.get("Idempotent-Replayed") == "true"
    assert [e.id for e in iris.memories_list(user_id=ready).results] == [first.id]


@pytest.fixture
def two_a_second(monkeypatch):
    """The per-principal API limit at two requests a second (IRIS_API_RATE in production),
    on the live server's throttle, which runs in this process."""
    monkeypatch.setattr(PrincipalRateThrottle, "rate", "2/s", raising=False)


def test_429_is_retried_after_the_wait_the_server_names(iris, ready, recorder, two_a_second):
    recorder.sent_keys.clear()
    written = [iris.memories_write(memory(ready, f"I like tune number {n}")) for n in range(6)]

    assert all(isinstance(w, MemoryEntryOut) for w in written)
    refused = [r for r in recorder.responses if r.status_code == 429]
    assert refused, "six writes at two a second were never refused"
    # Each wait is the Retry-After of the refusal before it, and every retry reused the key.
    assert recorder.waits == [float(r.headers["Retry-After"]) for r in refused]
    assert len({k for k in recorder.sent_keys if k}) == len(written)
    assert len(iris.memories_list(user_id=ready).results) == len(written)


def test_429_after_the_last_retry_raises_rate_limited(iris, ready, recorder, two_a_second):
    iris.max_retries = 0
    with pytest.raises(RateLimited) as raised:
        for n in range(6):
            iris.memories_write(memory(ready, f"I like tune number {n}"))

    assert raised.value.status == 429
    assert raised.value.retry_after is not None and raised.value.retry_after >= 1
    assert recorder.waits == []


def test_health_answers_without_a_token(live_server):
    with IrisClient(live_server.url) as iris:
        health = iris.v1_health_retrieve()

    assert health.status
    assert isinstance(health.checks, dict)


def test_held_for_approval_is_a_result_not_an_error():
    # The generated write method returns it for a 202 (the member must approve first).
    held = HeldForApproval(detail="Waiting", approval_id="a-1")
    assert held.approval_id == "a-1"
