"""Data-rights jobs for beat: expire unverified requests, remind the legal queue.

Each takes one tenant and a batch, governs every request it moves as Iris itself, and is
safe to run twice.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from dsar import deadlines
from dsar.enums import OPEN_STATES, RequestState
from dsar.models import DataRightsRequest
from dsar.services import _append, _audit, _govern, _locked
from governance.actions import AuditAction
from governance.after_commit import after_commit
from governance.models import Tenant, User
from governance.pipeline import record_pending
from governance.principal import Principal
from governance.roles import Role

S = RequestState


def expire_unverified(*, tenant: Tenant, now: datetime | None = None, batch: int = 200) -> int:
    """Expire this tenant's requests still unverified past `verify_by` (7 days). Safe to
    run twice: an expired request is no longer submitted."""
    now = now or timezone.now()
    system = Principal.system(tenant_id=tenant.id)
    ids = list(
        DataRightsRequest.objects.filter(
            tenant_id=tenant.id, state=S.SUBMITTED, verify_by__lte=now
        ).values_list("id", flat=True)[:batch]
    )
    done = 0
    for request_id in ids:
        request = DataRightsRequest.objects.select_related("member").get(
            tenant_id=tenant.id, id=request_id
        )
        decided: list[dict[str, Any]] = []
        _govern(
            system,
            request.member,
            "dsar.expire",
            subject_ids=(str(request.id),),
            pending=decided,
        )
        with transaction.atomic(durable=True):
            record_pending(decided)
            request = _locked(request_id, tenant.id)
            if request.state != S.SUBMITTED:
                continue
            _append(system, request, S.EXPIRED, now=now, reason_code="verification-window-passed")
            done += 1
    return done


def remind_deadlines(*, tenant: Tenant, now: datetime | None = None, batch: int = 200) -> int:
    """Flag open requests within `deadlines.REMINDER_LEAD` of their deadline (or past it)
    to the legal queue: once per request, by email to the tenant's legal operators and as
    an audit event the queue shows. Safe to run twice."""
    now = now or timezone.now()
    system = Principal.system(tenant_id=tenant.id)
    rows = list(
        DataRightsRequest.objects.select_related("member").filter(
            tenant_id=tenant.id,
            state__in=[s.value for s in OPEN_STATES],
            reminded_at__isnull=True,
            due_at__lte=now + deadlines.REMINDER_LEAD,
        )[:batch]
    )
    for request in rows:
        decided: list[dict[str, Any]] = []
        _govern(
            system,
            request.member,
            "dsar.remind",
            subject_ids=(str(request.id),),
            pending=decided,
        )
        with transaction.atomic(durable=True):
            record_pending(decided)
            flagged = DataRightsRequest.objects.filter(
                tenant_id=tenant.id, id=request.id, reminded_at__isnull=True
            ).update(reminded_at=now)
            if not flagged:
                continue
            _audit(
                system,
                request,
                AuditAction.DSAR_REQUEST_REMINDED,
                payload={"dueAt": request.due_at.isoformat()},
            )
            after_commit(_mail_legal_reminder, tenant.id, request.id)
    return len(rows)


def _mail_legal_reminder(tenant_id: uuid.UUID, request_id: uuid.UUID) -> None:
    addresses = sorted(
        User.objects.filter(
            tenant_id=tenant_id, kind=User.Kind.OPERATOR, groups__name=Role.LEGAL.value
        )
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if not addresses:
        return
    request = DataRightsRequest.objects.get(tenant_id=tenant_id, id=request_id)
    send_mail(
        "A data-rights request is due soon",
        f"Request {request.id} ({request.kind}) is due by {request.due_at:%d %B %Y %H:%M} UTC.",
        None,
        addresses,
    )
