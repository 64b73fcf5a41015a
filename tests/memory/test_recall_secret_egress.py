"""Issue 19, finding 4, the way out: recall classes an entry by every text it returns, so
a credential stored in any field (by a write older than the screen of every field) never
leaves, and is counted as withheld."""

from __future__ import annotations

import pytest

from memory import screening, services
from memory.services import ProvenanceRef
from tests.factories import NOW, as_member, draft, grant_storage

pytestmark = pytest.mark.django_db

URL = "/api/v1/recall"
TOKEN = "ghp_nPa5lwOo0OpGcSDuJZKMvlsbxFHz9GuXlmPv"  # a fake GitHub token from the corpus


@pytest.mark.parametrize(
    "extra",
    [
        {"subject": f"coffee token {TOKEN}"},
        {
            "provenance_chain": [
                ProvenanceRef(kind="session-turn", ref=f"turn {TOKEN}", captured_at=NOW)
            ]
        },
    ],
    ids=["subject", "provenance-ref"],
)
def test_a_credential_in_any_returned_field_keeps_the_entry_in(
    surface_api, member, monkeypatch, extra
) -> None:
    grant_storage(member)
    # Written as the code before the fix did: only the body was screened.
    monkeypatch.setattr(screening, "write_texts", lambda **fields: {})
    entry = services.memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "I like my coffee black", **extra),
    ).entry
    assert entry is not None
    monkeypatch.undo()

    response = surface_api.post(
        URL,
        {
            "userId": str(member.public_id),
            "scope": {"kind": "profile"},
            "query": "which coffee do I like",
            "surface": "assistant",
            "context": "general",
            "destinationTier": "local",
        },
        format="json",
    )

    assert response.status_code == 200, response.content
    assert TOKEN not in response.content.decode()
    data = response.json()
    assert data["entries"] == []
    assert data["auditEnvelope"]["suppressionCounts"].get("egress-secret-to-local") == 1
