from __future__ import annotations

from celery import shared_task

from governance import audit, idempotency


@shared_task(name="governance.tasks.ping")
def ping(value: str) -> str:
    return f"pong:{value}"


@shared_task(name="governance.tasks.audit_seal")
def audit_seal() -> int:
    return audit.seal_pending(blocking=True, full=True)


@shared_task(name="governance.tasks.audit_checkpoint")
def audit_checkpoint() -> int:
    return audit.write_checkpoint()


@shared_task(name="governance.tasks.idempotency_expire")
def idempotency_expire() -> int:
    return idempotency.expire_records()
