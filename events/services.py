"""Declaring webhook endpoints: every change governed and audited in one transaction.

The signing secret is generated here, sealed in the vault (MultiFernet under the master
key, re-encrypted by `rotate_keys` like every other secret) and returned once; the
endpoint keeps only its `vault://` handle. The audit records ids, the host and the event
types, never the secret or the full URL (a path can carry a consumer's own token).
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from events import conf
from events.catalogue import EVENT_TYPE_NAMES
from events.models import WebhookEndpoint
from events.outbox import forget_endpoint_cache
from events.rules import check_event_types, check_url
from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import Forbidden, NotFound, invalid
from governance.models import Tenant
from governance.pipeline import Effect, Hook, Operation, govern, record_pending
from governance.principal import Principal
from governance.roles import Role
from governance.rules import RuleError
from governance.vault import vault_put

POLICY_ID = "iris-events-webhooks-v1"
SECRET_PURPOSE = "webhook-signing"  # noqa: S105 - a purpose code
SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, so a leaked secret is recognisable


@dataclass(frozen=True)
class CreatedWebhook:
    endpoint: WebhookEndpoint
    secret: str  # shown once, to whoever declared the endpoint


def _may_manage(principal: Principal, tenant: Tenant) -> None:
    if principal.kind == "system":
        return
    if principal.kind == "operator" and Role.ADMIN.value in principal.roles:
        return
    raise Forbidden("Only an administrator declares webhooks.", code="webhooks-admin-only")


def _govern(
    principal: Principal, tenant: Tenant, name: str, subject_ids: tuple[str, ...]
) -> list[dict]:
    pending: list[dict] = []
    govern(
        Hook.PRE_WRITE,
        Operation(
            name=name,
            effect=Effect.WRITE,
            principal=principal,
            tenant_id=tenant.id,
            subject_ids=subject_ids,
        ),
        pending=pending,
    )
    return pending


def _audit(
    principal: Principal,
    endpoint: WebhookEndpoint,
    action: AuditAction,
    payload: dict[str, object] | None = None,
) -> None:
    audit_record(
        actor=principal.actor,
        action=action,
        tenant_id=endpoint.tenant_id,
        policy_id=POLICY_ID,
        subject_ids=[endpoint.id],
        payload=payload,
    )


def webhook_create(
    *, principal: Principal, tenant: Tenant, url: str, event_types: list[str] | str
) -> CreatedWebhook:
    """Declare an endpoint; its URL must pass the allow-list now and at every delivery."""
    _may_manage(principal, tenant)
    try:
        target = check_url(
            url, allowed_hosts=conf.allowed_hosts(), http_loopback=conf.http_loopback()
        )
        types = check_event_types(event_types, EVENT_TYPE_NAMES)
    except RuleError as exc:
        raise invalid(exc) from None
    endpoint_id = uuid.uuid4()
    decided = _govern(principal, tenant, "events.webhook_create", (str(endpoint_id),))
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        record_pending(decided)
        handle = vault_put(
            tenant=tenant, owner=None, purpose=SECRET_PURPOSE, value=secret, actor=principal.actor
        )
        endpoint = WebhookEndpoint.objects.create(
            id=endpoint_id,
            tenant=tenant,
            url=target.url,
            host=target.host,
            event_types=list(types),
            secret_handle=handle,
        )
        _audit(
            principal,
            endpoint,
            AuditAction.GOVERNANCE_WEBHOOK_CREATED,
            {"host": target.host, "eventTypes": list(types)},
        )
    forget_endpoint_cache(tenant.id)
    return CreatedWebhook(endpoint=endpoint, secret=secret)


def webhook_deactivate(
    *, principal: Principal, tenant: Tenant, endpoint_id: uuid.UUID | str
) -> WebhookEndpoint:
    """Switch an endpoint off: nothing more is posted to it, pending deliveries included.
    Idempotent: an endpoint already off stays as it was, with no second event."""
    _may_manage(principal, tenant)
    try:
        key = uuid.UUID(str(endpoint_id))
    except ValueError:
        raise NotFound("No such webhook.", code="webhook-not-found") from None
    decided = _govern(principal, tenant, "events.webhook_deactivate", (str(key),))
    with transaction.atomic(durable=True):
        record_pending(decided)
        endpoint = WebhookEndpoint.objects.select_for_update().filter(tenant=tenant, id=key).first()
        if endpoint is None:
            raise NotFound("No such webhook.", code="webhook-not-found")
        if not endpoint.active:
            return endpoint
        endpoint.active = False
        endpoint.deactivated_at = timezone.now()
        endpoint.save(update_fields=["active", "deactivated_at"])
        _audit(principal, endpoint, AuditAction.GOVERNANCE_WEBHOOK_DEACTIVATED)
    forget_endpoint_cache(tenant.id)
    return endpoint
