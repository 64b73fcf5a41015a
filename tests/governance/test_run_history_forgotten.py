"""A run's loop history keeps keyed fingerprints of what it wrote, and forgetting the
memory (or deleting it for good) takes them out (issue 19, finding 8)."""

from __future__ import annotations

import hashlib
import uuid

import pytest
from rest_framework.test import APIClient

from governance.kernel_models import Run
from governance.keys import text_fingerprint
from governance.principal import Principal
from memory.services import memory_hard_delete
from tests.factories import payload

pytestmark = pytest.mark.django_db
BODY = "I am pregnant"


def _write(surface_api: APIClient, member, run_id: str, body: str = BODY) -> str:
    response = surface_api.post(
        "/api/v1/memories", {**payload(member, body=body), "runId": run_id}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _history(run_id: str) -> str:
    return str(Run.objects.get(run_id=run_id).recent_writes)


def test_a_run_keeps_no_unkeyed_hash_of_the_text(surface_api, ready) -> None:
    run_id = str(uuid.uuid4())
    _write(surface_api, ready, run_id)
    history = _history(run_id)
    assert hashlib.sha256(BODY.encode()).hexdigest() not in history
    assert BODY not in history
    assert text_fingerprint(BODY) in history  # keyed: the memory's own body fingerprint


def test_forgetting_removes_the_text_from_the_run(surface_api, ready) -> None:
    run_id, other_run = str(uuid.uuid4()), str(uuid.uuid4())
    entry_id = _write(surface_api, ready, run_id)
    _write(surface_api, ready, other_run, body="I like green tea")
    assert text_fingerprint(BODY) in _history(run_id)
    forgotten = surface_api.post(
        f"/api/v1/memories/{entry_id}/forget", {"userId": str(ready.public_id)}, format="json"
    )
    assert forgotten.status_code == 200, forgotten.content
    assert text_fingerprint(BODY) not in _history(run_id)
    assert hashlib.sha256(BODY.encode()).hexdigest() not in _history(run_id)
    # Another memory's record stays, and the run's counters are untouched.
    assert text_fingerprint("I like green tea") in _history(other_run)
    assert Run.objects.get(run_id=run_id).write_count == 1


def test_a_hard_delete_removes_the_text_from_the_run(surface_api, ready) -> None:
    run_id = str(uuid.uuid4())
    entry_id = _write(surface_api, ready, run_id)
    assert text_fingerprint(BODY) in _history(run_id)
    memory_hard_delete(
        principal=Principal.system("tests", ready.tenant_id),
        member=ready,
        entry_ids=[entry_id],
        reason_code="soft-delete-grace-expired",
    )
    assert text_fingerprint(BODY) not in _history(run_id)
