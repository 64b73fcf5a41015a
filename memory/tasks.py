"""Celery tasks of the memory app: thin wrappers that take ids, reload, and call a job.

Every task is safe to run twice and acks late: a worker killed mid-run leaves the message
unacknowledged, the broker hands it to another worker, and the rerun finishes what is left
(the jobs decide what is due from the stored state; see memory/jobs.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from celery import shared_task

from governance.models import Tenant
from memory import jobs
from memory.recall import snapshot as recall_snapshot

TASK_OPTIONS: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}


@shared_task(name="memory.tasks.cascade_consent_revocation", **TASK_OPTIONS)
def cascade_consent_revocation(
    tenant_id: str,
    member_id: int,
    consent_type: str,
    categories: Iterable[str],
    event_id: str,
    batch: int = jobs.CASCADE_BATCH,
) -> dict[str, int]:
    run = jobs.consent_revocation_cascade(
        tenant_id=uuid.UUID(str(tenant_id)),
        member_id=int(member_id),
        consent_type=consent_type,
        categories=list(categories),
        event_id=event_id,
        batch=batch,
    )
    return dict(run.counts)


def _run_for_tenants(name: str, tenant_id: str | None, batch: int) -> dict[str, Any]:
    """One batch of job `name` for one tenant; without a tenant, one task per tenant
    (jobs take a tenant and a batch, never everything)."""
    if tenant_id is None:
        ids = [str(t) for t in Tenant.objects.order_by("id").values_list("id", flat=True)]
        task = TASKS[name]
        for tid in ids:
            task.apply_async(kwargs={"tenant_id": tid, "batch": batch})
        return {"tenants": len(ids)}
    run = jobs.JOBS[name].run(tenant_id=uuid.UUID(str(tenant_id)), batch=batch)
    return dict(run.counts)


@shared_task(name="memory.tasks.retention", **TASK_OPTIONS)
def retention(tenant_id: str | None = None, batch: int = jobs.DEFAULT_BATCH) -> dict[str, Any]:
    return _run_for_tenants("retention", tenant_id, batch)


@shared_task(name="memory.tasks.purge", **TASK_OPTIONS)
def purge(tenant_id: str | None = None, batch: int = jobs.DEFAULT_BATCH) -> dict[str, Any]:
    return _run_for_tenants("purge", tenant_id, batch)


@shared_task(name="memory.tasks.decay", **TASK_OPTIONS)
def decay(tenant_id: str | None = None, batch: int = jobs.DEFAULT_BATCH) -> dict[str, Any]:
    return _run_for_tenants("decay", tenant_id, batch)


@shared_task(name="memory.tasks.expire", **TASK_OPTIONS)
def expire(tenant_id: str | None = None, batch: int = jobs.DEFAULT_BATCH) -> dict[str, Any]:
    return _run_for_tenants("expire", tenant_id, batch)


@shared_task(name="memory.tasks.prune_recall_changes", **TASK_OPTIONS)
def prune_recall_changes(batch: int = 20_000, batches: int = 250) -> dict[str, int]:
    """Recall's change log past its keep (memory.recall.snapshot), a batch at a time.
    Every recall notes the rows its usage bump touched (about 12): at 300 recalls a second
    that is some 1M rows in five minutes, so a run takes up to 5M."""
    return {"deleted": recall_snapshot.prune_changes(batch=batch, batches=batches)}


TASKS: dict[str, Any] = {
    "retention": retention,
    "purge": purge,
    "decay": decay,
    "expire": expire,
}
