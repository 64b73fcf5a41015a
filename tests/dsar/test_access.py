"""The access right: everything Iris holds about the member, read without changing it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps

from dsar import access, work
from dsar.models import DataRightsRequest
from governance.actions import AuditAction
from governance.errors import NotFound
from governance.models import AuditEvent
from memory.recall.service import RecallAsk, recall_resolve
from tests.dsar.export_support import file_request, staging, worked  # noqa: F401
from tests.factories import as_member, as_surface, grant, grant_category, scope_of, written

pytestmark = pytest.mark.django_db

BODIES = ["I drink my coffee black", "Coffee with oat milk on Sundays", "I live in Porto"]


def _recall(member) -> None:
    recall_resolve(
        principal=as_member(member),
        member=member,
        ask=RecallAsk(
            scope_kind="profile",
            scope_identifiers={},
            scope_key=None,
            query="coffee",
            surface="assistant",
            context="general",
            destination_tier="local",
        ),
    )


@pytest.fixture
def lived_in(ready):
    """A member with memories (one recalled, so reference counts and history exist) and
    pose memory."""
    for body in BODIES:
        written(ready, body)
    _recall(ready)
    grant(ready, "sensitive_data")
    grant_category(ready, "pose_alignment")
    written(
        ready,
        "Right shoulder rotates 20 degrees short",
        kind="pose",
        category="pose_alignment",
        identifiers=scope_of(ready, "pose", sessionId="s-1", sceneId="sc-1", poseId="p-1"),
    )
    return ready


def memory_tables() -> dict[str, list[dict[str, Any]]]:
    """Every row of every memory table (revisions with their reference counts, recall
    history, embeddings, continuation tokens ...), in primary-key order."""
    return {
        model._meta.label: [
            {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}
            for row in model.objects.order_by("pk").values()
        ]
        for model in apps.get_app_config("memory").get_models()
    }


def test_access_mutates_nothing(lived_in):
    from memory.models import MemoryEntry
    from memory.recall.models import RecallEvent

    assert RecallEvent.objects.exists()
    assert MemoryEntry.objects.filter(reference_count__gt=0).exists()
    request = file_request(lived_in, "access")
    before = memory_tables()
    audit_before = list(AuditEvent.objects.order_by("seq").values())

    assert work.process(request.id) == "completed"
    report = access.access_view(principal=as_member(lived_in), member=lived_in)

    assert memory_tables() == before
    audit_after = list(AuditEvent.objects.order_by("seq").values())
    assert audit_after[: len(audit_before)] == audit_before
    added = audit_after[len(audit_before) :]
    own = []
    for event in added:
        if event["action"].startswith("iris.governance.decision."):
            own.append(event["payload"]["operation"])
        else:
            own.append(event["action"])
    assert sorted(own) == sorted(
        [
            AuditAction.DSAR_REQUEST_TRANSITIONED.value,  # verified -> in-progress
            "dsar.access.build",
            AuditAction.DSAR_ACCESS_VIEWED.value,
            AuditAction.DSAR_REQUEST_TRANSITIONED.value,  # in-progress -> completed
            "dsar.access.view",
            AuditAction.DSAR_ACCESS_VIEWED.value,
        ]
    )
    for event in added:
        assert "coffee" not in json.dumps(event["payload"]).lower()
    assert report["sections"]["memories"]


def test_an_access_request_completes_with_the_report_fingerprint(lived_in):
    request = worked(lived_in, "access")
    assert request.state == "completed"
    (viewed,) = AuditEvent.objects.filter(action=AuditAction.DSAR_ACCESS_VIEWED.value)
    assert viewed.payload["reportSha256"] == request.result_fingerprint
    assert len(request.result_fingerprint) == 64
    assert viewed.payload["records"]["memories"] == 3


def test_the_report_has_every_section_and_pose_as_counts(lived_in):
    report = access.access_report(member=lived_in)
    sections = report["sections"]
    assert set(sections) == {
        "data-rights",
        "consent-events",
        "consents-active",
        "opt-outs",
        "memories",
        "pose-aggregates",
        "recall-log",
        "continuation-tokens",
        "operator-accesses",
    }
    assert sections["operator-accesses"] == []  # nobody looked
    assert sorted(m["body"] for m in sections["memories"]) == sorted(BODIES)
    assert sections["pose-aggregates"]["biometricAggregateOnly"] is True
    assert sections["pose-aggregates"]["counts"][0]["entries"] == 1
    assert "shoulder" not in json.dumps(report)
    assert sections["recall-log"] and all(
        r["surface"] == "assistant" for r in sections["recall-log"]
    )
    # Same state, same report, same fingerprint.
    assert access.report_fingerprint(report) == access.report_fingerprint(
        access.access_report(member=lived_in)
    )


def test_an_access_request_names_its_scopes(lived_in):
    report = access.access_report(member=lived_in, scopes=["session"])
    assert report["scopes"] == ["session"]
    assert report["sections"]["memories"] == []
    assert "pose-aggregates" not in report["sections"]


def test_nobody_else_views_a_members_data(lived_in, other_member, foreign_member):
    with pytest.raises(NotFound):
        access.access_view(principal=as_member(other_member), member=lived_in)
    with pytest.raises(NotFound):
        access.access_view(principal=as_surface(foreign_member), member=lived_in)
    assert access.access_view(principal=as_surface(lived_in), member=lived_in)["userId"] == str(
        lived_in.public_id
    )
    assert DataRightsRequest.objects.count() == 0
