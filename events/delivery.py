"""Posting one event to one endpoint: signed, governed at pre- and post-egress, one
`DeliveryAttempt` row per try, retried with exponential backoff, then marked failed.

The body is the event as the replay endpoint shows it (`event_body`): ids, codes and
timestamps only. It is signed with the endpoint's secret (HMAC-SHA256 over
`<timestamp>.<body>`; `events.rules.signature`), posted with a short timeout, no
redirects and no proxy taken from the environment. docs/decisions/events.md says how a
consumer verifies it.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from events import conf, rules
from events.egress import OPERATION
from events.models import Delivery, DeliveryAttempt
from events.wire import encode, event_body
from governance.actions import AuditAction
from governance.audit import Actor, audit_record
from governance.pipeline import Denied, Effect, Hook, Operation, govern, record_pending
from governance.principal import Principal
from governance.vault import vault_get

log = logging.getLogger(__name__)

POLICY_ID = "iris-events-delivery-v1"
USER_AGENT = "Iris-Webhooks/1"
# A claimed attempt that never reports back (a worker killed mid-POST) is due again after
# this long past its timeout.
LEASE_MARGIN = timedelta(seconds=60)
ACTOR = Actor.system("webhooks")

Outcome = DeliveryAttempt.Outcome


def _claim(delivery_id: uuid.UUID, now: datetime) -> Delivery | None:
    """Take the delivery for one attempt, or None if it is not due (or someone else took
    it): one conditional UPDATE, so two workers never post the same attempt."""
    lease = timedelta(seconds=conf.timeout_seconds()) + LEASE_MARGIN
    taken = Delivery.objects.filter(
        id=delivery_id, state=Delivery.State.PENDING, next_attempt_at__lte=now
    ).update(attempts=F("attempts") + 1, next_attempt_at=now + lease)
    if not taken:
        return None
    return (
        Delivery.objects.select_related("event", "endpoint", "endpoint__tenant")
        .filter(id=delivery_id)
        .first()
    )


def _operation(delivery: Delivery, hook_attributes: dict[str, Any]) -> Operation:
    return Operation(
        name=OPERATION,
        effect=Effect.WRITE,
        principal=Principal.system("webhooks", delivery.tenant_id),
        tenant_id=delivery.tenant_id,
        subject_ids=(str(delivery.event.id), str(delivery.endpoint_id), str(delivery.id)),
        attributes={"url": delivery.endpoint.url, **hook_attributes},
    )


def deliver(*, delivery_id: uuid.UUID | str, now: datetime | None = None) -> str:
    """Make one attempt at a due delivery. Returns the attempt's outcome, or `not-due`."""
    now = now or timezone.now()
    delivery = _claim(uuid.UUID(str(delivery_id)), now)
    if delivery is None:
        return "not-due"
    number = delivery.attempts
    endpoint = delivery.endpoint
    if not endpoint.active:
        _finish(delivery, None, Outcome.REFUSED, None, "endpoint-inactive", now, final=True)
        return Outcome.REFUSED.value
    try:
        govern(Hook.PRE_EGRESS, _operation(delivery, {"attempt": number}))
    except Denied as exc:
        refused = _new_attempt(delivery, number, now)
        _finish(delivery, refused, Outcome.REFUSED, None, exc.code, now, final=True)
        return Outcome.REFUSED.value
    # The attempt row commits before the request leaves: a crash mid-POST still shows it.
    attempt = _new_attempt(delivery, number, now)
    body = encode(event_body(delivery.event))
    timestamp = int(now.timestamp())
    secret = vault_get(endpoint.secret_handle, tenant=endpoint.tenant, owner=None)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Iris-Event-Id": str(delivery.event.id),
        "Iris-Event-Type": delivery.event.type,
        "Iris-Delivery-Id": str(delivery.id),
        "Iris-Attempt": str(number),
        "Iris-Timestamp": str(timestamp),
        "Iris-Signature": rules.signature(secret, timestamp, body),
    }
    status_code, outcome, reason = _post(endpoint.url, body, headers)
    _finish(delivery, attempt, outcome, status_code, reason, now, final=False)
    return outcome.value


def _new_attempt(delivery: Delivery, number: int, now: datetime) -> DeliveryAttempt:
    return DeliveryAttempt.objects.create(
        tenant_id=delivery.tenant_id,
        delivery=delivery,
        number=number,
        host=delivery.endpoint.host,
        started_at=now,
    )


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, Any, str]:
    try:
        with httpx.Client(
            timeout=conf.timeout_seconds(), follow_redirects=False, trust_env=False
        ) as client:
            response = client.post(url, content=body, headers=headers)
    except httpx.TimeoutException:
        return None, Outcome.TIMEOUT, "timeout"
    except httpx.HTTPError as exc:
        # The class name only: an exception's text may quote the URL.
        return None, Outcome.CONNECTION_ERROR, type(exc).__name__.lower()[:64]
    if 200 <= response.status_code < 300:
        return response.status_code, Outcome.DELIVERED, ""
    return response.status_code, Outcome.HTTP_ERROR, f"http-{response.status_code}"


def _finish(
    delivery: Delivery,
    attempt: DeliveryAttempt | None,
    outcome: Any,
    status_code: int | None,
    reason: str,
    now: datetime,
    *,
    final: bool,
) -> None:
    """Record how the attempt ended (post-egress) and what happens next."""
    decided: list[dict[str, Any]] = []
    if attempt is not None and outcome != Outcome.REFUSED:
        govern(
            Hook.POST_EGRESS,
            _operation(
                delivery,
                {"attempt": attempt.number, "outcome": outcome.value, "statusCode": status_code},
            ),
            pending=decided,
        )
    delay = None
    if outcome != Outcome.DELIVERED and not final:
        delay = conf.retry_policy().delay_after(delivery.attempts)
    with transaction.atomic():
        record_pending(decided)
        if attempt is not None:
            attempt.finished_at = timezone.now()
            attempt.outcome = outcome
            attempt.status_code = status_code
            attempt.reason_code = reason
            attempt.save(update_fields=["finished_at", "outcome", "status_code", "reason_code"])
        delivery.last_status_code = status_code
        delivery.last_outcome = outcome.value
        if outcome == Outcome.DELIVERED:
            delivery.state = Delivery.State.DELIVERED
            delivery.finished_at = now
        elif delay is not None:
            delivery.next_attempt_at = now + timedelta(seconds=delay)
        else:
            delivery.state = Delivery.State.FAILED
            delivery.finished_at = now
            audit_record(
                actor=ACTOR,
                action=AuditAction.GOVERNANCE_WEBHOOK_DELIVERY_FAILED,
                tenant_id=delivery.tenant_id,
                policy_id=POLICY_ID,
                severity="warning",
                reason_code=reason or outcome.value,
                subject_ids=[delivery.event.id, delivery.endpoint_id, delivery.id],
                payload={"attempts": delivery.attempts, "eventType": delivery.event.type},
            )
        delivery.save(
            update_fields=[
                "state",
                "finished_at",
                "next_attempt_at",
                "last_status_code",
                "last_outcome",
            ]
        )
