"""The inspection state machine (spec: InspectionStateMachine, TRANSITIONS).

requested → dsar-fulfillment | incident-escalation | routine-review; each path → granted |
denied; granted → closed; denied and closed are terminal. No back-transitions exist: any
other move raises. Plain Python: no Django.
"""

from __future__ import annotations

from governance.rules import RuleError
from inspection.enums import PATHS, InspectionState

S = InspectionState

TRANSITIONS: dict[InspectionState, frozenset[InspectionState]] = {
    S.REQUESTED: PATHS,
    S.DSAR_FULFILLMENT: frozenset({S.GRANTED, S.DENIED}),
    S.INCIDENT_ESCALATION: frozenset({S.GRANTED, S.DENIED}),
    S.ROUTINE_REVIEW: frozenset({S.GRANTED, S.DENIED}),
    S.GRANTED: frozenset({S.CLOSED}),
    S.DENIED: frozenset(),
    S.CLOSED: frozenset(),
}

TERMINAL: frozenset[InspectionState] = frozenset(s for s, moves in TRANSITIONS.items() if not moves)


def is_allowed(current: str, target: str) -> bool:
    try:
        return InspectionState(target) in TRANSITIONS[InspectionState(current)]
    except ValueError:
        return False


def transition(current: str, target: str) -> InspectionState:
    """The target state, or RuleError(field "to", rule "transition-not-allowed") naming the
    moves allowed from `current` (none from a terminal state)."""
    try:
        wanted = InspectionState(target)
    except ValueError:
        raise RuleError(
            "to", "invalid_choice", "to is not an inspection state.", [s.value for s in S]
        ) from None
    allowed = sorted(TRANSITIONS[InspectionState(current)])
    if wanted not in allowed:
        raise RuleError(
            "to",
            "transition-not-allowed",
            f"An inspection that is {current} cannot become {wanted}.",
            allowed,
        )
    return wanted
