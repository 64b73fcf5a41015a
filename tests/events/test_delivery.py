"""Webhooks delivered for real: to an HTTP server on 127.0.0.1, signed, retried, governed
at pre- and post-egress, and carrying nothing but ids."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.core import serializers

from events.delivery import deliver
from events.models import Delivery, DeliveryAttempt, Event, WebhookEndpoint
from events.outbox import publish_pending
from events.services import webhook_create
from governance.actions import AuditAction
from governance.models import AuditEvent
from governance.principal import Principal
from tests.factories import NOW, written

BODY = "My sister Maud is expecting twins in March"
SUBJECT = "maud-twins"
ADMIN = Principal.system("tests")

pytestmark = pytest.mark.django_db


def consumer_verifies(secret: str, headers: dict[str, str], body: bytes, now: int) -> bool:
    """What docs/decisions/events.md tells a consumer to do, written out independently."""
    timestamp = headers["iris-timestamp"]
    if abs(now - int(timestamp)) > 300:
        return False
    message = timestamp.encode() + b"." + body
    expected = "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    given = [part.strip() for part in headers["iris-signature"].split(",")]
    return any(hmac.compare_digest(expected, g) for g in given)


def _hook(tenant, receiver, types=("memory.written",)):
    return webhook_create(principal=ADMIN, tenant=tenant, url=receiver.url, event_types=list(types))


def _rows_text() -> str:
    """Every events row, serialised: what a database reader could see."""
    rows = [
        *Event.objects.all(),
        *WebhookEndpoint.objects.all(),
        *Delivery.objects.all(),
        *DeliveryAttempt.objects.all(),
    ]
    return serializers.serialize("json", rows)


def test_a_write_is_posted_signed_with_ids_only(
    ready, receiver, webhook_settings, django_capture_on_commit_callbacks
) -> None:
    hook = _hook(ready.tenant, receiver)
    with django_capture_on_commit_callbacks(execute=True):
        entry = written(ready, BODY, subject=SUBJECT)
    [got] = receiver.requests
    attempt = DeliveryAttempt.objects.get()
    assert consumer_verifies(
        hook.secret, got.headers, got.body, int(attempt.started_at.timestamp())
    )
    assert not consumer_verifies("whsec_wrong", got.headers, got.body, int(NOW.timestamp()) + 10**9)
    posted = json.loads(got.body)
    assert posted["type"] == "memory.written" and got.headers["iris-event-type"] == "memory.written"
    assert posted["userId"] == str(ready.public_id)
    assert posted["data"]["entryId"] == str(entry.entry_id)
    assert posted["cursor"] >= 1 and got.headers["iris-event-id"] == posted["id"]
    # Nothing but ids: neither the memory's text nor its subject, anywhere it went or stayed.
    for needle in (BODY, SUBJECT, "Maud", hook.secret):
        assert needle.encode() not in got.body
        assert needle not in json.dumps(got.headers)
        assert needle not in _rows_text()
    assert attempt.outcome == "delivered" and attempt.status_code == 200
    assert Delivery.objects.get().state == "delivered"


def test_a_failed_attempt_is_retried_after_its_backoff(ready, receiver, webhook_settings) -> None:
    receiver.statuses = [500]
    _hook(ready.tenant, receiver)
    written(ready, BODY)
    publish_pending(now=NOW)
    delivery = Delivery.objects.get()
    assert deliver(delivery_id=delivery.id, now=NOW) == "http-error"
    delivery.refresh_from_db()
    assert delivery.state == "pending" and delivery.attempts == 1
    assert delivery.next_attempt_at == NOW + timedelta(seconds=30)
    assert deliver(delivery_id=delivery.id, now=NOW + timedelta(seconds=29)) == "not-due"
    assert deliver(delivery_id=delivery.id, now=NOW + timedelta(seconds=30)) == "delivered"
    delivery.refresh_from_db()
    assert delivery.state == "delivered" and delivery.attempts == 2
    attempts = list(DeliveryAttempt.objects.order_by("number").values_list("number", "outcome"))
    assert attempts == [(1, "http-error"), (2, "delivered")]
    assert [r.headers["iris-attempt"] for r in receiver.requests] == ["1", "2"]
    assert receiver.requests[0].body == receiver.requests[1].body  # the same event, resent
    # Each attempt passed the kernel before it left and after it ended.
    hooks = [
        e.payload["hook"]
        for e in AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_DECISION_ALLOW).order_by(
            "seq"
        )
        if e.payload.get("operation") == "events.webhook_post"
    ]
    assert hooks == ["pre_egress", "post_egress", "pre_egress", "post_egress"]


def test_attempts_are_bounded_then_the_delivery_is_failed_and_audited(
    ready, receiver, webhook_settings
) -> None:
    receiver.statuses = [503, 503, 503, 503]
    _hook(ready.tenant, receiver)
    written(ready, BODY)
    publish_pending(now=NOW)
    delivery = Delivery.objects.get()
    at = NOW
    outcomes = []
    for _ in range(3):  # IRIS_WEBHOOK_MAX_ATTEMPTS = 3: waits of 30 s then 60 s
        outcomes.append(deliver(delivery_id=delivery.id, now=at))
        delivery.refresh_from_db()
        at = delivery.next_attempt_at
    assert outcomes == ["http-error"] * 3
    assert delivery.state == "failed" and delivery.last_status_code == 503
    assert deliver(delivery_id=delivery.id, now=at + timedelta(days=1)) == "not-due"
    [failed] = AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_WEBHOOK_DELIVERY_FAILED)
    assert failed.payload == {"attempts": 3, "eventType": "memory.written"}
    assert len(receiver.requests) == 3


def test_a_timeout_counts_as_a_failed_attempt(ready, webhook_settings) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    webhook_settings.IRIS_WEBHOOK_TIMEOUT_SECONDS = 0.2
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/slow"
        webhook_create(
            principal=ADMIN, tenant=ready.tenant, url=url, event_types=["memory.written"]
        )
        written(ready, BODY)
        publish_pending(now=NOW)
        delivery = Delivery.objects.get()
        assert deliver(delivery_id=delivery.id, now=NOW) == "timeout"
    finally:
        listener.close()
    delivery.refresh_from_db()
    assert delivery.state == "pending" and delivery.last_outcome == "timeout"


def test_a_host_taken_off_the_allow_list_is_refused_at_delivery(
    ready, receiver, webhook_settings
) -> None:
    _hook(ready.tenant, receiver)
    written(ready, BODY)
    publish_pending(now=NOW)
    webhook_settings.IRIS_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    delivery = Delivery.objects.get()
    assert deliver(delivery_id=delivery.id, now=NOW) == "refused"
    assert receiver.requests == []
    delivery.refresh_from_db()
    assert delivery.state == "failed"
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.outcome, attempt.reason_code) == ("refused", "host-not-allowed")
    [denied] = AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_DECISION_DENY)
    assert denied.reason_code == "host-not-allowed"
    assert denied.payload["hook"] == "pre_egress"


def test_only_subscribed_types_and_active_endpoints_get_deliveries(
    ready, receiver, webhook_settings
) -> None:
    from events.services import webhook_deactivate

    _hook(ready.tenant, receiver, types=["recall.completed"])
    off = _hook(ready.tenant, receiver, types=["memory.written"])
    webhook_deactivate(principal=ADMIN, tenant=ready.tenant, endpoint_id=off.endpoint.id)
    written(ready, BODY)
    publish_pending(now=NOW)
    assert Delivery.objects.count() == 0


def test_another_tenant_s_endpoint_receives_nothing(
    ready, other_tenant, receiver, webhook_settings
) -> None:
    _hook(other_tenant, receiver)
    written(ready, BODY)
    publish_pending(now=NOW)
    assert Delivery.objects.count() == 0
