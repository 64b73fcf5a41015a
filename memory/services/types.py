"""What callers hand the memory services and what they get back: drafts, corrections,
provenance links, outcomes, and the limits that bound them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from consent.enums import (
    AdapterScope,
)
from memory.enums import (
    Origin,
)
from memory.models import (
    MemoryEntry,
    PendingConflict,
)
from memory.rules.conflicts import (
    Authority,
    authority_of,
)
from memory.rules.promotion import (
    PromotionDecision,
)

POLICY_ID = "iris-memory-v1"


# How long a conflict question waits for the member before the proposal is dropped.
CONFLICT_TTL = timedelta(days=7)


IDENTIFIER_MAX_LENGTH = 128


PROVENANCE_REF_MAX_LENGTH = 200


PROVENANCE_MAX_LINKS = 50


ACTOR_NAME_MAX_LENGTH = 200


# The member's own word (stated or confirmed), as the conflict ladder weighs origins.
MEMBER_WORD_ORIGINS = frozenset(
    o for o in Origin if authority_of(o) in (Authority.EXPLICIT, Authority.CONFIRMED)
)


# Derived text (inference, summary, import): such a write never re-creates a value the
# member forgot or refused (DESIGN invariant 2).
REPLAYED_ORIGINS = frozenset(o for o in Origin if authority_of(o) is Authority.INFERRED)


CONFLICT_ANSWERS: tuple[str, ...] = ("update", "keep")


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ActorMention:
    """A person the memory mentions. Send the name (never stored: it becomes a handle in
    the member's namespace) or a handle the namespace already holds, not both."""

    relationship_note: str = ""
    sensitive_interaction: bool = False
    actor_name: str | None = None
    actor_handle: str | None = None


@dataclass(frozen=True)
class SuppressionMarker:
    reason: str
    started_at: datetime
    ends_at: datetime | None = None
    notes: str = ""


@dataclass(frozen=True)
class ProvenanceRef:
    kind: str
    ref: str
    captured_at: datetime


@dataclass(frozen=True)
class MemoryDraft:
    """What a surface or a page asks Iris to remember (the write half of the contract).

    `adapter_scope` picks the policy-and-retention scope; it defaults to the kind's
    default adapter scope and must map onto `scope_kind`. `session_id` is the session the
    write came from (defaults to the scope's `sessionId`): off-the-record and inference
    counting key on it. `subject` defaults to `derive_subject(body)`.
    """

    scope_kind: str
    scope_identifiers: Mapping[str, Any]
    category: str
    body: str
    origin: str
    subject: str | None = None
    adapter_scope: str | None = None
    session_id: str | None = None
    multi_actor: ActorMention | None = None
    suppression: SuppressionMarker | None = None
    provenance_chain: Sequence[ProvenanceRef] = ()


@dataclass(frozen=True)
class Correction:
    """A member's correction; `None` leaves a field as it is."""

    body: str | None = None
    subject: str | None = None
    category: str | None = None
    relationship_note: str | None = None
    sensitive_interaction: bool | None = None


# ---------------------------------------------------------------------------- outcomes

WriteStatus = Literal["written", "conflict", "not-written"]


@dataclass(frozen=True)
class WriteOutcome:
    """What a write did. `written`: `entry` is the new current revision. `conflict`: the
    member must answer `conflict` first (HTTP 409). `not-written`: nothing was stored, for
    `reason`; `entry` is the stored memory the write met, if any."""

    status: WriteStatus
    reason: str
    entry: MemoryEntry | None = None
    conflict: PendingConflict | None = None
    question: str | None = None
    notes: tuple[str, ...] = ()
    promotion: PromotionDecision | None = None
    distinct_sessions: int | None = None

    @property
    def written(self) -> bool:
        return self.status == "written"


@dataclass(frozen=True)
class HardDeleteResult:
    entry_ids: tuple[uuid.UUID, ...]
    revision_count: int
    remaining: bool  # more entries matched than `limit` allowed; call again

    @property
    def counts(self) -> dict[str, int]:
        """What the side-effect ledger records for the call."""
        return {"entries": len(self.entry_ids), "revisions": self.revision_count}


@dataclass(frozen=True)
class ClearResult:
    """What `memory_clear` forgot: the entries it tombstoned, all at one moment."""

    entry_ids: tuple[uuid.UUID, ...]
    category: str | None
    forgotten_at: datetime

    @property
    def counts(self) -> dict[str, int]:
        return {"entries": len(self.entry_ids)}


@dataclass(frozen=True)
class ActorsForgetResult:
    actor_handle: str
    entry_ids: tuple[uuid.UUID, ...]
    handle_removed: bool

    @property
    def counts(self) -> dict[str, int]:
        return {"entries": len(self.entry_ids), "handles": int(self.handle_removed)}


# --------------------------------------------------------------------- the write gate


@dataclass(frozen=True)
class WriteGate:
    """The facts the memory write gate decides on, computed once per write."""

    adapter_scope: AdapterScope
    scope_enabled: bool
    scope_mode: str
    scope_notes: tuple[str, ...]
    consumer_allowed: bool
    sensitive: bool
    sensitive_consent: bool

    def as_attributes(self) -> dict[str, Any]:
        return {
            "adapterScope": self.adapter_scope.value,
            "scopeEnabled": self.scope_enabled,
            "scopeMode": self.scope_mode,
            "scopeNotes": list(self.scope_notes),
            "consumerAllowed": self.consumer_allowed,
            "sensitive": self.sensitive,
            "sensitiveConsent": self.sensitive_consent,
        }
