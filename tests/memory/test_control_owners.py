"""A member's privacy controls belong to the member: only the member lifts what the member
set; a surface lifts only what it set itself (issue 19, finding 1; memory/controls.py)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import AuditEvent
from governance.services import surface_client_create
from memory.models import MemoryEntry, OffTheRecord
from memory.services import memory_write
from tests.conftest import SYSTEM
from tests.factories import as_member, draft, payload

pytestmark = pytest.mark.django_db
PROBLEM = "application/problem+json"
OTR = "/api/v1/off-the-record"


def _surface(tenant, name: str) -> APIClient:
    client = APIClient()
    token = surface_client_create(actor=SYSTEM, tenant=tenant, surface=name).token
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def tara(tenant) -> APIClient:
    return _surface(tenant, "tara")


@pytest.fixture
def assistant(tenant) -> APIClient:
    return _surface(tenant, "assistant")


@pytest.fixture
def browser(ready) -> Client:
    client = Client()
    client.force_login(ready)
    return client


@pytest.fixture
def entry(ready):
    return memory_write(
        principal=as_member(ready), member=ready, draft=draft(ready, "I live in Lyon")
    ).entry


def _current(entry) -> MemoryEntry:
    return MemoryEntry.objects.get(entry_id=entry.entry_id, is_current=True)


def _refused(response, code: str) -> None:
    assert response.status_code == 403, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    assert response.json()["code"] == code
    deny = AuditEvent.objects.filter(action="iris.governance.decision.deny").last()
    assert deny is not None and deny.reason_code == code
    assert {"check": "control-owner", "verdict": "deny", "reason": code} in deny.payload[
        "decisions"
    ]


def test_another_surface_cannot_switch_off_the_members_off_the_record(browser, tara, ready) -> None:
    on = browser.post(reverse("memory:off_the_record"), {"enabled": "on"})
    assert on.status_code == 302 and OffTheRecord.objects.count() == 1

    response = tara.delete(f"{OTR}?userId={ready.public_id}")
    _refused(response, "control-set-by-member")
    assert OffTheRecord.objects.count() == 1
    assert not AuditEvent.objects.filter(action="iris.memory.off_the_record.disabled").exists()

    # Still off the record: tara's next write stores nothing.
    written = tara.post(
        "/api/v1/memories", payload(ready, body="I am pregnant", category="fact"), format="json"
    )
    assert written.status_code == 409 and written.json()["code"] == "off-the-record"
    assert not MemoryEntry.objects.filter(body="I am pregnant").exists()


def test_a_surface_cannot_switch_off_what_another_surface_switched_on(
    assistant, tara, ready
) -> None:
    on = assistant.post(OTR, {"userId": str(ready.public_id)}, format="json")
    assert on.status_code == 200 and on.json()["active"] is True
    _refused(tara.delete(f"{OTR}?userId={ready.public_id}"), "control-set-by-another-caller")
    assert OffTheRecord.objects.get().set_by == "surface:assistant"

    off = assistant.delete(f"{OTR}?userId={ready.public_id}")
    assert off.status_code == 200 and off.json()["active"] is False
    assert not OffTheRecord.objects.exists()


def test_another_surface_cannot_resume_the_members_pause(browser, tara, ready, entry) -> None:
    paused = browser.post(reverse("memory:pause", kwargs={"entry_id": entry.entry_id}))
    assert paused.status_code == 302 and _current(entry).lifecycle == "paused"

    response = tara.post(
        f"/api/v1/memories/{entry.entry_id}/resume", {"userId": str(ready.public_id)}, format="json"
    )
    _refused(response, "control-set-by-member")
    assert _current(entry).lifecycle == "paused"
    assert not AuditEvent.objects.filter(action="iris.memory.entry.resumed").exists()


def test_a_surface_resumes_only_its_own_pause(assistant, tara, ready, entry) -> None:
    body = {"userId": str(ready.public_id)}
    pause = assistant.post(f"/api/v1/memories/{entry.entry_id}/pause", body, format="json")
    assert pause.status_code == 200 and _current(entry).suppression_set_by == "surface:assistant"

    resume_url = f"/api/v1/memories/{entry.entry_id}/resume"
    _refused(tara.post(resume_url, body, format="json"), "control-set-by-another-caller")
    assert _current(entry).lifecycle == "paused"

    resumed = assistant.post(resume_url, body, format="json")
    assert resumed.status_code == 200 and resumed.json()["lifecycle"] == "active"
    event = AuditEvent.objects.filter(action="iris.memory.entry.resumed").get()
    assert event.reason_code == "surface-resume"  # not "user-resume": the member did not


def test_the_members_pages_lift_what_the_member_set(browser, ready, entry) -> None:
    browser.post(reverse("memory:pause", kwargs={"entry_id": entry.entry_id}))
    resumed = browser.post(reverse("memory:resume", kwargs={"entry_id": entry.entry_id}))
    assert resumed.status_code == 302 and _current(entry).lifecycle == "active"
    assert AuditEvent.objects.get(action="iris.memory.entry.resumed").reason_code == "user-resume"

    browser.post(reverse("memory:off_the_record"), {"enabled": "on"})
    browser.post(reverse("memory:off_the_record"), {})
    assert not OffTheRecord.objects.exists()


def test_the_member_lifts_what_a_surface_set(browser, assistant, ready, entry) -> None:
    body = {"userId": str(ready.public_id)}
    assistant.post(f"/api/v1/memories/{entry.entry_id}/pause", body, format="json")
    assistant.post(OTR, body, format="json")

    browser.post(reverse("memory:resume", kwargs={"entry_id": entry.entry_id}))
    assert _current(entry).lifecycle == "active"
    browser.post(reverse("memory:off_the_record"), {})
    assert not OffTheRecord.objects.exists()
