"""Reads of data-rights requests, tenant first."""

from __future__ import annotations

from django.db.models import QuerySet

from dsar.enums import OPEN_STATES
from dsar.models import DataRightsRequest, LegalHold
from governance.models import User


def member_requests(*, member: User) -> list[DataRightsRequest]:
    return list(
        DataRightsRequest.objects.filter(tenant_id=member.tenant_id, member=member)
        .select_related("member")
        .order_by("-received_at")
    )


def open_queue(*, tenant_id) -> QuerySet[DataRightsRequest]:
    """The legal queue: open requests of one tenant, soonest due first."""
    return (
        DataRightsRequest.objects.filter(
            tenant_id=tenant_id, state__in=[s.value for s in OPEN_STATES]
        )
        .select_related("member")
        .order_by("due_at", "received_at")
    )


def hold_applies(*, member: User) -> bool:
    return LegalHold.objects.filter(
        tenant_id=member.tenant_id, member=member, lifted_at__isnull=True
    ).exists()
