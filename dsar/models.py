"""Data-rights storage: requests, their append-only trail, verification codes, legal
holds, export bundles and the tenant's jurisdiction.

The rules live in plain modules: `dsar.lifecycle` (the state table), `dsar.deadlines`
(the statutory clocks), `dsar.payloads` (what each kind carries). Every table carries
`tenant` and leads its indexes with it. Nothing here holds a memory body: a request names
scopes and categories, an export's content lives only in its staging file until expiry.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from dsar.enums import (
    OPEN_STATES,
    Jurisdiction,
    RequestKind,
    RequestState,
    VerificationMethod,
)
from governance.models import AppendOnlyModel

TRAIL_TABLE = "dsar_datarightsevent"


def _choices(enum: type) -> list[tuple[str, str]]:
    return [(m.value, m.value) for m in enum]  # type: ignore[attr-defined]


class TenantDataRightsPolicy(models.Model):
    """Which statutory clock a tenant's requests run on (GDPR without a row)."""

    tenant = models.OneToOneField(
        "governance.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    jurisdiction = models.CharField(
        max_length=8, choices=_choices(Jurisdiction), default=Jurisdiction.GDPR
    )


class DataRightsRequest(models.Model):
    """One member's request to delete, export or see their data (spec:
    IrisDataRightsRequest). `state` is the head of the trail in `DataRightsEvent`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="data_rights_requests"
    )
    kind = models.CharField(max_length=8, choices=_choices(RequestKind))
    state = models.CharField(max_length=16, choices=_choices(RequestState))
    payload = models.JSONField(default=dict)
    jurisdiction = models.CharField(max_length=8, choices=_choices(Jurisdiction))
    filed_by = models.CharField(max_length=16)  # member | surface | operator
    received_at = models.DateTimeField()
    verify_by = models.DateTimeField()
    due_at = models.DateTimeField()
    # CCPA: receipt must be confirmed by then; None under GDPR.
    confirm_by = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    verification_method = models.CharField(
        max_length=20, choices=_choices(VerificationMethod), blank=True
    )
    extended_at = models.DateTimeField(null=True, blank=True)
    # Told to the member, so an operator writes it for them; screened like every text.
    extension_reason = models.CharField(max_length=500, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_code = models.CharField(max_length=64, blank=True)
    # Binds the artifact to the request: the export manifest's SHA-256, or the SHA-256 of
    # the sorted deleted-id set.
    result_fingerprint = models.CharField(max_length=64, blank=True)
    # A soft delete's undo window ends here; after it the retention job purges.
    grace_until = models.DateTimeField(null=True, blank=True)
    # An encrypted export's passphrase, in the vault until the bundle is built.
    passphrase_handle = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            # One open request of a kind per member; the service answers 409 first.
            models.UniqueConstraint(
                fields=["tenant", "member", "kind"],
                condition=Q(state__in=sorted(s.value for s in OPEN_STATES)),
                name="dsar_one_open_request_per_kind",
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "member", "received_at"], name="dsar_member_requests"),
            models.Index(fields=["tenant", "state", "due_at"], name="dsar_queue"),
        ]

    def __str__(self) -> str:
        return f"data-rights request {self.id} ({self.kind}, {self.state})"


class DataRightsEvent(AppendOnlyModel):
    """One step of a request's trail: append-only, refused UPDATE and DELETE by trigger."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    request = models.ForeignKey(DataRightsRequest, on_delete=models.PROTECT, related_name="trail")
    position = models.PositiveIntegerField()
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, choices=_choices(RequestState))
    occurred_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=64)
    reason_code = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "request", "position"], name="dsar_trail_position"
            )
        ]


class VerificationCode(models.Model):
    """A one-time code sent to the member (email link or phone OTP). Only its keyed hash is
    kept; it is good once, until `expires_at`, for at most MAX_ATTEMPTS tries."""

    MAX_ATTEMPTS = 5

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    request = models.ForeignKey(DataRightsRequest, on_delete=models.CASCADE, related_name="codes")
    method = models.CharField(max_length=20, choices=_choices(VerificationMethod))
    code_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    attempts = models.PositiveSmallIntegerField(default=0)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "request"], name="dsar_codes")]


class LegalHold(models.Model):
    """A legal hold on a member: deletion waits while one is in force. Placed and lifted
    by an operator with the legal role; the member sees that one applies, not why."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.CharField(max_length=500)
    placed_by = models.CharField(max_length=64)
    placed_at = models.DateTimeField()
    lifted_by = models.CharField(max_length=64, blank=True)
    lifted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "member", "lifted_at"], name="dsar_holds")]


class ExportBundle(models.Model):
    """The artifact of an export request: a zip in the staging folder, resumable while it
    is built (`cursor`), downloadable until `expires_at`, then deleted."""

    class State(models.TextChoices):
        BUILDING = "building"
        READY = "ready"
        EXPIRED = "expired"

    request = models.OneToOneField(
        DataRightsRequest, on_delete=models.PROTECT, primary_key=True, related_name="bundle"
    )
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.BUILDING)
    # File name inside the staging folder (settings.IRIS_EXPORT_DIR); never a full path.
    file_name = models.CharField(max_length=128, blank=True)
    # Where a worker that died left off, so a retry goes on from there.
    cursor = models.JSONField(default=dict)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    started_at = models.DateTimeField()
    ready_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    downloads = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["tenant", "state", "expires_at"], name="dsar_bundles")]
