"""Reading events: the replay a consumer pages through by cursor, and what is due."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from events.models import Delivery, Event

MAX_LIMIT = 500
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class EventPage:
    events: list[Event]
    next_cursor: int
    has_more: bool


def events_after(*, tenant_id: uuid.UUID, after: int, limit: int) -> EventPage:
    """The tenant's published events with a cursor above `after`, oldest first. The caller
    has checked that the reader belongs to `tenant_id`."""
    rows = list(
        Event.objects.filter(tenant_id=tenant_id, cursor__gt=after).order_by("cursor")[: limit + 1]
    )
    page = rows[:limit]
    return EventPage(
        events=page,
        next_cursor=page[-1].cursor if page and page[-1].cursor else after,
        has_more=len(rows) > limit,
    )


def due_deliveries(*, now: datetime | None = None, batch: int = 200) -> list[str]:
    """Ids of pending deliveries whose next attempt is due, oldest first."""
    now = now or timezone.now()
    ids = (
        Delivery.objects.filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:batch]
    )
    return [str(i) for i in ids]
