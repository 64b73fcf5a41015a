"""Memory use cases: the only code that writes memory rows.

Each public function is keyword-only, takes the acting principal, validates its input
(nothing is written for bad input), asks the governance kernel (`govern`, outside the
transaction so a refusal stays on record), then opens one durable transaction in which it
writes the revision rows and their audit events. The rules themselves live in the pure
modules of `memory.rules`: scopes, conflicts, promotion, masking, retention.

The package is split by use case: `write` (assertions, inferences, conflict questions),
`conflicts` (answering them), `revisions` (correct, confirm), `lifecycle` (forget, pause,
resume, scope moves), `off_the_record`, `actors`, `deletion`; `common` holds what they all
share and `types` what callers pass in and get back. Import from the package.

Revisions are immutable (DESIGN invariant 2): a change inserts a new revision and flips
its predecessor to `superseded`, which is the only update an old revision ever gets.
`tombstoned` is terminal. Audit events carry ids, revision numbers, codes and keyed
SHA-256 fingerprints; never a body, a note or a name. Like the consent ledger, they do not
name a sensitive category either (that a member has health memory is health data).

Callers resolve `member` first (`governance.selectors.member_for`), so every function
here works inside one tenant and one member.
"""

from memory.services.actors import actor_handle_for, actors_forget
from memory.services.common import MemoryWriteGate
from memory.services.conflicts import memory_conflict_answer, pending_conflicts_expire
from memory.services.deletion import memory_hard_delete
from memory.services.lifecycle import (
    memory_change_scope,
    memory_clear,
    memory_forget,
    memory_pause,
    memory_restore,
    memory_resume,
)
from memory.services.off_the_record import off_the_record_set
from memory.services.revisions import memory_confirm, memory_correct
from memory.services.types import (
    CONFLICT_ANSWERS,
    ActorMention,
    ActorsForgetResult,
    ClearResult,
    Correction,
    HardDeleteResult,
    MemoryDraft,
    ProvenanceRef,
    SuppressionMarker,
    WriteGate,
    WriteOutcome,
)
from memory.services.write import memory_write

__all__ = [
    "CONFLICT_ANSWERS",
    "ActorMention",
    "ActorsForgetResult",
    "ClearResult",
    "Correction",
    "HardDeleteResult",
    "MemoryDraft",
    "MemoryWriteGate",
    "ProvenanceRef",
    "SuppressionMarker",
    "WriteGate",
    "WriteOutcome",
    "actor_handle_for",
    "actors_forget",
    "memory_change_scope",
    "memory_clear",
    "memory_confirm",
    "memory_conflict_answer",
    "memory_correct",
    "memory_forget",
    "memory_hard_delete",
    "memory_pause",
    "memory_restore",
    "memory_resume",
    "memory_write",
    "off_the_record_set",
    "pending_conflicts_expire",
]
