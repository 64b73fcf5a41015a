"""Data-rights jobs. Each takes ids, reloads, calls one service and is safe to run twice."""

from __future__ import annotations

import uuid

from celery import shared_task

from dsar import export, jobs, work
from governance.models import Tenant


@shared_task(name="dsar.tasks.process", acks_late=True)
def process(request_id: str) -> str:
    """Carry a verified request through its work (export, deletion, access)."""
    return work.process(uuid.UUID(request_id))


@shared_task(name="dsar.tasks.expire_unverified")
def expire_unverified() -> int:
    return sum(jobs.expire_unverified(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="dsar.tasks.remind_deadlines")
def remind_deadlines() -> int:
    return sum(jobs.remind_deadlines(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="dsar.tasks.requeue_stalled")
def requeue_stalled() -> int:
    """Queue again export and access work that a dead worker left (dsar.export)."""
    return sum(export.requeue_stalled(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="dsar.tasks.expire_bundles")
def expire_bundles() -> int:
    """Delete export bundles whose download window ended (dsar.export)."""
    return sum(export.expire_bundles(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="dsar.tasks.purge_soft_deletions")
def purge_soft_deletions() -> int:
    """Finish soft deletions whose grace window ended (skipping members under a hold)."""
    from dsar.deletion import soft_deletions_purge

    return sum(soft_deletions_purge(tenant=t) for t in Tenant.objects.order_by("slug"))
