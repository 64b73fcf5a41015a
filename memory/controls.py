"""Who may lift a member's privacy controls: a pause, off the record.

A control records who set it (`lifter_of`). The member owns their memory and may lift any
control on it, whoever set it; a surface, an operator or a job may lift only a control it
set itself. A control without a record (set before this rule) counts as the member's, so
no surface can lift it. The refusal is a governance decision (`ControlOwnerGate`), so it
is on record as a deny with its reason, like every other refusal (DESIGN invariant 8).
See docs/decisions/hardening-controls.md.
"""

from __future__ import annotations

from typing import ClassVar

from governance.errors import Forbidden
from governance.pipeline import Check, Decision, Hook, Operation, Verdict
from governance.principal import Principal

MEMBER = "member"
# The operation attribute a lift carries: who set the control being lifted.
SET_BY_ATTRIBUTE = "controlSetBy"
SET_BY_MEMBER = "control-set-by-member"
SET_BY_OTHER = "control-set-by-another-caller"


def lifter_of(principal: Principal) -> str:
    """What a control records about who set it: ids and names only, no content."""
    if principal.kind == "member":
        return MEMBER
    if principal.kind == "surface":
        return f"surface:{principal.surface}"
    return f"{principal.kind}:{principal.id}"


def refusal(set_by: str | None, principal: Principal) -> str | None:
    """Pure rule: None if `principal` may lift a control `set_by` set, else the reason."""
    lifter = lifter_of(principal)
    if lifter == MEMBER:
        return None
    owner = set_by or MEMBER
    if owner == lifter:
        return None
    return SET_BY_MEMBER if owner == MEMBER else SET_BY_OTHER


_DETAIL = {
    SET_BY_MEMBER: "The member set this; only the member can lift it.",
    SET_BY_OTHER: "Another caller set this; only that caller or the member can lift it.",
}


def refused(reason: str) -> Forbidden:
    """The same refusal, for a control that changed hands after governance allowed."""
    return Forbidden(_DETAIL[reason], code=reason)


class ControlOwnerGate(Check):
    """Refuses a lift of a pause or of off the record by a caller that did not set it.
    Decides only operations that carry `controlSetBy` (built by `memory.services`)."""

    name = "control-owner"
    priority = 15
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if SET_BY_ATTRIBUTE not in op.attributes:
            return None
        reason = refusal(op.attributes[SET_BY_ATTRIBUTE], op.principal)
        if reason is None:
            return None
        return Decision(self.name, Verdict.DENY, reason, _DETAIL[reason])
