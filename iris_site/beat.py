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
    "continuation-tokens-expire": {
        "task": "memory.continuity.tasks.expire_tokens",
        "schedule": crontab(minute=47),
    },
    # Memory jobs (memory/tasks.py): one batch per tenant per tick.
    "memory-retention": {"task": "memory.tasks.retention", "schedule": crontab(minute=41)},
    "memory-purge": {"task": "memory.tasks.purge", "schedule": crontab(minute="*/30")},
    "memory-decay": {"task": "memory.tasks.decay", "schedule": crontab(minute=17, hour=3)},
    "memory-expire": {"task": "memory.tasks.expire", "schedule": crontab(minute="*/10")},
    "memory-recall-changes": {
        "task": "memory.tasks.prune_recall_changes",
        "schedule": crontab(minute="*/5"),
    },
    # Data-rights jobs (dsar/tasks.py).
    "dsar-expire-unverified": {
        "task": "dsar.tasks.expire_unverified",
        "schedule": crontab(minute=13),
    },
    "dsar-remind-deadlines": {
        "task": "dsar.tasks.remind_deadlines",
        "schedule": crontab(minute=29, hour="*/6"),
    },
    "dsar-requeue-stalled": {
        "task": "dsar.tasks.requeue_stalled",
        "schedule": crontab(minute="*/5"),
    },
    "dsar-expire-bundles": {
        "task": "dsar.tasks.expire_bundles",
        "schedule": crontab(minute="*/10"),
    },
    "dsar-purge-soft-deletions": {
        "task": "dsar.tasks.purge_soft_deletions",
        "schedule": crontab(minute="*/15"),
    },
    # Inspection jobs (inspection/tasks.py): time boxes and the members' notices.
    "inspection-expire-grants": {
        "task": "inspection.tasks.expire_grants",
        "schedule": crontab(minute="*/5"),
    },
    "inspection-expire-pending": {
        "task": "inspection.tasks.expire_pending",
        "schedule": crontab(minute=19),
    },
    "inspection-deliver-notices": {
        "task": "inspection.tasks.deliver_notices",
        "schedule": crontab(minute="*/10"),
    },
    # Events (events/tasks.py): publish committed events, then post what is due.
    "events-dispatch": {"task": "events.tasks.dispatch", "schedule": 15.0},
}
