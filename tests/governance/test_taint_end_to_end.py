"""Taint and approvals end to end, through the real surface API and the member's API."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from governance.kernel_models import Approval
from memory.models import MemoryEntry
from tests.factories import grant_storage, payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def entry(member, surface_api):
    grant_storage(member)
    response = surface_api.post(
        "/api/v1/memories", payload(member, body="I drink oat milk"), format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def _correct(client: APIClient, entry: dict, run_id: str | None, **extra):
    body = {"userId": entry["userId"], "body": "I drink soy milk", **extra}
    if run_id:
        body["runId"] = run_id
    return client.patch(f"/api/v1/memories/{entry['id']}", body, format="json")


def _step(client: APIClient, run_id: str, external: bool):
    response = client.post(
        f"/api/v1/runs/{run_id}/steps",
        {"tool": "fetch_web_content", "readExternalContent": external},
        format="json",
    )
    assert response.status_code in (200, 201), response.content


def test_a_clean_run_corrects_without_asking(surface_api, entry) -> None:
    run_id = str(uuid.uuid4())
    _step(surface_api, run_id, external=False)
    response = _correct(surface_api, entry, run_id)
    assert response.status_code == 200, response.content
    assert Approval.objects.count() == 0


def test_a_tainted_run_holds_the_correction_until_the_member_approves(
    surface_api, member, entry
) -> None:
    run_id = str(uuid.uuid4())
    _step(surface_api, run_id, external=True)
    held = _correct(surface_api, entry, run_id)
    assert held.status_code == 202, held.content
    approval_id = held.json()["approvalId"]
    assert "outside" in held.json()["card"]
    current = MemoryEntry.objects.get(entry_id=entry["id"], is_current=True)
    assert current.body == "I drink oat milk"  # nothing changed while held

    # A surface cannot answer for the member.
    refused = surface_api.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": "approve"}, format="json"
    )
    assert refused.status_code in (403, 404)

    owner = APIClient()
    owner.force_login(member)
    decided = owner.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": "approve"}, format="json"
    )
    assert decided.status_code == 200, decided.content
    # A correction's new text is never stored in an approval, so the surface repeats the
    # call claiming the approval; the kernel governs it again and lets exactly it through.
    resumed = _correct(surface_api, entry, run_id, approvalId=approval_id)
    assert resumed.status_code == 200, resumed.content
    current = MemoryEntry.objects.get(entry_id=entry["id"], is_current=True)
    assert current.body == "I drink soy milk"
    assert current.revision == 2
    # The approval is spent: claiming it for another change does not pass.
    reused = _correct(surface_api, entry, run_id, body="I drink pea milk", approvalId=approval_id)
    assert reused.status_code in (202, 403), reused.content
    assert MemoryEntry.objects.get(entry_id=entry["id"], is_current=True).revision == 2

    # One approval is not consent to the next write in the same tainted run.
    again = _correct(surface_api, {**entry}, run_id, body="I drink rice milk")
    assert again.status_code == 202
    twice = owner.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": "approve"}, format="json"
    )
    assert twice.status_code == 409


def test_a_lane_that_cannot_pause_is_refused(surface_api, entry) -> None:
    run_id = str(uuid.uuid4())
    _step(surface_api, run_id, external=True)
    response = _correct(surface_api, entry, run_id, canPause=False)
    assert response.status_code == 403, response.content
    assert Approval.objects.count() == 0


def test_one_surface_cannot_taint_another_surfaces_run(surface_api, tenant, entry) -> None:
    from governance.kernel_models import Run
    from governance.services import surface_client_create
    from tests.conftest import SYSTEM

    tara = APIClient()
    token = surface_client_create(actor=SYSTEM, tenant=tenant, surface="tara").token
    tara.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    run_id = str(uuid.uuid4())
    _step(surface_api, run_id, external=False)
    _step(tara, run_id, external=True)  # the same run id, from another surface

    response = _correct(surface_api, entry, run_id)
    assert response.status_code == 200, response.content
    assert Approval.objects.count() == 0
    runs = Run.objects.filter(run_id=run_id)
    assert sorted(runs.values_list("surface", "step_count")) == [("assistant", 1), ("tara", 1)]
