from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consent.enums import AdapterScope
from memory.enums import Origin, ScopeKind
from memory.rules.retention import (
    DECAY_HALF_LIFE,
    RETENTION_ENVELOPES,
    SOFT_DELETE_GRACE,
    STALE_INFERENCE_THRESHOLD,
    RetentionAction,
    envelope_for,
    is_stale_inference,
    purge_due_at,
    recency_score,
    retention_action,
    soft_delete_purge_due,
    usage_weight,
)

A = AdapterScope
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def test_every_adapter_scope_has_an_envelope() -> None:
    assert set(RETENTION_ENVELOPES) == set(AdapterScope)


def test_operator_copilot_is_fourteen_days_then_a_single_review() -> None:
    envelope = envelope_for(A.OPERATOR_COPILOT)
    assert envelope.raw == timedelta(days=14)
    assert envelope.summarized is None
    assert envelope.at_expiry is RetentionAction.REVIEW
    assert retention_action(A.OPERATOR_COPILOT, days_ago(13.99), NOW, False) is (
        RetentionAction.KEEP
    )
    assert retention_action(A.OPERATOR_COPILOT, days_ago(14), NOW, False) is (
        RetentionAction.REVIEW
    )


def test_canonical_kinds_use_their_default_adapter_scope() -> None:
    assert envelope_for(ScopeKind.PROFILE) is envelope_for(A.ASSISTANT_PROFILE)
    assert envelope_for("operator-copilot") is envelope_for(A.OPERATOR_COPILOT)
    assert envelope_for(ScopeKind.CRISIS) is envelope_for(A.SESSION)
    with pytest.raises(ValueError):
        envelope_for("nowhere")


def test_session_timeline_summarises_then_purges_the_summary() -> None:
    created = days_ago(0)
    timeline = [
        (NOW + 6 * DAY, False, RetentionAction.KEEP),
        (NOW + 7 * DAY, False, RetentionAction.SUMMARIZE),
        (NOW + 8 * DAY, False, RetentionAction.SUMMARIZE),
    ]
    for now, summarized, expected in timeline:
        assert retention_action(A.SESSION, created, now, summarized) is expected
    summary_created = NOW + 7 * DAY
    assert retention_action(A.SESSION, summary_created, NOW + 36 * DAY, True) is (
        RetentionAction.KEEP
    )
    assert retention_action(A.SESSION, summary_created, NOW + 37 * DAY, True) is (
        RetentionAction.PURGE
    )


@pytest.mark.parametrize("scope", [A.ASSISTANT_PROFILE, A.NOTEBOOK, A.DOMAIN])
def test_member_curated_scopes_are_kept_however_old(scope: AdapterScope) -> None:
    assert retention_action(scope, days_ago(10_000), NOW, False) is RetentionAction.KEEP
    assert retention_action(scope, days_ago(10_000), NOW, True) is RetentionAction.KEEP


def test_admin_review_copies_are_purged_after_thirty_days() -> None:
    assert retention_action(A.ADMIN_REVIEW, days_ago(30), NOW, False) is RetentionAction.PURGE


def test_future_creation_time_counts_as_new() -> None:
    assert retention_action(A.POSE, NOW + DAY, NOW, False) is RetentionAction.KEEP


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        retention_action(A.SESSION, datetime(2025, 1, 1), NOW, False)
    with pytest.raises(ValueError, match="timezone-aware"):
        recency_score(datetime(2025, 1, 1), NOW)


def test_soft_delete_grace_window() -> None:
    deleted = days_ago(0)
    assert SOFT_DELETE_GRACE == timedelta(days=14)
    assert purge_due_at(deleted) == NOW + 14 * DAY
    assert not soft_delete_purge_due(deleted, NOW + 14 * DAY - timedelta(seconds=1))
    assert soft_delete_purge_due(deleted, NOW + 14 * DAY)
    assert soft_delete_purge_due(deleted, NOW, grace=timedelta(0))


@pytest.mark.parametrize(
    ("age_days", "score"),
    [(0, 1.0), (30, 0.5), (60, 0.25), (90, 0.125), (-5, 1.0)],
)
def test_half_life_is_exactly_thirty_days(age_days: int, score: float) -> None:
    assert DECAY_HALF_LIFE == timedelta(days=30)
    assert recency_score(NOW, days_ago(age_days)) == score


@given(
    a=st.integers(min_value=0, max_value=10**9),
    b=st.integers(min_value=0, max_value=10**9),
)
def test_recency_never_rises_with_age_and_stays_in_unit_interval(a: int, b: int) -> None:
    younger, older = sorted((a, b))
    score_younger = recency_score(NOW, NOW - timedelta(seconds=younger))
    score_older = recency_score(NOW, NOW - timedelta(seconds=older))
    assert 0.0 <= score_older <= score_younger <= 1.0


def test_usage_weight_prefers_last_reference_and_saturates_at_ten() -> None:
    updated = days_ago(300)
    assert (
        usage_weight(NOW, last_referenced_at=days_ago(30), updated_at=updated, reference_count=0)
        == 0.5
    )
    assert (
        usage_weight(NOW, last_referenced_at=days_ago(30), updated_at=updated, reference_count=5)
        == 0.75
    )
    assert (
        usage_weight(NOW, last_referenced_at=days_ago(30), updated_at=updated, reference_count=100)
        == 1.0
    )
    assert (
        usage_weight(NOW, last_referenced_at=None, updated_at=days_ago(60), reference_count=0)
        == 0.25
    )


def _stale(origin: Origin, *, last_referenced_days: float, references: int) -> bool:
    return is_stale_inference(
        NOW,
        origin=origin,
        last_referenced_at=days_ago(last_referenced_days),
        updated_at=days_ago(400),
        reference_count=references,
    )


def test_unused_inference_goes_stale_after_about_a_hundred_days() -> None:
    assert STALE_INFERENCE_THRESHOLD == 0.1
    assert not _stale(Origin.MODEL_INFERRED, last_referenced_days=99, references=0)
    assert _stale(Origin.MODEL_INFERRED, last_referenced_days=100, references=0)
    assert _stale(Origin.SUMMARIZED_FROM_SESSION, last_referenced_days=100, references=0)


def test_well_used_inference_lasts_longer() -> None:
    assert not _stale(Origin.MODEL_INFERRED, last_referenced_days=120, references=10)
    assert _stale(Origin.MODEL_INFERRED, last_referenced_days=130, references=10)


@pytest.mark.parametrize(
    "origin",
    [Origin.USER_STATED, Origin.USER_CONFIRMED, Origin.IMPORTED, Origin.OPERATOR_COPILOT],
)
def test_member_word_and_non_inferences_never_go_stale(origin: Origin) -> None:
    assert not _stale(origin, last_referenced_days=10_000, references=0)


def test_negative_reference_count_is_refused() -> None:
    with pytest.raises(ValueError):
        usage_weight(NOW, last_referenced_at=None, updated_at=NOW, reference_count=-1)
