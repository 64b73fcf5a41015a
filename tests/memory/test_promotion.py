from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.enums import Origin
from memory.rules.promotion import (
    PROMOTION_THRESHOLD,
    PromotionDecision,
    PromotionReason,
    count_distinct_sessions,
    evaluate_promotion,
    promoted_origin,
)

R = PromotionReason


def _inference_timeline(session_ids: list[str]) -> PromotionDecision:
    """The inference job asks for a promotion after each sighting, never explicitly."""
    return evaluate_promotion(
        requested=True,
        explicit=False,
        distinct_sessions=count_distinct_sessions(session_ids),
        sensitive=False,
    )


def test_threshold_is_three() -> None:
    assert PROMOTION_THRESHOLD == 3


def test_two_sessions_are_not_enough() -> None:
    assert _inference_timeline(["s1", "s2"]) == PromotionDecision(
        False, R.REPEATED_OCCURRENCE_THRESHOLD_NOT_MET
    )


def test_three_sessions_meet_the_threshold() -> None:
    assert _inference_timeline(["s1", "s2", "s3"]) == PromotionDecision(
        True, R.REPEATED_OCCURRENCE_THRESHOLD_MET
    )


def test_repeats_within_one_session_count_once() -> None:
    timeline = ["s1", "s1", "s1", "s2", "s2"]
    assert count_distinct_sessions(timeline) == 2
    assert _inference_timeline(timeline).allowed is False


def test_sightings_without_a_session_do_not_count() -> None:
    assert count_distinct_sessions(["s1", None, "", "s2"]) == 2


def test_explicit_request_promotes_on_first_sighting() -> None:
    decision = evaluate_promotion(
        requested=True, explicit=True, distinct_sessions=1, sensitive=False
    )
    assert decision == PromotionDecision(True, R.EXPLICIT_PROMOTION)


def test_explicit_confirmation_promotes_a_sensitive_fact() -> None:
    decision = evaluate_promotion(
        requested=True, explicit=True, distinct_sessions=0, sensitive=True
    )
    assert decision == PromotionDecision(True, R.EXPLICIT_PROMOTION)


@pytest.mark.parametrize("sessions", [0, 2, 3, 50])
def test_sensitive_inference_is_never_auto_persisted(sessions: int) -> None:
    decision = evaluate_promotion(
        requested=True, explicit=False, distinct_sessions=sessions, sensitive=True
    )
    assert decision == PromotionDecision(False, R.IMPLICIT_PROMOTION_BLOCKED)


@pytest.mark.parametrize("explicit", [True, False])
def test_nothing_is_promoted_without_a_request(explicit: bool) -> None:
    decision = evaluate_promotion(
        requested=False, explicit=explicit, distinct_sessions=10, sensitive=False
    )
    assert decision == PromotionDecision(False, R.NOT_REQUESTED)


def test_reason_codes_are_the_specs_spelling() -> None:
    assert {r.value for r in PromotionReason} == {
        "explicit-promotion",
        "repeated-occurrence-threshold-met",
        "not-requested",
        "implicit-promotion-blocked",
        "repeated-occurrence-threshold-not-met",
    }


def test_negative_session_count_is_refused() -> None:
    with pytest.raises(ValueError):
        evaluate_promotion(requested=True, explicit=False, distinct_sessions=-1, sensitive=False)


@given(
    requested=st.booleans(),
    explicit=st.booleans(),
    sessions=st.integers(min_value=0, max_value=1000),
    sensitive=st.booleans(),
)
def test_session_memory_never_silently_becomes_profile_memory(
    requested: bool, explicit: bool, sessions: int, sensitive: bool
) -> None:
    decision = evaluate_promotion(
        requested=requested, explicit=explicit, distinct_sessions=sessions, sensitive=sensitive
    )
    if decision.allowed:
        assert requested
        assert explicit or (not sensitive and sessions >= PROMOTION_THRESHOLD)
        assert decision.reason in {R.EXPLICIT_PROMOTION, R.REPEATED_OCCURRENCE_THRESHOLD_MET}


@pytest.mark.parametrize(
    ("reason", "current", "expected"),
    [
        (R.EXPLICIT_PROMOTION, Origin.MODEL_INFERRED, Origin.USER_CONFIRMED),
        (R.EXPLICIT_PROMOTION, Origin.SUMMARIZED_FROM_SESSION, Origin.USER_CONFIRMED),
        (R.EXPLICIT_PROMOTION, Origin.USER_STATED, Origin.USER_STATED),
        (R.REPEATED_OCCURRENCE_THRESHOLD_MET, Origin.MODEL_INFERRED, Origin.MODEL_INFERRED),
    ],
)
def test_promoted_origin(reason: PromotionReason, current: Origin, expected: Origin) -> None:
    assert promoted_origin(PromotionDecision(True, reason), current) is expected


def test_refused_promotion_has_no_origin() -> None:
    with pytest.raises(ValueError):
        promoted_origin(PromotionDecision(False, R.NOT_REQUESTED), Origin.MODEL_INFERRED)
