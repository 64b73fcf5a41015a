"""Inspection storage: requests for access, their append-only trail, the granted snapshot
(ids only), every read of it, signed incident references, member notices and the tenant's
time boxes.

The rules live in plain modules: `inspection.lifecycle` (the state table),
`inspection.policy` (the gate), `inspection.incidents` (reference format and verdict).
Every table carries `tenant` and leads its indexes with it. Nothing here holds a memory
body: a snapshot records the exact entry and revision ids granted, and the view is read
from those immutable revisions (`inspection.selectors`).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from governance.models import AppendOnlyModel
from inspection.enums import InspectionState, NoticeStatus, ReadKind, Sensitivity

TRAIL_TABLE = "inspection_inspectiontransition"
SNAPSHOT_TABLE = "inspection_snapshotitem"
READS_TABLE = "inspection_snapshotread"

DEFAULT_GRANT_HOURS = 4
DEFAULT_PENDING_HOURS = 72
MAX_HOURS = 24 * 14
JUSTIFICATION_MAX = 1000
REASON_CODE_MAX = 64


def _choices(enum: type) -> list[tuple[str, str]]:
    return [(m.value, m.value) for m in enum]  # type: ignore[attr-defined]


class InspectionPolicy(models.Model):
    """A tenant's time boxes: how long a grant lasts and how long a request may wait for a
    reviewer. Without a row, DEFAULT_GRANT_HOURS and DEFAULT_PENDING_HOURS."""

    tenant = models.OneToOneField(
        "governance.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    grant_hours = models.PositiveSmallIntegerField(default=DEFAULT_GRANT_HOURS)
    pending_hours = models.PositiveSmallIntegerField(default=DEFAULT_PENDING_HOURS)


class IncidentReference(models.Model):
    """A signed incident reference as issued (`inspection.incidents`). The text itself is
    shown once to the issuer; the row keeps what verifying it needs and who spent it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    issued_by = models.UUIDField()
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    spent_by = models.UUIDField(null=True, blank=True)  # the inspection whose grant used it
    spent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "member"], name="inspection_incident_refs")]


class Inspection(models.Model):
    """One operator's request to see one member's memory, and its grant. `state` is the
    head of the trail in `InspectionTransition`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="inspections"
    )
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    # Roles as they were when the person acted: the trail says who could do what then.
    requester_roles = models.JSONField(default=list)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    reviewer_roles = models.JSONField(default=list)
    state = models.CharField(max_length=24, choices=_choices(InspectionState))
    path = models.CharField(max_length=24, blank=True)
    sensitivity = models.CharField(max_length=12, choices=_choices(Sensitivity))
    scope_kind = models.CharField(max_length=24)
    scope_key = models.CharField(max_length=700)
    scope_identifiers = models.JSONField(default=dict)
    reason_code = models.CharField(max_length=REASON_CODE_MAX)
    # The operator's words, screened; never in the audit chain.
    justification = models.TextField(max_length=JUSTIFICATION_MAX)
    # The signed incident reference the request cited (a single-use capability bound to
    # this member, so keeping it lets the grant verify it), and the issued row it spent.
    incident_reference_text = models.CharField(max_length=200, blank=True)
    incident_reference = models.ForeignKey(
        IncidentReference, on_delete=models.PROTECT, related_name="+", null=True
    )
    # What the request cited as the member's current sensitive-data consent (its deciding
    # consent event id); compared with the ledger at the grant.
    consent_snapshot_id = models.UUIDField(null=True, blank=True)
    requested_at = models.DateTimeField()
    pending_until = models.DateTimeField()
    granted_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Closed under an investigation carve-out: the member is not notified.
    carve_out = models.BooleanField(default=False)
    # The granted snapshot held sensitive memory: closing it owes the member a notice.
    sensitive_read = models.BooleanField(default=False)
    entry_count = models.PositiveIntegerField(default=0)
    # Distinct categories of the granted snapshot, for the member's access log.
    categories = models.JSONField(default=list)
    updated_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "state", "requested_at"], name="inspection_queue"),
            models.Index(fields=["tenant", "member", "requested_at"], name="inspection_member"),
            models.Index(fields=["tenant", "state", "expires_at"], name="inspection_grants"),
            models.Index(fields=["tenant", "state", "pending_until"], name="inspection_pending"),
        ]

    def __str__(self) -> str:
        return f"inspection {self.id} ({self.state})"


class InspectionTransition(AppendOnlyModel):
    """One step of an inspection's trail: append-only, refused UPDATE and DELETE by
    trigger."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    inspection = models.ForeignKey(Inspection, on_delete=models.PROTECT, related_name="trail")
    position = models.PositiveIntegerField()
    from_state = models.CharField(max_length=24, blank=True)
    to_state = models.CharField(max_length=24, choices=_choices(InspectionState))
    occurred_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=64)
    actor_roles = models.JSONField(default=list)
    reason_code = models.CharField(max_length=REASON_CODE_MAX, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "inspection", "position"], name="inspection_trail_position"
            )
        ]


class SnapshotItem(AppendOnlyModel):
    """One memory revision a grant lets the requester see: exactly that revision, so the
    view can be replayed as it was seen after the member changes or forgets the entry."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    inspection = models.ForeignKey(Inspection, on_delete=models.PROTECT, related_name="snapshot")
    position = models.PositiveIntegerField()
    entry_id = models.UUIDField()
    revision_id = models.UUIDField()
    category = models.CharField(max_length=32)
    sensitive = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "inspection", "position"], name="inspection_snapshot_position"
            )
        ]


class SnapshotRead(AppendOnlyModel):
    """Every time somebody looked at a granted snapshot: the requester inside the grant,
    or an auditor replaying it."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    inspection = models.ForeignKey(Inspection, on_delete=models.PROTECT, related_name="reads")
    kind = models.CharField(max_length=12, choices=_choices(ReadKind))
    actor_id = models.CharField(max_length=64)
    actor_roles = models.JSONField(default=list)
    read_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "inspection"], name="inspection_reads")]


class InspectionNotice(models.Model):
    """What the member is owed after a sensitive read: an email and a line on their access
    page, due within NOTICE_WINDOW of the close. Delivered exactly once
    (`inspection.jobs.deliver_notices`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    inspection = models.OneToOneField(Inspection, on_delete=models.PROTECT, related_name="notice")
    status = models.CharField(
        max_length=12, choices=_choices(NoticeStatus), default=NoticeStatus.QUEUED
    )
    created_at = models.DateTimeField()
    due_at = models.DateTimeField()
    # The claim of the worker sending it: a conditional UPDATE sets both, and only the
    # same claim may mark it delivered.
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    emailed = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "status", "due_at"], name="inspection_notices_due"),
            models.Index(fields=["tenant", "member"], name="inspection_notices_member"),
        ]
