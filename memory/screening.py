"""Which stored free text each memory operation hands to the secret screen.

Pure: no Django. One function per operation returns every free-text field the operation
would store, by wire path, in wire order; the service passes it to the kernel as
`Operation.texts` and the one screen (`governance.secrets_screen.screen_fields`) decides.
A field added to a write is added here, or the corpus test in
`tests/governance/test_secret_fields.py` fails. Enums, UUIDs, booleans and dates are not
free text; `multiActor.actorName` is never stored (it becomes a keyed handle).
See docs/decisions/hardening-secrets.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The stored free-text fields of each operation, as the wire names them (`[]` is every
# item of a list, `<id>` every scope identifier). Documentation and the tests' checklist.
SCREENED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "memory.write": (
        "body",
        "subject",
        "scope.<id>",
        "scopeKey",
        "sessionId",
        "multiActor.relationshipNote",
        "suppression.notes",
        "provenanceChain[].ref",
    ),
    "memory.correct": ("body", "subject", "multiActor.relationshipNote"),
    "memory.pause": ("notes",),
    "memory.off_the_record": ("sessionId",),
    "memory.conflict_answer": (
        "body",
        "subject",
        "multiActor.relationshipNote",
        "suppression.notes",
        "provenanceChain[].ref",
    ),
    "memory.continuation.write": (
        "scopeKey",
        "surfaceContext.sessionId",
        "surfaceContext.itemId",
        "surfaceContext.mode",
        "anchorRef.ref",
        "deviceId",
    ),
}


# Identifiers the service has already resolved to a member, tenant or operator UUID: not
# free text, and a random UUID's digit runs can look like a card number to the screen.
UUID_IDS = frozenset({"userId", "tenantId", "operatorId"})


def _refs(chain: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {f"provenanceChain[{i}].ref": str(link.get("ref") or "") for i, link in enumerate(chain)}


def write_texts(
    *,
    body: str,
    subject: str,
    session_id: str,
    scope_identifiers: Mapping[str, str],
    relationship_note: str,
    suppression_notes: str,
    provenance: Sequence[Mapping[str, Any]],
) -> dict[str, str]:
    """`memory.write`: everything the new revision stores as text."""
    free = {name: value for name, value in scope_identifiers.items() if name not in UUID_IDS}
    return {
        "body": body,
        "subject": subject,
        **{f"scope.{name}": value for name, value in free.items()},
        # Identifiers are screened one by one; the key joins them, and a credential split
        # across two of them ("password:hunter2") appears only there.
        "scopeKey": ":".join(free.values()),
        "sessionId": session_id,
        "multiActor.relationshipNote": relationship_note,
        "suppression.notes": suppression_notes,
        **_refs(provenance),
    }


def correct_texts(
    *, body: str, subject: str | None, relationship_note: str | None
) -> dict[str, str]:
    """`memory.correct`: the corrected body and whatever else the member rewrote."""
    return {
        "body": body,
        "subject": subject or "",
        "multiActor.relationshipNote": relationship_note or "",
    }


def proposal_texts(proposal: Mapping[str, Any]) -> dict[str, str]:
    """`memory.conflict_answer`: the stored proposal, which "update" writes as it is."""
    suppression = proposal.get("suppression") or {}
    return {
        "body": str(proposal.get("body") or ""),
        "subject": str(proposal.get("subject") or ""),
        "multiActor.relationshipNote": str(proposal.get("relationshipNote") or ""),
        "suppression.notes": str(suppression.get("notes") or ""),
        **_refs(proposal.get("provenanceChain") or ()),
    }


def continuation_texts(draft: Any) -> dict[str, str]:
    """`memory.continuation.write`: the token's references (a `rules.TokenDraft`)."""
    context, anchor = draft.surface_context, draft.anchor_ref
    return {
        "scopeKey": draft.scope_key,
        "surfaceContext.sessionId": context.session_id or "",
        "surfaceContext.itemId": context.item_id or "",
        "surfaceContext.mode": context.mode or "",
        "anchorRef.ref": anchor.ref,
        "deviceId": draft.device_id,
    }
