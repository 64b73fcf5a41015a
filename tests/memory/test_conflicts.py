from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.enums import Origin
from memory.rules.conflicts import (
    ConflictResolution,
    ConflictRule,
    ConflictSide,
    conflict_key,
    derive_subject,
    resolve_conflict,
    same_value,
)

STATED = Origin.USER_STATED
CONFIRMED = Origin.USER_CONFIRMED
MODEL = Origin.MODEL_INFERRED
SUMMARY = Origin.SUMMARIZED_FROM_SESSION
IMPORT = Origin.IMPORTED
OPERATOR = Origin.OPERATOR_COPILOT
INFERRED = (MODEL, SUMMARY, IMPORT)
MEMBER_WORD = {STATED, CONFIRMED}

EARLIER = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
LATER = EARLIER + timedelta(days=2)


def side(origin: Origin, body: str = "lives in Berlin", at: datetime = EARLIER) -> ConflictSide:
    return ConflictSide(origin=origin, body=body, updated_at=at)


# One table per rule of the ladder: (prior origin, incoming origin, winner, ask_member).
# The prior is older and its value differs. Together the tables cover all 36 pairs.
RULE_1_OPERATOR_NEVER_TRUMPS_MEMBER = [
    (STATED, OPERATOR, "prior", False),
    (CONFIRMED, OPERATOR, "prior", False),
]
RULE_2_EXPLICIT_BEATS_INFERRED = [
    *((STATED, inferred, "prior", True) for inferred in INFERRED),
    *((inferred, STATED, "incoming", False) for inferred in INFERRED),
    (OPERATOR, STATED, "incoming", False),
]
RULE_3_CONFIRMED_BEATS_INFERRED = [
    *((CONFIRMED, inferred, "prior", True) for inferred in INFERRED),
    *((inferred, CONFIRMED, "incoming", False) for inferred in INFERRED),
    (OPERATOR, CONFIRMED, "incoming", False),
]
RULE_4_MOST_RECENT_WINS = [
    # Both sides are the member's word: the newer one wins, after asking.
    (STATED, STATED, "incoming", True),
    (STATED, CONFIRMED, "incoming", True),
    (CONFIRMED, STATED, "incoming", True),
    (CONFIRMED, CONFIRMED, "incoming", True),
    # Neither side is: the newer guess replaces the older one silently.
    *(
        (prior, incoming, "incoming", False)
        for prior in (*INFERRED, OPERATOR)
        for incoming in (*INFERRED, OPERATOR)
    ),
]


def _check(prior: Origin, incoming: Origin, winner: str, ask: bool, rule: ConflictRule) -> None:
    resolution = resolve_conflict(
        side(prior, "lives in Paris", EARLIER), side(incoming, "lives in Berlin", LATER)
    )
    assert resolution == ConflictResolution(winner=winner, rule=rule, ask_member=ask)


@pytest.mark.parametrize(
    ("prior", "incoming", "winner", "ask"), RULE_1_OPERATOR_NEVER_TRUMPS_MEMBER
)
def test_rule_1_operator_copilot_never_trumps_member(
    prior: Origin, incoming: Origin, winner: str, ask: bool
) -> None:
    _check(prior, incoming, winner, ask, ConflictRule.OPERATOR_NEVER_TRUMPS_MEMBER)


@pytest.mark.parametrize(("prior", "incoming", "winner", "ask"), RULE_2_EXPLICIT_BEATS_INFERRED)
def test_rule_2_explicit_beats_inferred(
    prior: Origin, incoming: Origin, winner: str, ask: bool
) -> None:
    _check(prior, incoming, winner, ask, ConflictRule.EXPLICIT_BEATS_INFERRED)


@pytest.mark.parametrize(("prior", "incoming", "winner", "ask"), RULE_3_CONFIRMED_BEATS_INFERRED)
def test_rule_3_confirmed_beats_inferred(
    prior: Origin, incoming: Origin, winner: str, ask: bool
) -> None:
    _check(prior, incoming, winner, ask, ConflictRule.CONFIRMED_BEATS_INFERRED)


@pytest.mark.parametrize(("prior", "incoming", "winner", "ask"), RULE_4_MOST_RECENT_WINS)
def test_rule_4_most_recent_wins(prior: Origin, incoming: Origin, winner: str, ask: bool) -> None:
    _check(prior, incoming, winner, ask, ConflictRule.MOST_RECENT_WINS)


def test_ladder_tables_cover_every_pair_of_origins() -> None:
    tables = (
        RULE_1_OPERATOR_NEVER_TRUMPS_MEMBER
        + RULE_2_EXPLICIT_BEATS_INFERRED
        + RULE_3_CONFIRMED_BEATS_INFERRED
        + RULE_4_MOST_RECENT_WINS
    )
    pairs = [(prior, incoming) for prior, incoming, _, _ in tables]
    assert len(pairs) == len(set(pairs)) == len(Origin) ** 2


def test_older_incoming_loses_under_most_recent_wins_and_is_not_asked() -> None:
    resolution = resolve_conflict(
        side(Origin.USER_STATED, "lives in Paris", LATER),
        side(Origin.USER_STATED, "lives in Berlin", EARLIER),
    )
    assert resolution == ConflictResolution("prior", ConflictRule.MOST_RECENT_WINS, False)


def test_tie_in_time_goes_to_incoming() -> None:
    resolution = resolve_conflict(
        side(Origin.MODEL_INFERRED, "a", EARLIER), side(Origin.IMPORTED, "b")
    )
    assert resolution.winner == "incoming"


def test_restating_the_same_value_is_never_asked() -> None:
    resolution = resolve_conflict(
        side(Origin.USER_STATED, "Lives in  Berlin.", EARLIER),
        side(Origin.USER_STATED, "lives in berlin", LATER),
    )
    assert resolution.ask_member is False
    assert resolution.winner == "incoming"


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ConflictSide(Origin.USER_STATED, "x", datetime(2025, 1, 1))  # noqa: DTZ001


_origins = st.sampled_from(list(Origin))
_times = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


@given(prior=_origins, incoming=_origins, t1=_times, t2=_times, b1=st.text(), b2=st.text())
def test_member_word_is_never_overwritten_by_anything_else(
    prior: Origin, incoming: Origin, t1: datetime, t2: datetime, b1: str, b2: str
) -> None:
    resolution = resolve_conflict(side(prior, b1, t1), side(incoming, b2, t2))
    if prior in MEMBER_WORD and incoming not in MEMBER_WORD:
        assert resolution.winner == "prior"
    if incoming in MEMBER_WORD and prior not in MEMBER_WORD:
        assert resolution.winner == "incoming"
    # Nobody is asked about a conflict that leaves the member's word out of it.
    if prior not in MEMBER_WORD:
        assert resolution.ask_member is False


@given(prior=_origins, incoming=_origins, t1=_times, t2=_times, b1=st.text(), b2=st.text())
def test_resolution_is_deterministic(
    prior: Origin, incoming: Origin, t1: datetime, t2: datetime, b1: str, b2: str
) -> None:
    a, b = side(prior, b1, t1), side(incoming, b2, t2)
    assert resolve_conflict(a, b) == resolve_conflict(a, b)


@pytest.mark.parametrize(
    ("body", "subject"),
    [
        ("My favourite colour is blue", "favourite colour"),
        ("my  FAVOURITE colour is green!", "favourite colour"),
        ("Favourite colour: teal", "favourite colour"),
        ("The dog's name = Rex", "dog's name"),
        ("My partner’s birthday is in May", "partner's birthday"),
        ("I live in Berlin", "live berlin"),
        ("I am vegan", "vegan"),
        ("Prefers window seats on long flights", "prefers window seats long"),
        ("", ""),
        ("?!", ""),
    ],
)
def test_derive_subject(body: str, subject: str) -> None:
    assert derive_subject(body) == subject


def test_attribute_updates_share_a_conflict_key() -> None:
    first = conflict_key("preference", None, derive_subject("My favourite colour is blue"))
    second = conflict_key("preference", None, derive_subject("Favourite colour: green"))
    assert first == second == "preference::::favourite colour"


@given(st.text())
def test_derive_subject_is_deterministic_and_short(body: str) -> None:
    subject = derive_subject(body)
    assert subject == derive_subject(body)
    assert len(subject.split()) <= 4
    assert subject == subject.strip()


def test_conflict_key_uses_empty_parts_and_normalises_subject() -> None:
    assert conflict_key(None, None, None) == "::::"
    handle = "actor_" + "0" * 32
    assert conflict_key("relationship", handle, "  Birth DAY ") == (
        f"relationship::{handle}::birth day"
    )


def test_same_value_ignores_case_spacing_and_punctuation_only() -> None:
    assert same_value("Lives in Berlin.", "lives  in berlin")
    assert not same_value("lives in Berlin", "lives in Bern")
