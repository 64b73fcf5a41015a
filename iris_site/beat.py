"""The periodic schedule. Each job adds its entry here; jobs take a batch, never everything."""

from __future__ import annotations

from celery.schedules import crontab

BEAT_SCHEDULE: dict[str, dict] = {
    "audit-seal": {"task": "governance.tasks.audit_seal", "schedule": 30.0},
    "audit-checkpoint": {
        "task": "governance.tasks.audit_checkpoint",
        "schedule": crontab(minute="*/15"),
    },
    "idempotency-expire": {
        "task": "governance.tasks.idempotency_expire",
        "schedule": crontab(minute=7),
    },
    "approvals-expire": {
        "task": "governance.approvals.expire",
        "schedule": crontab(minute="*/10"),
    },
    "runs-expire": {"task": "governance.runs.expire", "schedule": crontab(minute=23)},
}
