"""Inspection jobs for beat: close grants that ran out, deny requests nobody reviewed in
time, deliver the notices members are owed.

Each takes one tenant and a batch, acts as Iris itself (a system principal of the tenant),
governs every inspection it moves, and is safe to run twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from governance.actions import AuditAction
from governance.audit import audit_record
from governance.models import Tenant
from governance.pipeline import record_pending
from governance.principal import Principal
from inspection.enums import PATHS, InspectionState, NoticeStatus
from inspection.models import Inspection, InspectionNotice
from inspection.services import POLICY_ID, _allow, _append, _close, _locked

log = logging.getLogger(__name__)

S = InspectionState
# A claimed notice whose worker has not finished within this long is taken over by the
# next run: the worker is presumed dead.
NOTICE_CLAIM_LEASE = timedelta(minutes=15)
MESSAGE_ID_DOMAIN = "notices.iris.invalid"


def expire_grants(*, tenant: Tenant, now: datetime | None = None, batch: int = 200) -> int:
    """Close this tenant's grants past their expiry (reason `grant-expired`); a sensitive
    read queues the member's notice as any close does. Safe to run twice: a closed
    inspection is no longer granted."""
    now = now or timezone.now()
    return _sweep(
        tenant,
        name="inspection.expire_grant",
        waiting=[S.GRANTED.value],
        due=Q(expires_at__lte=now),
        move=lambda system, row: _close(system, row, now=now, reason_code="grant-expired"),
        batch=batch,
    )


def expire_pending(*, tenant: Tenant, now: datetime | None = None, batch: int = 200) -> int:
    """Deny this tenant's requests that waited past their pending window for a reviewer
    (reason `request-expired`). Safe to run twice."""
    now = now or timezone.now()
    return _sweep(
        tenant,
        name="inspection.expire_request",
        waiting=[p.value for p in PATHS],
        due=Q(pending_until__lte=now),
        move=lambda system, row: _append(
            system, row, S.DENIED, now=now, reason_code="request-expired"
        ),
        batch=batch,
    )


def _sweep(
    tenant: Tenant,
    *,
    name: str,
    waiting: list[str],
    due: Q,
    move: Callable[[Principal, Inspection], None],
    batch: int,
) -> int:
    """Move a batch of the tenant's inspections in `waiting` that are `due`, each governed
    as Iris itself and in its own transaction, skipping any that moved meanwhile."""
    system = Principal.system(tenant_id=tenant.id)
    ids = list(
        Inspection.objects.filter(due, tenant_id=tenant.id, state__in=waiting).values_list(
            "id", flat=True
        )[:batch]
    )
    done = 0
    for inspection_id in ids:
        inspection = Inspection.objects.select_related("member").get(
            tenant_id=tenant.id, id=inspection_id
        )
        decided = _allow(
            system,
            name,
            member=inspection.member,
            tenant_id=tenant.id,
            subject_ids=(str(inspection_id),),
        )
        with transaction.atomic(durable=True):
            record_pending(decided)
            inspection = _locked(inspection_id, tenant.id)
            if inspection.state not in waiting:
                continue
            move(system, inspection)
            done += 1
    return done


def deliver_notices(*, tenant: Tenant, now: datetime | None = None, batch: int = 100) -> int:
    """Tell members about sensitive reads: an email (when the member has an address) and
    the line on their access page, each notice exactly once.

    One notice at a time: claim it with a conditional UPDATE (queued, or claimed by a
    worker whose lease ran out), send, then mark it delivered under the same claim. Two
    runs at once never claim the same notice; a run that dies mid-batch leaves at most
    the notice in hand claimed, and the next run after the lease takes it over. The mail
    carries a Message-ID made from the notice id, so the one case no database can close
    (a worker that dies after handing the mail over and before marking it) repeats the
    same message, which mail systems recognise. Returns how many were delivered."""
    now = now or timezone.now()
    system = Principal.system(tenant_id=tenant.id)
    stale = now - NOTICE_CLAIM_LEASE
    claimable = Q(status=NoticeStatus.QUEUED) | Q(
        status=NoticeStatus.SENDING, claimed_at__lte=stale
    )
    ids = list(
        InspectionNotice.objects.filter(claimable, tenant_id=tenant.id)
        .order_by("due_at", "id")
        .values_list("id", flat=True)[:batch]
    )
    delivered = 0
    for notice_id in ids:
        claim = uuid.uuid4()
        claimed = InspectionNotice.objects.filter(
            claimable, tenant_id=tenant.id, id=notice_id
        ).update(
            status=NoticeStatus.SENDING,
            claim_token=claim,
            claimed_at=now,
            attempts=F("attempts") + 1,
        )
        if claimed != 1:
            continue  # another worker has it, or it is done
        notice = InspectionNotice.objects.select_related("member", "inspection").get(
            tenant_id=tenant.id, id=notice_id
        )
        decided = _allow(
            system,
            "inspection.notice_deliver",
            member=notice.member,
            tenant_id=tenant.id,
            subject_ids=(str(notice.inspection_id), str(notice.id)),
        )
        emailed = False
        if notice.member.email:
            try:
                _mail(notice)
                emailed = True
            except Exception:
                # Left claimed: the next run after the lease tries again.
                log.exception("inspection notice %s: the mail could not be sent", notice.id)
                continue
        with transaction.atomic(durable=True):
            record_pending(decided)
            marked = InspectionNotice.objects.filter(
                tenant_id=tenant.id, id=notice_id, claim_token=claim, status=NoticeStatus.SENDING
            ).update(status=NoticeStatus.DELIVERED, delivered_at=now, emailed=emailed)
            if marked != 1:
                # Taken over after our lease ran out; the other worker records it.
                transaction.set_rollback(True)
                continue
            audit_record(
                actor=system.actor,
                action=AuditAction.ADMIN_INSPECTION_NOTICE_DELIVERED,
                tenant_id=tenant.id,
                policy_id=POLICY_ID,
                subject_ids=[notice.member.public_id, notice.inspection_id],
                payload={
                    "inspectionId": str(notice.inspection_id),
                    "noticeId": str(notice.id),
                    "emailed": emailed,
                    "late": now > notice.due_at,
                },
            )
            delivered += 1
    return delivered


def _mail(notice: InspectionNotice) -> None:
    inspection = notice.inspection
    roles = ", ".join(inspection.requester_roles) or "operator"
    granted = inspection.granted_at
    when = f"{granted:%d %B %Y at %H:%M} UTC" if granted else "recently"
    message = EmailMessage(
        subject="Someone at our team looked at your memory",
        body=(
            f"An operator ({roles}) was granted access to part of your memory on {when}, "
            f"for a {inspection.path.replace('-', ' ')}. Because it included sensitive "
            "memory, we are letting you know. You can see every access, and why, on the "
            "'Who looked at my memory' page of your account."
        ),
        to=[notice.member.email],
        headers={"Message-ID": f"<inspection-notice-{notice.id}@{MESSAGE_ID_DOMAIN}>"},
    )
    message.send()
