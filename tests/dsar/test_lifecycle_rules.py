"""The data-rights state table, every pair, and what a valid trail is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsar.enums import RequestState
from dsar.lifecycle import TERMINAL, check_trail, check_transition, is_allowed
from governance.rules import RuleError

S = RequestState

# The spec's table as Iris reads it (docs/decisions/data-rights.md, "Lifecycle").
ALLOWED = {
    (S.SUBMITTED, S.VERIFIED),
    (S.SUBMITTED, S.CANCELLED),
    (S.SUBMITTED, S.EXPIRED),
    (S.VERIFIED, S.IN_PROGRESS),
    (S.VERIFIED, S.CANCELLED),
    (S.IN_PROGRESS, S.COMPLETED),
    (S.IN_PROGRESS, S.FAILED),
    (S.COMPLETED, S.APPEALED),
    (S.FAILED, S.APPEALED),
    (S.APPEALED, S.IN_PROGRESS),
}


@pytest.mark.parametrize(("current", "target"), list(product(S, S)))
def test_every_pair_is_allowed_exactly_when_the_table_says(current, target):
    expected = (current, target) in ALLOWED
    assert is_allowed(current, target) is expected
    if expected:
        assert check_transition(current, target) is target
    else:
        with pytest.raises(RuleError) as refused:
            check_transition(current, target)
        assert refused.value.field == "to"
        assert refused.value.rule == "transition-not-allowed"


def test_cancelled_and_expired_are_terminal():
    assert TERMINAL == {S.CANCELLED, S.EXPIRED}


def test_an_unknown_state_is_refused_with_the_states_allowed():
    with pytest.raises(RuleError) as refused:
        check_transition("submitted", "done")
    assert refused.value.rule == "invalid_choice"
    assert "verified" in refused.value.allowed


T0 = datetime(2026, 1, 31, 12, tzinfo=UTC)


def test_a_trail_must_start_submitted():
    with pytest.raises(RuleError) as refused:
        check_trail([(S.VERIFIED, T0)])
    assert refused.value.rule == "must-start-submitted"


def test_a_trail_never_goes_back_in_time():
    with pytest.raises(RuleError) as refused:
        check_trail([(S.SUBMITTED, T0), (S.VERIFIED, T0 - timedelta(seconds=1))])
    assert refused.value.rule == "out-of-order"


@given(st.lists(st.sampled_from(list(S)), min_size=1, max_size=8))
def test_a_trail_is_valid_exactly_when_each_step_is_in_the_table(states):
    trail = [(s, T0 + timedelta(minutes=i)) for i, s in enumerate(states)]
    valid = states[0] == S.SUBMITTED and all(
        (a, b) in ALLOWED for a, b in zip(states, states[1:], strict=False)
    )
    if valid:
        check_trail(trail)
    else:
        with pytest.raises(RuleError):
            check_trail(trail)
