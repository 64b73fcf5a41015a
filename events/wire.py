"""An event as consumers see it, in a webhook body and in `GET /api/v1/events`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from events.models import Event


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def event_body(event: Event) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "type": event.type,
        "cursor": event.cursor,
        "tenantId": str(event.tenant_id),
        "userId": str(event.member_id) if event.member_id else None,
        "occurredAt": _iso(event.occurred_at),
        "data": event.data,
    }


def encode(body: dict[str, Any]) -> bytes:
    """The exact bytes posted (and signed): compact JSON, keys sorted."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
