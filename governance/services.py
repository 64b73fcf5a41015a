"""Tenants, people and surface clients: every change here writes its audit event."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from guardian.shortcuts import assign_perm

from governance.actions import AuditAction
from governance.audit import Actor, audit_record
from governance.auth import hash_token, new_token
from governance.errors import Conflict, NotFound, ValidationFailed
from governance.models import SurfaceClient, Tenant, User
from governance.roles import MEMBER, ROLE_CHOICES, ROLE_PERMISSIONS, Role
from governance.surfaces import SURFACES

POLICY = "iris-governance-v1"


def tenant_create(*, actor: Actor, slug: str, name: str) -> Tenant:
    with transaction.atomic(durable=True):
        if Tenant.objects.filter(slug=slug).exists():
            raise Conflict(f"A tenant with slug {slug!r} exists.", field="slug", rule="unique")
        tenant = Tenant.objects.create(slug=slug, name=name)
        audit_record(
            actor=actor,
            action=AuditAction.GOVERNANCE_TENANT_CREATED,
            tenant_id=tenant.id,
            policy_id=POLICY,
            subject_ids=[tenant.id],
        )
    return tenant


def role_group(role: Role) -> Group:
    group, _ = Group.objects.get_or_create(name=role.value)
    return group


@dataclass(frozen=True)
class CreatedUser:
    user: User
    password: str


def user_create(
    *,
    actor: Actor,
    tenant: Tenant,
    username: str,
    role: str = MEMBER,
    email: str = "",
    password: str | None = None,
    public_id: uuid.UUID | None = None,
) -> CreatedUser:
    if role not in ROLE_CHOICES:
        raise ValidationFailed(
            f"Unknown role {role!r}.", field="role", rule="choice", allowed=ROLE_CHOICES
        )
    password = password or secrets.token_urlsafe(12)
    with transaction.atomic(durable=True):
        if User.objects.filter(username=username).exists():
            raise Conflict("That username is taken.", field="username", rule="unique")
        kind = User.Kind.MEMBER if role == MEMBER else User.Kind.OPERATOR
        user = User(username=username, email=email, tenant=tenant, kind=kind)
        if public_id is not None:  # a fixed id, for the demo that the API docs address
            user.public_id = public_id
        user.set_password(password)
        user.save()
        if role != MEMBER:
            operator_role = Role(role)
            user.groups.add(role_group(operator_role))
            for perm in ROLE_PERMISSIONS[operator_role]:
                assign_perm(f"governance.{perm}", user, tenant)
        audit_record(
            actor=actor,
            action=AuditAction.GOVERNANCE_USER_CREATED,
            tenant_id=tenant.id,
            policy_id=POLICY,
            reason_code=role,
            subject_ids=[user.public_id],
        )
    return CreatedUser(user=user, password=password)


@dataclass(frozen=True)
class CreatedSurfaceClient:
    client: SurfaceClient
    token: str  # shown once; only its hash is stored


def surface_client_create(
    *,
    actor: Actor,
    tenant: Tenant,
    surface: str,
    destination_tier: str = SurfaceClient.DestinationTier.CLOUD,
) -> CreatedSurfaceClient:
    """Register a surface client; `destination_tier` is where its model runs (local or
    cloud), the furthest its recalls may go."""
    if surface not in SURFACES:
        raise ValidationFailed(
            f"Unknown surface {surface!r}.", field="surface", rule="choice", allowed=SURFACES
        )
    tiers = tuple(SurfaceClient.DestinationTier.values)
    if destination_tier not in tiers:
        raise ValidationFailed(
            f"Unknown destination tier {destination_tier!r}.",
            field="destinationTier",
            rule="choice",
            allowed=tiers,
        )
    token = new_token()
    with transaction.atomic(durable=True):
        client = SurfaceClient.objects.create(
            tenant=tenant,
            surface=surface,
            destination_tier=destination_tier,
            token_hash=hash_token(token),
            token_prefix=token[:12],
        )
        audit_record(
            actor=actor,
            action=AuditAction.GOVERNANCE_SURFACE_CLIENT_CREATED,
            tenant_id=tenant.id,
            policy_id=POLICY,
            reason_code=surface,
            subject_ids=[client.id],
            payload={"destinationTier": destination_tier},
        )
    return CreatedSurfaceClient(client=client, token=token)


@dataclass(frozen=True)
class SurfaceClientRevocation:
    client: SurfaceClient
    revoked_now: bool  # False: it was revoked before, and nothing changed


def surface_client_revoke(*, actor: Actor, client_id: uuid.UUID) -> SurfaceClientRevocation:
    """Revoke a surface client's token; its next API request gets 401. Idempotent: a client
    revoked before stays as it was, and no second event is written."""
    with transaction.atomic(durable=True):
        client = SurfaceClient.objects.select_for_update().filter(id=client_id).first()
        if client is None:
            raise NotFound("No such surface client.", code="surface-client-not-found")
        if client.revoked_at is not None:
            return SurfaceClientRevocation(client=client, revoked_now=False)
        client.revoked_at = timezone.now()
        client.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            action=AuditAction.GOVERNANCE_SURFACE_CLIENT_REVOKED,
            tenant_id=client.tenant_id,
            policy_id=POLICY,
            reason_code=client.surface,
            subject_ids=[client.id],
        )
    return SurfaceClientRevocation(client=client, revoked_now=True)
