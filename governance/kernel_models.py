"""The governance kernel's durable state: approvals, the side-effect ledger, runs and their
steps, and each tenant's egress opt-in.

Loaded through `governance.models` (one import line at its end), so foreign keys are
strings to avoid a circular import. Every table carries the tenant and leads its indexes
with it. None of these rows holds memory text: arguments are ids and enum values, content
appears only as a fingerprint.
"""

from __future__ import annotations

import uuid

from django.db import models

__all__ = ["Approval", "Run", "RunStep", "SideEffect", "TenantEgressPolicy"]


class Approval(models.Model):
    """A governed call waiting for (or answered by) the member it concerns.

    `arguments` are what the resumable registry needs to issue the call again: ids and small
    enum values only, never a memory body (`approvals.storable_arguments` enforces it). The
    row is deleted with its owner (`CASCADE`): it is operational state, not a ledger; the
    audit chain keeps the record of what was asked and answered.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        COMPLETED = "completed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    owner = models.ForeignKey("governance.User", on_delete=models.CASCADE, related_name="+")
    operation = models.CharField(max_length=96)
    arguments = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=64)
    reason_code = models.CharField(max_length=64)
    card_text = models.CharField(max_length=300)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Who made the held call, so that the approved call resumes as the same principal.
    requested_by_kind = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64)
    requested_by_surface = models.CharField(max_length=32, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        "governance.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    # How the resumption went (`completed`, `not-resumable`, a refusal code), for the card.
    outcome_code = models.CharField(max_length=64, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "owner", "status"]),
            models.Index(fields=["tenant", "owner", "operation", "fingerprint"]),
            models.Index(fields=["status", "expires_at"]),
        ]

    @property
    def undoable(self) -> bool:
        """Whether the member can undo the operation after it ran (the card's heading)."""
        from governance.operations import operation_undo

        return operation_undo(self.operation) is not None


class SideEffect(models.Model):
    """The side-effect ledger: a destructive call's row, committed before the call runs.

    A crash mid-call leaves it `pending`; `manage.py resume_operations` completes it through
    the resumable registry or marks it `failed`.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member_public_id = models.UUIDField(null=True, blank=True)
    operation = models.CharField(max_length=96)
    effect = models.CharField(max_length=16)
    arguments = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=64)
    approval_id = models.UUIDField(null=True, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    requested_by_kind = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict)
    error_code = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "status", "started_at"]),
            models.Index(fields=["status", "started_at"]),
            models.Index(fields=["tenant", "member_public_id"]),
        ]


class Run(models.Model):
    """One run of a surface (a turn of the assistant), named by the surface's own UUID.

    The counters are the run limits' state; `recent_writes` holds write fingerprints
    (hashes only) for loop detection. Whether the run is tainted is derived from its steps,
    never stored, so a run resumed after an approval keeps its taint.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    run_id = models.UUIDField()
    surface = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField()
    write_count = models.PositiveIntegerField(default=0)
    recall_count = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    recent_writes = models.JSONField(default=list)

    class Meta:
        constraints = [
            # A run id is the surface's own: one surface cannot reach another's run.
            models.UniqueConstraint(
                fields=["tenant", "surface", "run_id"], name="governance_run_surface_run"
            )
        ]


class RunStep(models.Model):
    """A tool step a surface reported. `source` is a short label (a plugin or site name)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    tool = models.CharField(max_length=64)
    read_external_content = models.BooleanField(default=False)
    source = models.CharField(max_length=200, blank=True)
    reported_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="governance_runstep_run_seq")
        ]
        indexes = [models.Index(fields=["tenant", "run", "read_external_content"])]


class TenantEgressPolicy(models.Model):
    """A tenant's egress choices. Without a row, internal text never goes to the cloud."""

    tenant = models.OneToOneField(
        "governance.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    internal_to_cloud = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)
