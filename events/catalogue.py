"""The event catalogue: which audit events become events for the systems around Iris, and
what of them an event may carry (docs/decisions/events.md).

Plain Python over plain values, so the table is tested without a database. An event is
derived from an audit event that the change already records in its own transaction: no
operation can change state without its audit row, so none can forget its event.

An event carries ids, state codes and counts: never a memory body, a subject, a note, a
query, a consent's terms or a secret. Each type names the payload keys it may copy; every
other key of the audit payload is dropped, whatever it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from governance.actions import AuditAction as A


@dataclass(frozen=True)
class EventType:
    name: str
    description: str
    # Audit payload keys copied into the event's `data` (ids, codes, counts only).
    keys: tuple[str, ...]


MEMORY_WRITTEN = EventType(
    "memory.written",
    "A memory was written, corrected or promoted: a new revision is current.",
    ("entryId", "revisionId", "revision", "supersedes", "lifecycle"),
)
MEMORY_FORGOTTEN = EventType(
    "memory.forgotten",
    "A memory was forgotten (soft: tombstoned, its text purged after the grace window; "
    "hard: deleted with every revision at once).",
    ("entryId", "revisionId", "revisionCount"),
)
RECALL_COMPLETED = EventType(
    "recall.completed",
    "A recall answered; `data.returnedIds` names the entries it returned, in order.",
    ("returnedIds", "surface", "scopeKind", "evaluatedCount"),
)
CONSENT_CHANGED = EventType(
    "consent.changed",
    "A member's consent ledger changed: an event was appended (granted, revoked, …) or "
    "events were purged by an erasure.",
    ("kind", "consentType", "status", "position", "cascade", "erasedCount"),
)
DATA_RIGHTS_SUBMITTED = EventType(
    "data_rights.submitted",
    "A member's data-rights request was received.",
    ("requestId", "kind"),
)
DATA_RIGHTS_TRANSITIONED = EventType(
    "data_rights.transitioned",
    "A data-rights request moved along its lifecycle (`from` → `to`).",
    ("requestId", "kind", "from", "to"),
)
INSPECTION_TRANSITIONED = EventType(
    "inspection.transitioned",
    "An operator inspection of a member's memory moved along its state machine (`from` → "
    "`to`; an empty `from` is a new request).",
    ("inspectionId", "from", "to"),
)

EVENT_TYPES: tuple[EventType, ...] = (
    MEMORY_WRITTEN,
    MEMORY_FORGOTTEN,
    RECALL_COMPLETED,
    CONSENT_CHANGED,
    DATA_RIGHTS_SUBMITTED,
    DATA_RIGHTS_TRANSITIONED,
    INSPECTION_TRANSITIONED,
)
EVENT_TYPE_NAMES: tuple[str, ...] = tuple(t.name for t in EVENT_TYPES)


@dataclass(frozen=True)
class Source:
    """How one audit action becomes an event: its type and the `change` it names."""

    event_type: EventType
    change: str


# Audit actions → the event each becomes (`governance.actions` is plain Python). Audit
# actions not listed emit nothing.
SOURCES: Mapping[str, Source] = {
    A.MEMORY_ENTRY_WRITTEN: Source(MEMORY_WRITTEN, "written"),
    A.MEMORY_ENTRY_CORRECTED: Source(MEMORY_WRITTEN, "corrected"),
    A.MEMORY_ENTRY_PROMOTED: Source(MEMORY_WRITTEN, "promoted"),
    A.MEMORY_ENTRY_FORGOTTEN: Source(MEMORY_FORGOTTEN, "soft"),
    A.MEMORY_ENTRY_HARD_DELETED: Source(MEMORY_FORGOTTEN, "hard"),
    A.MEMORY_RECALL_RESOLVED: Source(RECALL_COMPLETED, "resolved"),
    A.CONSENT_EVENT_APPENDED: Source(CONSENT_CHANGED, "appended"),
    A.CONSENT_EVENTS_PURGED: Source(CONSENT_CHANGED, "purged"),
    A.DSAR_REQUEST_SUBMITTED: Source(DATA_RIGHTS_SUBMITTED, "submitted"),
    A.DSAR_REQUEST_TRANSITIONED: Source(DATA_RIGHTS_TRANSITIONED, "transitioned"),
    A.ADMIN_INSPECTION_TRANSITION: Source(INSPECTION_TRANSITIONED, "transitioned"),
}

MAX_DATA_STRING = 100


@dataclass(frozen=True)
class Derived:
    type: str
    member_id: str | None
    data: dict[str, Any]


def _plain(value: Any) -> Any:
    """An id, code or count survives; text-sized strings and nested objects do not."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_DATA_STRING else None
    if isinstance(value, list | tuple):
        return [v for v in (_plain(item) for item in value) if isinstance(v, str | int)]
    return None


def derive(action: str, subject_ids: Sequence[str], payload: Mapping[str, Any]) -> Derived | None:
    """The event an audit event becomes, or None. Every audited member change names the
    member first in `subject_ids` (the apps' audit helpers all do)."""
    source = SOURCES.get(action)
    if source is None:
        return None
    data: dict[str, Any] = {"change": source.change}
    for key in source.event_type.keys:
        if key in payload:
            value = _plain(payload[key])
            if value is not None:
                data[key] = value
    member_id = str(subject_ids[0]) if subject_ids else None
    if source.event_type is RECALL_COMPLETED and "returnedIds" not in data:
        data["returnedIds"] = [str(s) for s in subject_ids[1:]]
    return Derived(source.event_type.name, member_id, data)
