"""How the suites talk to Iris: through the REST API, as a surface or a member does."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from tests.evals.generators import Fact

RECALL = "/api/v1/recall"
MEMORIES = "/api/v1/memories"


def scope_body(kind: str = "profile", **identifiers: str) -> dict[str, str]:
    return {"kind": kind, **identifiers}


def remember(
    client: APIClient,
    member: Any,
    fact: Fact,
    *,
    kind: str = "profile",
    origin: str = "user-stated",
    **fields: Any,
) -> str:
    """Write `fact` for `member` (in `kind`, with identifiers from `fields["ids"]`); its
    entry id. Fails the test unless the memory was stored."""
    ids = fields.pop("ids", {})
    body = {
        "userId": str(member.public_id),
        "scope": {"kind": kind, "userId": str(member.public_id), **ids},
        "category": fact.category,
        "body": fact.body,
        "origin": origin,
        **fields,
    }
    answer = client.post(MEMORIES, body, format="json")
    assert answer.status_code == 201, (fact.key, answer.status_code, answer.content)
    return str(answer.json()["id"])


def ask(
    client: APIClient,
    member: Any,
    query: str,
    *,
    scope: dict[str, str] | None = None,
    context: str = "general",
    surface: str = "assistant",
    **fields: Any,
):
    """POST /recall for `member`; the response (status not checked)."""
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scope": scope or scope_body(),
        "query": query,
        "surface": surface,
        "context": context,
        "destinationTier": "local",
        **fields,
    }
    return client.post(RECALL, body, format="json")


def recalled(answer) -> list[str]:
    """The entry ids a 200 recall answer returned, in rank order."""
    assert answer.status_code == 200, answer.content
    return [e["entry"]["id"] for e in answer.json()["entries"]]


def leaked(answer, canaries: set[str]) -> set[str]:
    """The canaries found anywhere in an answer's bytes."""
    text = answer.content.decode()
    return {c for c in canaries if c in text}


def place(
    user: str,
    *,
    surface: str = "assistant",
    scope_key: str | None = None,
    anchor: dict[str, Any] | None = None,
    posture: str = "conversing",
    device: str = "phone-1",
    at: str = "2026-03-01T12:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    """A continuation-token body: where the member is in `surface`'s content."""
    return {
        "userId": user,
        "scopeKey": scope_key or f"session:{user}:s-1",
        "surfaceContext": {"surface": surface},
        "anchorRef": {"surface": surface, **(anchor or {"kind": "turn", "ref": "turn-3"})},
        "posture": posture,
        "deviceId": device,
        "clientTimestamp": at,
        **extra,
    }


def consent(client: APIClient, user: str, consent_type: str, status: str = "granted"):
    """Record a consent event through the API as the member's surface; the response."""
    sensitive = consent_type.startswith("category:")
    body = {
        "userId": user,
        "type": consent_type,
        "status": status,
        "legalBasis": "explicit_consent" if sensitive else "consent",
        "captureMethod": "inline-prompt",
    }
    answer = client.post("/api/v1/consents", body, format="json")
    assert answer.status_code == 201, answer.content
    return answer
