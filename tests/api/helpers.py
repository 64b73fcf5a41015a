"""Raw-JSON calls (so a test can send what the test client's own encoder would refuse:
lone surrogates, 1,000 levels of nesting) and what "nothing happened" compares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rest_framework.test import APIClient

from governance.models import AuditEvent, IdempotencyRecord

PROBLEM = "application/problem+json"


@dataclass
class World:
    member: Any
    entry_id: str
    conflict_id: str

    @property
    def user_id(self) -> str:
        return str(self.member.public_id)


def send(
    client: APIClient,
    method: str,
    url: str,
    body: Any = None,
    *,
    raw: str | None = None,
    key: str | None = None,
):  # type: ignore[no-untyped-def]
    """`body` as JSON text (json.dumps escapes a lone surrogate as `\\ud800`), or `raw`."""
    headers = {"Idempotency-Key": key} if key else {}
    if method in {"get", "delete"} and raw is None and body is not None:
        return getattr(client, method)(url, body, headers=headers)
    text = raw if raw is not None else json.dumps(body)
    return getattr(client, method)(url, text, content_type="application/json", headers=headers)


def snapshot() -> tuple[int, int]:
    """(audit events, idempotency reservations still open)."""
    return (
        AuditEvent.objects.count(),
        IdempotencyRecord.objects.filter(status_code__isnull=True).count(),
    )


def problem_fields(response) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.get("field") for e in response.json().get("errors", [])}
