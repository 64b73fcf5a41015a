"""`/api/v1/continuation-tokens`: contract, idempotency, conflicts, consent, expiry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from consent.enums import ConsentType
from consent.services import consent_record, opt_out_record
from governance.models import AuditEvent, JobRun
from governance.principal import Principal
from memory.continuity import services
from memory.continuity.models import ContinuationToken
from tests.factories import as_member

URL = "/api/v1/continuation-tokens"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def consent(member, consent_type: str, status: str = "granted") -> uuid.UUID:
    event = consent_record(
        principal=as_member(member),
        member=member,
        consent_type=consent_type,
        status=status,
        legal_basis="explicit_consent" if consent_type.startswith("category:") else "consent",
        capture_method="settings-toggle",
    )
    return event.id


def token(member, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scopeKey": f"session:{member.public_id}:s-1",
        "surfaceContext": {"surface": "tara", "sessionId": "s-1", "itemId": "book-42"},
        "anchorRef": {
            "surface": "tara",
            "kind": "segment",
            "ref": "book-42/ch-3/seg-7",
            "offsetMs": 73500,
        },
        "posture": "listening",
        "deviceId": "phone-1",
        "clientTimestamp": "2025-03-01T12:00:00Z",
    }
    body.update(changes)
    return body


def post(client: APIClient, body: dict[str, Any], key: str | None = None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(URL, body, format="json", **headers)


# ---------------------------------------------------------------------------- writes


def test_a_surface_writes_a_token_and_another_device_resumes_at_its_anchor(
    surface_api, member
) -> None:
    written = post(surface_api, token(member), key="k-1")
    assert written.status_code == 201, written.json()
    body = written.json()
    assert body["outcome"] == "written"
    assert body["conflictNotice"] is None
    assert body["token"]["anchorRef"]["offsetMs"] == 73500

    # Reconnect on the laptop: the shell asks for recent tokens and resumes mid-segment.
    laptop = surface_api.get(URL, {"userId": str(member.public_id), "surface": "tara"})
    assert laptop.status_code == 200
    [resumed] = laptop.json()["results"]
    assert resumed["id"] == body["token"]["id"]
    assert resumed["anchorRef"] == {
        "surface": "tara",
        "kind": "segment",
        "ref": "book-42/ch-3/seg-7",
        "offsetMs": 73500,
    }
    assert resumed["deviceId"] == "phone-1"
    assert AuditEvent.objects.filter(action="iris.memory.continuation.written").count() == 1


def test_a_member_session_writes_and_reads_its_own_tokens(member_api, member) -> None:
    assert post(member_api, token(member)).status_code == 201
    listed = member_api.get(URL)
    assert [t["userId"] for t in listed.json()["results"]] == [str(member.public_id)]


def test_replaying_an_idempotency_key_returns_the_first_answer_and_writes_once(
    surface_api, member
) -> None:
    first = post(surface_api, token(member), key="same")
    again = post(surface_api, token(member), key="same")
    assert again.status_code == first.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert ContinuationToken.objects.count() == 1
    assert ContinuationToken.objects.get().revision == 1


BAD = [
    (
        {"anchorRef": {"surface": "nyx", "kind": "segment", "ref": "x"}},
        "anchorRef.surface",
        "anchor-surface-mismatch",
    ),
    (
        {"sensitiveCategories": ["mental_health"]},
        "crossDeviceConsentId",
        "cross-device-consent-required",
    ),
    (
        {"sensitiveCategories": ["mental_health"], "crossDeviceConsentId": str(uuid.uuid4())},
        "crossDeviceConsentId",
        "cross-device-consent-not-current",
    ),
    ({"surfaceContext": {"surface": "myspace"}}, "surfaceContext.surface", "invalid_choice"),
    ({"volume": 11}, "volume", "unknown-field"),
    ({"transcript": "and then she said"}, "transcript", "content-not-allowed"),
]


@pytest.mark.parametrize(("changes", "field", "rule"), BAD)
def test_bad_input_is_a_400_naming_the_rule_and_writes_nothing(
    surface_api, member, changes: dict[str, Any], field: str, rule: str
) -> None:
    response = post(surface_api, token(member, **changes), key=f"bad-{rule}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == (field, rule)
    assert not ContinuationToken.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="iris.memory.continuation").exists()


def test_two_devices_within_the_window_the_later_wins_and_is_told(member) -> None:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    phone = services.continuation_token_write(
        principal=surface, member=member, payload=token(member), now=T0
    )
    laptop = services.continuation_token_write(
        principal=surface,
        member=member,
        payload=token(member, deviceId="laptop-1"),
        now=T0 + timedelta(seconds=4),
    )
    assert (phone.outcome, phone.conflict_with) == ("written", None)
    assert laptop.outcome == "written"
    assert laptop.conflict_with is not None
    assert (laptop.conflict_with.device_id, laptop.conflict_with.server_time) == ("phone-1", T0)
    stored = ContinuationToken.objects.get()
    assert (stored.device_id, stored.revision) == ("laptop-1", 2)


def test_a_write_overtaken_in_flight_is_superseded_and_gets_the_winning_token(member) -> None:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    services.continuation_token_write(
        principal=surface,
        member=member,
        payload=token(member, deviceId="laptop-1"),
        now=T0 + timedelta(seconds=2),
    )
    late = services.continuation_token_write(
        principal=surface, member=member, payload=token(member), now=T0
    )
    assert late.outcome == "superseded"
    assert late.token.device_id == "laptop-1"
    assert late.conflict_with is not None and late.conflict_with.device_id == "laptop-1"
    assert ContinuationToken.objects.get().device_id == "laptop-1"


def test_a_write_outside_the_window_replaces_without_a_notice(
    surface_api, member, settings
) -> None:
    settings.IRIS_CONTINUITY_CONFLICT_WINDOW_SECONDS = 0
    post(surface_api, token(member))
    second = post(surface_api, token(member, deviceId="laptop-1"))
    assert second.status_code == 200
    assert (second.json()["outcome"], second.json()["conflictNotice"]) == ("written", None)


def test_the_api_answers_a_conflict_with_the_notice(surface_api, member) -> None:
    post(surface_api, token(member))
    second = post(surface_api, token(member, deviceId="laptop-1"))
    notice = second.json()["conflictNotice"]
    assert notice["message"] == "This was also playing on your other device"
    assert notice["otherDeviceId"] == "phone-1"
    assert notice["otherWrittenAt"].endswith("Z")


def test_switching_cross_device_sync_off_refuses_writes_and_hides_tokens(
    surface_api, member
) -> None:
    post(surface_api, token(member))
    opt_out_record(
        principal=as_member(member),
        member=member,
        category="cross_device_sync",
        status="opted-out",
        legal_basis="consent",
        capture_method="settings-toggle",
    )
    refused = post(surface_api, token(member, deviceId="laptop-1"))
    assert refused.status_code == 403
    assert refused.json()["code"] == "cross-device-sync-off"
    listed = surface_api.get(URL, {"userId": str(member.public_id)})
    assert listed.json()["results"] == []


# ---------------------------------------------------------------------------- reads


def test_reads_are_newest_first_per_surface_or_all_and_limited(surface_api, member) -> None:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    for minutes, (scope, app) in enumerate(
        [("s-1", "tara"), ("s-2", "tara"), ("s-3", "nisaba"), ("s-4", "tara")]
    ):
        services.continuation_token_write(
            principal=surface,
            member=member,
            payload=token(
                member,
                scopeKey=f"session:{member.public_id}:{scope}",
                surfaceContext={"surface": app},
                anchorRef={"surface": app, "kind": "page", "ref": f"p-{scope}"},
            ),
            now=T0 + timedelta(minutes=minutes),
        )
    user = str(member.public_id)
    every = surface_api.get(URL, {"userId": user}).json()["results"]
    assert [t["anchorRef"]["ref"] for t in every] == ["p-s-4", "p-s-3", "p-s-2", "p-s-1"]
    tara = surface_api.get(URL, {"userId": user, "surface": "tara", "limit": 2}).json()
    assert [t["anchorRef"]["ref"] for t in tara["results"]] == ["p-s-4", "p-s-2"]
    bad = surface_api.get(URL, {"userId": user, "limit": 500})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "limit"


def test_revoked_cross_device_consent_stops_sensitive_tokens_written_and_returned(
    surface_api, member
) -> None:
    grant = consent(member, ConsentType.CROSS_DEVICE)
    sensitive = token(
        member,
        sensitiveCategories=["mental_health"],
        crossDeviceConsentId=str(grant),
        scopeKey=f"session:{member.public_id}:therapy",
    )
    assert post(surface_api, sensitive).status_code == 201
    assert post(surface_api, token(member)).status_code == 201
    user = str(member.public_id)
    assert len(surface_api.get(URL, {"userId": user}).json()["results"]) == 2

    consent(member, ConsentType.CROSS_DEVICE, status="revoked")
    listed = surface_api.get(URL, {"userId": user}).json()["results"]
    assert [t["sensitiveCategories"] for t in listed] == [[]]
    # Filtered out, then deleted: re-granting does not bring the old token back.
    assert not ContinuationToken.objects.filter(is_sensitive=True).exists()
    assert AuditEvent.objects.filter(action="iris.memory.continuation.purged").count() == 1

    refused = post(surface_api, {**sensitive, "deviceId": "laptop-1"})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["rule"] == "cross-device-consent-not-current"
    regrant = consent(member, ConsentType.CROSS_DEVICE)
    assert post(surface_api, {**sensitive, "crossDeviceConsentId": str(regrant)}).status_code == 201


def test_revoking_a_category_consent_deletes_tokens_carrying_it(
    surface_api, member, django_capture_on_commit_callbacks
) -> None:
    grant = consent(member, ConsentType.CROSS_DEVICE)
    consent(member, "category:medical")
    post(
        surface_api,
        token(member, sensitiveCategories=["medical"], crossDeviceConsentId=str(grant)),
    )
    with django_capture_on_commit_callbacks(execute=True):
        consent(member, "category:medical", status="revoked")  # the signal queues the purge
    assert not ContinuationToken.objects.exists()


# ---------------------------------------------------------------------- forget, expiry


def test_forget_deletes_every_token_of_the_member_only(member, other_member) -> None:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    for person in (member, other_member):
        services.continuation_token_write(principal=surface, member=person, payload=token(person))
    assert services.continuation_tokens_forget(principal=as_member(member), member=member) == 1
    assert list(ContinuationToken.objects.values_list("member", flat=True)) == [other_member.pk]
    assert services.continuation_tokens_forget(principal=as_member(member), member=member) == 0


def test_a_member_forgets_every_token_through_the_api(member_api, member, other_member) -> None:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    services.continuation_token_write(
        principal=surface, member=other_member, payload=token(other_member)
    )
    assert post(member_api, token(member)).status_code == 201
    response = member_api.delete(URL)
    assert response.status_code == 200 and response.json() == {"deleted": 1}
    assert member_api.get(URL).json()["results"] == []
    assert list(ContinuationToken.objects.values_list("member", flat=True)) == [other_member.pk]


def test_expiry_deletes_old_tokens_in_batches_and_records_a_run(member, settings) -> None:
    settings.IRIS_CONTINUITY_TOKEN_TTL_DAYS = 30
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    for day in range(5):
        services.continuation_token_write(
            principal=surface,
            member=member,
            payload=token(member, scopeKey=f"session:{member.public_id}:d{day}"),
            now=T0 + timedelta(days=day),
        )
    now = T0 + timedelta(days=32, hours=1)  # days 0, 1 and 2 are past the TTL
    run = services.continuation_tokens_expire(tenant_id=member.tenant_id, now=now, batch_size=2)
    assert (run.job, run.status, run.counts) == (
        "continuity.expire",
        "done",
        {"deleted": 3, "batches": 2},
    )
    assert ContinuationToken.objects.count() == 2
    again = services.continuation_tokens_expire(tenant_id=member.tenant_id, now=now, batch_size=2)
    assert again.counts == {"deleted": 0, "batches": 0}
    assert JobRun.objects.filter(job="continuity.expire").count() == 2


# ---------------------------------------------------------------------- the checklist


def test_anonymous_is_refused(api, member) -> None:
    assert post(api, token(member)).status_code == 401
    assert api.get(URL, {"userId": str(member.public_id)}).status_code == 401


def test_another_tenants_surface_gets_404(foreign_surface_token, member) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    assert post(client, token(member)).status_code == 404
    assert client.get(URL, {"userId": str(member.public_id)}).status_code == 404
    assert not ContinuationToken.objects.exists()


def test_a_surface_naming_another_tenants_member_gets_404(surface_api, foreign_member) -> None:
    assert post(surface_api, token(foreign_member)).status_code == 404
    assert surface_api.get(URL, {"userId": str(foreign_member.public_id)}).status_code == 404


def test_a_member_session_cannot_act_for_another_member(member_api, other_member) -> None:
    assert post(member_api, token(other_member)).status_code == 404
    assert member_api.get(URL, {"userId": str(other_member.public_id)}).status_code == 404
    assert not ContinuationToken.objects.exists()


def test_a_member_cannot_smuggle_another_member_into_the_token(
    member_api, member, other_member
) -> None:
    # The body names someone else than the session: 404, whatever the query says.
    body = token(member, userId=str(other_member.public_id))
    assert post(member_api, body).status_code == 404


def test_operators_get_404(make_operator, member) -> None:
    client = APIClient()
    client.force_login(make_operator("admin"))
    assert post(client, token(member)).status_code == 404
    assert client.get(URL, {"userId": str(member.public_id)}).status_code == 404
