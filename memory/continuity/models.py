"""Continuation tokens: one row per slot (tenant, member, scope key, surface).

A row holds the latest accepted write of its slot: references and posture only, never
content (the contract is enforced in `rules.py`). Tenant leads every index.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ContinuationToken(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    scope_key = models.CharField(max_length=512)
    surface = models.CharField(max_length=32)
    surface_context = models.JSONField()
    anchor_ref = models.JSONField()
    posture = models.CharField(max_length=32)
    sensitive_categories = models.JSONField(default=list)
    # Denormalised `bool(sensitive_categories)` so reads filter in SQL on every backend.
    is_sensitive = models.BooleanField(default=False)
    cross_device_consent_id = models.UUIDField(null=True)
    device_id = models.CharField(max_length=128)
    client_timestamp = models.DateTimeField()
    created_at = models.DateTimeField()
    # Server time of the latest accepted write: the order of last-write-wins.
    updated_at = models.DateTimeField()
    revision = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "member", "scope_key", "surface"], name="continuity_token_slot"
            )
        ]
        indexes = [
            models.Index(
                fields=["tenant", "member", "-updated_at"], name="continuity_token_recent"
            ),
            models.Index(fields=["tenant", "updated_at"], name="continuity_token_expiry"),
        ]

    def __str__(self) -> str:
        return f"continuation token {self.id}"
