"""Inspection jobs. Each reloads by tenant, calls one job and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from governance.models import Tenant
from inspection import jobs


@shared_task(name="inspection.tasks.expire_grants")
def expire_grants() -> int:
    return sum(jobs.expire_grants(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="inspection.tasks.expire_pending")
def expire_pending() -> int:
    return sum(jobs.expire_pending(tenant=t) for t in Tenant.objects.order_by("slug"))


@shared_task(name="inspection.tasks.deliver_notices", acks_late=True)
def deliver_notices() -> int:
    return sum(jobs.deliver_notices(tenant=t) for t in Tenant.objects.order_by("slug"))
