"""Reads of data-rights requests and holds, tenant first."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from dsar import deadlines
from dsar.enums import OPEN_STATES, Jurisdiction
from dsar.models import DataRightsRequest, LegalHold, TenantDataRightsPolicy
from governance.models import User
from governance.principal import Principal
from governance.roles import Role


def jurisdiction_of(tenant_id: uuid.UUID) -> str:
    policy = TenantDataRightsPolicy.objects.filter(tenant_id=tenant_id).first()
    return policy.jurisdiction if policy else Jurisdiction.GDPR.value


def clock_of(request: DataRightsRequest) -> deadlines.Clock:
    return deadlines.clock_for(request.jurisdiction, request.received_at)


def is_legal(principal: Principal) -> bool:
    return principal.kind == "operator" and Role.LEGAL.value in principal.roles


def open_request_of(member: User, kind: str) -> DataRightsRequest | None:
    return (
        DataRightsRequest.objects.filter(
            tenant_id=member.tenant_id,
            member=member,
            kind=kind,
            state__in=[s.value for s in OPEN_STATES],
        )
        .order_by("received_at")
        .first()
    )


def active_hold(member: User) -> LegalHold | None:
    return (
        LegalHold.objects.filter(tenant_id=member.tenant_id, member=member, lifted_at__isnull=True)
        .order_by("placed_at")
        .first()
    )


def hold_applies(*, member: User) -> bool:
    return active_hold(member) is not None


def member_requests(*, member: User) -> list[DataRightsRequest]:
    return list(
        DataRightsRequest.objects.filter(tenant_id=member.tenant_id, member=member)
        .select_related("member")
        .order_by("-received_at")
    )


def open_queue(*, tenant_id: uuid.UUID) -> QuerySet[DataRightsRequest]:
    """The legal queue: open requests of one tenant, soonest due first."""
    return (
        DataRightsRequest.objects.filter(
            tenant_id=tenant_id, state__in=[s.value for s in OPEN_STATES]
        )
        .select_related("member")
        .order_by("due_at", "received_at")
    )
