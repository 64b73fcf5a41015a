"""Continuity jobs. Tasks take ids, reload, call one service, and are safe to run twice."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task
from django.utils import timezone

from governance.after_commit import enqueue
from governance.models import User
from governance.principal import Principal
from memory.continuity import conf, rules, services
from memory.continuity.models import ContinuationToken


@shared_task(name="memory.continuity.tasks.expire_tokens")
def expire_tokens() -> int:
    """Beat entry: one task per tenant that has expired tokens (jobs take a tenant)."""
    cutoff = rules.expiry_cutoff(timezone.now(), conf.token_ttl())
    tenant_ids = (
        ContinuationToken.objects.filter(updated_at__lt=cutoff)
        .order_by()
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    queued = 0
    for tenant_id in tenant_ids:
        expire_tenant_tokens.delay(str(tenant_id))
        queued += 1
    return queued


@shared_task(name="memory.continuity.tasks.expire_tenant_tokens")
def expire_tenant_tokens(tenant_id: str) -> int:
    run = services.continuation_tokens_expire(tenant_id=uuid.UUID(tenant_id))
    return int(run.counts.get("deleted", 0))


@shared_task(name="memory.continuity.tasks.purge_unconsented")
def purge_unconsented(tenant_id: str, member_id: int, categories: list[str]) -> int:
    member = User.objects.filter(tenant_id=tenant_id, pk=member_id).first()
    if member is None:
        return 0
    return services.continuation_tokens_purge_unconsented(
        principal=Principal.system("continuity", tenant_id=member.tenant_id),
        member=member,
        categories=categories,
    )


def on_sensitive_consent_revoked(sender: Any, **kwargs: Any) -> None:
    """`consent.signals.sensitive_consent_revoked` (sent after the revocation committed):
    tokens carrying a revoked category go. Queues the work; changes nothing itself."""
    enqueue(
        purge_unconsented,
        str(kwargs["tenant_id"]),
        int(kwargs["member_id"]),
        list(kwargs.get("categories") or []),
    )
