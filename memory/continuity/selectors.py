"""Reads of continuation tokens. Tenant first, then the member the caller resolved."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Q

from consent.enums import ConsentType, OptOutCategory
from consent.selectors import current_consent_event_id, opted_out_categories
from governance.models import User
from governance.principal import Principal
from memory.continuity.models import ContinuationToken


def sync_opted_out(member: User) -> bool:
    opted = opted_out_categories(tenant_id=member.tenant_id, member=member)
    return OptOutCategory.CROSS_DEVICE_SYNC.value in opted


def current_cross_device_grant(member: User) -> uuid.UUID | None:
    return current_consent_event_id(
        tenant_id=member.tenant_id, member=member, consent_type=ConsentType.CROSS_DEVICE.value
    )


@dataclass(frozen=True)
class RecentTokens:
    tokens: list[ContinuationToken]
    # Some stored sensitive token no longer has current cross-device consent: the caller
    # should have it deleted (`services.continuation_tokens_purge_unconsented`).
    has_unconsented: bool


def continuation_tokens_recent(
    *, principal: Principal, member: User, surface: str | None, limit: int
) -> RecentTokens:
    """The member's most recent tokens, newest write first, that may be handed to another
    device: tokens with sensitive categories only under the current cross-device grant.
    Nothing at all while the member has cross-device sync switched off.

    Caller has resolved `member` within `principal`'s reach (`member_for`).
    """
    if sync_opted_out(member):
        return RecentTokens([], has_unconsented=False)
    current = current_cross_device_grant(member)
    rows = ContinuationToken.objects.filter(tenant_id=member.tenant_id, member=member)
    if surface is not None:
        rows = rows.filter(surface=surface)
    visible = Q(is_sensitive=False)
    if current is not None:
        visible |= Q(cross_device_consent_id=current)
    tokens = list(rows.filter(visible).order_by("-updated_at", "-id")[:limit])
    hidden = rows.filter(is_sensitive=True)
    if current is not None:
        hidden = hidden.exclude(cross_device_consent_id=current)
    return RecentTokens(tokens, has_unconsented=hidden.exists())
