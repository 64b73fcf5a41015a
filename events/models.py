"""Events for the systems around Iris: the outbox, the endpoints that receive it, and one
row per delivery attempt (docs/decisions/events.md).

`tenant_id` leads every index: each row belongs to one tenant, and every read names it.
"""

from __future__ import annotations

import uuid

from django.db import models

from governance.models import Tenant


class WebhookEndpoint(models.Model):
    """Where a tenant wants its events posted. The signing secret lives in the vault
    (`secret_handle` is its `vault://` handle), encrypted under the master key."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    url = models.CharField(max_length=500)
    host = models.CharField(max_length=255)
    event_types = models.JSONField(default=list)
    secret_handle = models.CharField(max_length=64)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "active"])]

    def __str__(self) -> str:
        return f"{self.host} ({self.id})"


class Event(models.Model):
    """One event in a tenant's outbox, written in the transaction of the change it reports.

    `cursor` is the event's place in its tenant's sequence: given after commit, in commit
    order, by `events.outbox.sequence_pending`, so a reader that saw cursor N never later
    meets an event below N. Until then it is null and the event is not yet published.
    """

    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant_id = models.UUIDField()
    cursor = models.BigIntegerField(null=True, blank=True)
    type = models.CharField(max_length=40)
    member_id = models.UUIDField(null=True, blank=True)
    audit_event_id = models.UUIDField()
    occurred_at = models.DateTimeField()
    data = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant_id", "cursor"], name="event_tenant_cursor")
        ]
        indexes = [
            models.Index(
                fields=["seq"],
                name="event_unsequenced",
                condition=models.Q(cursor__isnull=True),
            )
        ]


class Delivery(models.Model):
    """One event bound for one endpoint: its state and when it is next tried."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.UUIDField()
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_outcome = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="delivery_event_endpoint")
        ]
        indexes = [
            models.Index(fields=["tenant_id", "state", "next_attempt_at"]),
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due",
                condition=models.Q(state="pending"),
            ),
        ]


class DeliveryAttempt(models.Model):
    """One POST (or one refusal to post), recorded at pre- and post-egress."""

    class Outcome(models.TextChoices):
        SENDING = "sending"
        DELIVERED = "delivered"
        HTTP_ERROR = "http-error"
        TIMEOUT = "timeout"
        CONNECTION_ERROR = "connection-error"
        REFUSED = "refused"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.UUIDField()
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveIntegerField()
    host = models.CharField(max_length=255)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.SENDING)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    reason_code = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="attempt_number")
        ]
        indexes = [models.Index(fields=["tenant_id", "started_at"])]
