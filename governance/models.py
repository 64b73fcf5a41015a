from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from governance.roles import TENANT_PERMISSIONS


class Tenant(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        permissions = list(TENANT_PERMISSIONS.items())

    def __str__(self) -> str:
        return self.slug


class User(AbstractUser):
    """A member or an operator. Exactly one tenant; addressed outside by `public_id`."""

    class Kind(models.TextChoices):
        MEMBER = "member"
        OPERATOR = "operator"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="users")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MEMBER)

    REQUIRED_FIELDS = ["email", "tenant"]

    class Meta:
        indexes = [models.Index(fields=["tenant", "kind"])]

    @property
    def is_operator(self) -> bool:
        return self.kind == self.Kind.OPERATOR

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self.groups.values_list("name", flat=True))


# Direct foreign-key object permissions (guardian): faster than generic ones, and they are
# only ever granted on tenants.
class TenantUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey(Tenant, on_delete=models.CASCADE)


class TenantGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey(Tenant, on_delete=models.CASCADE)


class SurfaceClient(models.Model):
    """An API client for one product surface of one tenant. Only the token's hash is kept.

    `destination_tier` is where the client's model runs, declared when it is registered:
    what it recalls may go no further than that tier, and a request may only narrow it
    (docs/decisions/recall.md, "Default ranker and destination tier").
    """

    class DestinationTier(models.TextChoices):
        LOCAL = "local"
        CLOUD = "cloud"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="surface_clients")
    surface = models.CharField(max_length=32)
    # Cloud unless registered otherwise: the stricter tier, so a client nobody described
    # receives nothing personal.
    destination_tier = models.CharField(
        max_length=8, choices=DestinationTier.choices, default=DestinationTier.CLOUD
    )
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "surface"])]


class AppendOnlyQuerySet(models.QuerySet):
    """Ledger rows are never changed in bulk; the database triggers refuse it as well."""

    def update(self, **kwargs):
        raise PermissionError(f"{self.model.__name__} is append-only")

    def delete(self):
        raise PermissionError(f"{self.model.__name__} is append-only")


class AppendOnlyModel(models.Model):
    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise PermissionError(f"{type(self).__name__} is append-only")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError(f"{type(self).__name__} is append-only")


class AuditEvent(AppendOnlyModel):
    """One audited fact. Ids, counts, codes and fingerprints only; never content.

    `tenant_id` and `actor_id` are plain values, not foreign keys, so that deleting a user
    or a tenant can never cascade into the audit trail.
    """

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    occurred_at = models.DateTimeField()
    tenant_id = models.UUIDField(null=True)
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=64)
    action = models.CharField(max_length=96)
    policy_id = models.CharField(max_length=96, blank=True)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.INFO)
    reason_code = models.CharField(max_length=96, blank=True)
    subject_ids = models.JSONField(default=list)
    payload = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "occurred_at"])]


class AuditSeal(AppendOnlyModel):
    """An event's place in its tenant's chain, appended by the sealer in commit order."""

    chain = models.CharField(max_length=40)
    position = models.BigIntegerField()
    event = models.OneToOneField(
        AuditEvent, on_delete=models.DO_NOTHING, related_name="seal", db_constraint=True
    )
    event_seq = models.BigIntegerField()
    prev_hash = models.CharField(max_length=64)
    chain_hash = models.CharField(max_length=64)
    sealed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chain", "position"], name="audit_seal_chain_position")
        ]
        indexes = [models.Index(fields=["event_seq"])]


class IdempotencyRecord(models.Model):
    """The first answer to a mutating call, replayed for the same key from the same client."""

    id = models.BigAutoField(primary_key=True)
    principal = models.CharField(max_length=80)
    key = models.CharField(max_length=255)
    request_fingerprint = models.CharField(max_length=64)
    subject_id = models.UUIDField(null=True)
    status_code = models.PositiveSmallIntegerField(null=True)
    response_body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["principal", "key"], name="idempotency_principal_key")
        ]
        indexes = [models.Index(fields=["subject_id"]), models.Index(fields=["created_at"])]


class VaultSecret(models.Model):
    """A secret encrypted under the master key (MultiFernet). Addressed as `vault://<id>`;
    the plaintext never appears in a log, an audit payload, an answer or an error."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, null=True)
    owner = models.ForeignKey(User, on_delete=models.PROTECT, null=True)
    purpose = models.CharField(max_length=64)
    ciphertext = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "owner", "purpose"])]


class OperatorTotp(models.Model):
    """An operator's authenticator (TOTP). The shared secret sits in the vault; this row
    holds its handle, whether the operator confirmed it, and the last time step accepted,
    so that a code is good once."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="totp")
    secret_handle = models.CharField(max_length=64)
    confirmed_at = models.DateTimeField(null=True)
    last_used_step = models.BigIntegerField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)


class JobRun(models.Model):
    """One run of a background job over one batch, with what it did."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.CharField(max_length=64)
    tenant_id = models.UUIDField(null=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)
    status = models.CharField(max_length=16, default="running")  # running | done | failed
    counts = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["job", "-started_at"])]


from governance.kernel_models import *  # noqa: E402,F401,F403
