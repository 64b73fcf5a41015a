"""Raw-JSON calls (so a test can send what the test client's own encoder would refuse:
lone surrogates, 1,000 levels of nesting) and what "nothing happened" compares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rest_framework.test import APIClient

from governance.models import AuditEvent, IdempotencyRecord
from tests.factories import payload

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
):
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


def problem_fields(response) -> set[str]:
    return {e.get("field") for e in response.json().get("errors", [])}


# Valid bodies, which a test then spoils one field at a time.


def token(w: World, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": w.user_id,
        "scopeKey": f"session:{w.user_id}:s-1",
        "surfaceContext": {"surface": "assistant", "sessionId": "s-1"},
        "anchorRef": {"surface": "assistant", "kind": "turn", "ref": "turn-7"},
        "posture": "conversing",
        "deviceId": "phone-1",
        "clientTimestamp": "2025-03-01T12:00:00Z",
    }
    body.update(changes)
    return body


def recall(w: World, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": w.user_id,
        "scope": {"kind": "profile", "userId": w.user_id},
        "query": "home city",
        "surface": "assistant",
        "context": "general",
    }
    body.update(changes)
    return body


def consent(w: World, **changes: Any) -> dict[str, Any]:
    body = {
        "userId": w.user_id,
        "type": "data_processing",
        "status": "granted",
        "legalBasis": "consent",
        "captureMethod": "inline-prompt",
    }
    body.update(changes)
    return body


def write(w: World, **changes: Any) -> dict[str, Any]:
    return {**payload(w.member, body="I like jazz", category="fact"), **changes}
