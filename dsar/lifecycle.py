"""The data-rights lifecycle: which moves are allowed and what a valid trail looks like.

Spec: submitted → verified → in-progress → completed | failed | cancelled | expired |
appealed (ALLOWED_TRANSITIONS). Decisions where the spec is silent are in
docs/decisions/data-rights.md: a request is cancelled only while it waits (submitted or
verified), never once the work started; only an unverified request expires; a finished
request may be appealed, and an appeal is reworked (appealed → in-progress).
Plain Python: no Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dsar.enums import RequestState
from governance.rules import RuleError

S = RequestState

TRANSITIONS: dict[RequestState, frozenset[RequestState]] = {
    S.SUBMITTED: frozenset({S.VERIFIED, S.CANCELLED, S.EXPIRED}),
    S.VERIFIED: frozenset({S.IN_PROGRESS, S.CANCELLED}),
    S.IN_PROGRESS: frozenset({S.COMPLETED, S.FAILED}),
    S.COMPLETED: frozenset({S.APPEALED}),
    S.FAILED: frozenset({S.APPEALED}),
    S.APPEALED: frozenset({S.IN_PROGRESS}),
    S.CANCELLED: frozenset(),
    S.EXPIRED: frozenset(),
}

TERMINAL: frozenset[RequestState] = frozenset(s for s, moves in TRANSITIONS.items() if not moves)


def is_allowed(current: str, target: str) -> bool:
    try:
        return RequestState(target) in TRANSITIONS[RequestState(current)]
    except ValueError:
        return False


def check_transition(current: str, target: str) -> RequestState:
    """The target state, or RuleError(field "to", rule "transition-not-allowed") naming
    the moves allowed from `current`."""
    try:
        wanted = RequestState(target)
    except ValueError:
        raise RuleError("to", "invalid_choice", "to is not a data-rights state.", list(S)) from None
    allowed = sorted(TRANSITIONS[RequestState(current)])
    if wanted not in allowed:
        raise RuleError(
            "to",
            "transition-not-allowed",
            f"A request that is {current} cannot become {wanted}.",
            allowed,
        )
    return wanted


def check_trail(trail: Sequence[tuple[str, datetime]]) -> None:
    """A trail (state, when) starts with `submitted`, follows the table and never goes
    back in time. Raises RuleError on the first step that breaks it."""
    if not trail or trail[0][0] != S.SUBMITTED:
        raise RuleError("trail", "must-start-submitted", "A trail starts with submitted.")
    for (before, at_before), (after, at_after) in zip(trail, trail[1:], strict=False):
        check_transition(before, after)
        if at_after < at_before:
            raise RuleError("trail", "out-of-order", "A trail never goes back in time.")
