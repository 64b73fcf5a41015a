"""A Celery worker killed mid-job (SIGKILL to the worker and its pool child, no warm
shutdown) and a new one started: the job finishes, once, and nothing is lost or done twice.

Each test runs a real `celery worker` on Redis against the test database. The worker
stops for good right after a chosen call of the job has committed (`worker_app`), so the
kill lands between two of the job's transactions every time. Jobs ack late and are given
back to the broker when a worker is lost (`CELERY_TASK_ACKS_LATE`,
`CELERY_TASK_REJECT_ON_WORKER_LOST`); Redis hands an unacknowledged job to the next worker
after its visibility timeout (here a few seconds, `conftest.VISIBILITY`).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from consent.enums import Category, category_consent_type
from dsar import export
from dsar.enums import RequestState
from dsar.models import DataRightsEvent, DataRightsRequest, ExportBundle
from governance.actions import AuditAction
from governance.models import AuditEvent, JobRun
from memory import jobs
from memory.models import MemoryEntry
from memory.tasks import retention
from tests.dsar.export_support import file_request
from tests.factories import NOW, as_system, grant, grant_category, written
from tests.faults.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

HARD_DELETED = AuditAction.MEMORY_ENTRY_HARD_DELETED


def hard_deleted_ids() -> Counter[str]:
    return Counter(
        e.payload["entryId"] for e in AuditEvent.objects.filter(action=HARD_DELETED.value)
    )


def live_ids(member, **filters) -> set:
    return set(
        MemoryEntry.objects.filter(member=member, is_current=True, **filters).values_list(
            "entry_id", flat=True
        )
    )


def test_revocation_cascade_killed_mid_job_finishes_once(require_postgres, worker, ready):
    grant_category(ready, Category.MEDICAL)
    # More than one cascade batch (jobs.CASCADE_BATCH), so the kill falls between two.
    medical = {
        written(ready, f"zq-fault knee visit {i}", category="medical", subject=f"knee {i}").entry_id
        for i in range(jobs.CASCADE_BATCH + 7)
    }
    kept = written(ready, "I prefer green tea", subject="tea").entry_id
    first = worker.start(hang="memory.jobs:memory_hard_delete:1")

    grant(ready, category_consent_type(Category.MEDICAL), status="revoked")

    wait_for(worker.marker.exists, "the worker reached the end of the first batch")
    worker.kill(first)
    # Killed between two batches: the first is gone, the rest still there, the run open.
    assert len(live_ids(ready) & medical) == 7
    assert JobRun.objects.get(job="revocation-cascade").status == "running"

    worker.start()
    wait_for(
        lambda: AuditEvent.objects.filter(action=jobs.CASCADE_ACTION.value).exists(),
        "the restarted worker finished the cascade",
    )
    assert live_ids(ready) == {kept}
    assert MemoryEntry.objects.filter(entry_id__in=medical).count() == 0
    # Each memory deleted and audited exactly once, across the two workers.
    assert hard_deleted_ids() == Counter({str(i): 1 for i in medical})
    assert AuditEvent.objects.filter(action=jobs.CASCADE_ACTION.value).count() == 1
    assert JobRun.objects.filter(job="revocation-cascade", status="done").exists()


def test_data_rights_export_killed_mid_build_resumes_and_completes_once(
    require_postgres, worker, ready, settings, tmp_path
):
    settings.IRIS_EXPORT_DIR = tmp_path / "exports"
    for i in range(3):
        written(ready, f"zq-fault export note {i}", subject=f"note {i}")
    first = worker.start(hang="dsar.export:_progress:1")

    request = file_request(ready, "export")  # the member's session verifies it at once

    wait_for(worker.marker.exists, "the worker finished the export's first section")
    worker.kill(first)
    row = ExportBundle.objects.get(request=request)
    assert row.state == ExportBundle.State.BUILDING and len(row.cursor["sections"]) == 1
    assert DataRightsRequest.objects.get(id=request.id).state == RequestState.IN_PROGRESS

    worker.start()
    # The job comes back to the new worker, which finds the dead build's lease still held
    # and leaves it (a live build is never raced); the beat job `requeue_stalled` breaks the
    # lease once it is past (`export.STALL_AFTER`) and queues the work again.
    wait_for(
        lambda: "succeeded" in worker.log() and "'waiting'" in worker.log(),
        "the restarted worker took the job back and found the lease held",
    )
    after_stall = timezone.now() + export.STALL_AFTER + timedelta(minutes=1)
    assert export.requeue_stalled(tenant=ready.tenant, now=after_stall) == 1

    wait_for(
        lambda: DataRightsRequest.objects.get(id=request.id).state == RequestState.COMPLETED,
        "the export completed",
    )
    done = DataRightsRequest.objects.get(id=request.id)
    row = ExportBundle.objects.get(request=request)
    assert row.state == ExportBundle.State.READY
    assert done.result_fingerprint == row.manifest_sha256
    assert (export.staging_dir() / row.file_name).exists()
    # Resumed, not restarted, and finished once: one build, one completion.
    assert row.cursor["attempts"] == 2
    built = AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_BUILT.value)
    assert built.count() == 1 and built.get().payload["attempts"] == 2
    journal = DataRightsEvent.objects.filter(request=request)
    assert journal.filter(to_state=RequestState.COMPLETED).count() == 1
    assert journal.filter(to_state=RequestState.IN_PROGRESS).count() == 1


def test_retention_killed_mid_run_purges_each_entry_once(require_postgres, worker, ready):
    # Admin-review copies live 30 days; these were written long before today.
    copies = {
        written(
            ready,
            f"zq-fault review copy {i}",
            adapter_scope="admin_review",
            principal=as_system(ready),
            subject=f"copy {i}",
            now=NOW,
        ).entry_id
        for i in range(5)
    }
    kept = written(ready, "I live in Porto", subject="home").entry_id
    first = worker.start(hang="memory.jobs:memory_hard_delete:2")

    retention.apply_async(kwargs={"tenant_id": str(ready.tenant_id), "batch": 50})

    wait_for(worker.marker.exists, "the worker purged two of the copies")
    worker.kill(first)
    assert len(live_ids(ready) & copies) == 3

    worker.start()
    wait_for(lambda: not (live_ids(ready) & copies), "the restarted worker purged the rest")
    wait_for(
        lambda: JobRun.objects.filter(job="retention", status="done").exists(),
        "the rerun recorded its counts",
    )
    assert live_ids(ready) == {kept}
    assert hard_deleted_ids() == Counter({str(i): 1 for i in copies})
    rerun = JobRun.objects.filter(job="retention", status="done").earliest("started_at")
    assert rerun.counts["purged"] == 3 and rerun.counts["remaining"] == 0
