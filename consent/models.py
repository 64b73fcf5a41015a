"""The consent ledger's storage: a chain row per event and its erasable personal body.

Spec: "Consent Ledger". The rules (fingerprints, chain links, derivation) live in
`consent.ledger`; these tables only keep what those rules need, split so that erasure can
remove the personal part and keep the proof:

- `ConsentEvent` is the chain: position, fingerprint, previous and own chain hash. It
  holds nothing personal and is never changed or deleted (database triggers refuse it).
- `ConsentEventBody` is what the member did: type, status, basis, method, terms, witness,
  times, and the nonce hashed with them. UPDATE is refused by trigger; DELETE is allowed by
  the database so that `consent.services.consent_purge_categories` can erase it, and
  refused by the model layer everywhere else.

Both tables carry `tenant_id` and lead their indexes with it (DESIGN, "Scale past one
machine").
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models

from consent.ledger import RECORD_VERSION, EventKind
from governance.models import AppendOnlyModel, AppendOnlyQuerySet

CHAIN_TABLE = "consent_consentevent"
BODY_TABLE = "consent_consenteventbody"


class ConsentEvent(AppendOnlyModel):
    """One link of a member's consent chain (spec: IrisConsentEvent, minus its body)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="consent_events"
    )
    position = models.PositiveIntegerField()
    record_version = models.PositiveSmallIntegerField(default=RECORD_VERSION)
    fingerprint = models.CharField(max_length=64)
    prev_hash = models.CharField(max_length=64)
    chain_hash = models.CharField(max_length=64)
    # A copy of the body's recorded_at that survives erasure, so operations can still see
    # when a link was appended. Not hashed: `verify_member_chain` compares it with the body.
    recorded_at = models.DateTimeField()

    class Meta:
        constraints = [
            # The backstop against two appends taking one position (the service also locks
            # the member). Tenant leads because a sharded (Citus) unique constraint must
            # contain the distribution column; a member has exactly one tenant, so this is
            # unique per member. The same index serves every read of a chain.
            models.UniqueConstraint(
                fields=["tenant", "member", "position"], name="consent_event_member_position"
            )
        ]

    def __str__(self) -> str:
        return f"consent event {self.id} (position {self.position})"


class ConsentEventBodyQuerySet(AppendOnlyQuerySet):
    def erase(self) -> int:
        """Delete these bodies: erasure of personal data from the ledger.

        The only caller is `consent.services.consent_purge_categories`, which audits it.
        It goes past `AppendOnlyQuerySet.delete` on purpose; the database allows DELETE on
        this table (and only this one) for exactly this.
        """
        deleted, _ = models.QuerySet.delete(self)
        return deleted


# What `ConsentEventBodyQuerySet.as_manager()` builds, under a name the annotation can use.
ConsentEventBodyManager = models.Manager.from_queryset(ConsentEventBodyQuerySet)


class ConsentEventBody(AppendOnlyModel):
    """The personal content of a consent event; removed by erasure, never edited."""

    event = models.OneToOneField(
        ConsentEvent, on_delete=models.PROTECT, primary_key=True, related_name="body"
    )
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16, choices=[(k.value, k.value) for k in EventKind])
    consent_type = models.CharField(max_length=64)
    status = models.CharField(max_length=16)
    legal_basis = models.CharField(max_length=32)
    capture_method = models.CharField(max_length=32)
    terms_hash = models.CharField(max_length=64)
    witness = models.CharField(max_length=200, null=True, blank=True)
    nonce = models.CharField(max_length=32)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField()

    # ClassVar: AppendOnlyModel declares `objects`, and managers are class attributes.
    objects: ClassVar[ConsentEventBodyManager[ConsentEventBody]] = ConsentEventBodyManager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "consent_type"], name="consent_body_tenant_type")]

    def __str__(self) -> str:
        return f"body of consent event {self.event_id}"
