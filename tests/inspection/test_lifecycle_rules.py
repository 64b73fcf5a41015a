"""The inspection state machine, every pair of states (spec: TRANSITIONS)."""

from __future__ import annotations

import itertools

import pytest

from governance.rules import RuleError
from inspection import lifecycle
from inspection.enums import InspectionState as S

LEGAL = {
    (S.REQUESTED, S.DSAR_FULFILLMENT),
    (S.REQUESTED, S.INCIDENT_ESCALATION),
    (S.REQUESTED, S.ROUTINE_REVIEW),
    (S.DSAR_FULFILLMENT, S.GRANTED),
    (S.DSAR_FULFILLMENT, S.DENIED),
    (S.INCIDENT_ESCALATION, S.GRANTED),
    (S.INCIDENT_ESCALATION, S.DENIED),
    (S.ROUTINE_REVIEW, S.GRANTED),
    (S.ROUTINE_REVIEW, S.DENIED),
    (S.GRANTED, S.CLOSED),
}
PAIRS = list(itertools.product(S, S))


def test_there_are_seven_states_and_fortynine_pairs() -> None:
    assert len(S) == 7
    assert len(PAIRS) == 49


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_pair_is_allowed_exactly_when_the_table_says(current: S, target: S) -> None:
    expected = (current, target) in LEGAL
    assert lifecycle.is_allowed(current, target) is expected
    if expected:
        assert lifecycle.transition(current, target) is target
    else:
        with pytest.raises(RuleError) as caught:
            lifecycle.transition(current, target)
        assert caught.value.field == "to"
        assert caught.value.rule == "transition-not-allowed"
        assert set(caught.value.allowed) == {b.value for a, b in LEGAL if a is current}


def test_denied_and_closed_are_terminal_and_nothing_goes_back() -> None:
    assert lifecycle.TERMINAL == {S.DENIED, S.CLOSED}
    order = list(S)
    for current, target in LEGAL:
        assert order.index(target) > order.index(current)
    assert not any(lifecycle.is_allowed(s, S.REQUESTED) for s in S)


def test_an_unknown_state_is_refused() -> None:
    assert not lifecycle.is_allowed("granted", "reopened")
    assert not lifecycle.is_allowed("nowhere", "granted")
    with pytest.raises(RuleError) as caught:
        lifecycle.transition("granted", "reopened")
    assert caught.value.rule == "invalid_choice"
