"""The continuation-token contract and last-write-wins, without a database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.continuity import rules
from memory.continuity.rules import Outcome, RuleViolation, SlotWrite

USER = str(uuid.uuid4())
GRANT = uuid.uuid4()
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=10)


def token(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": USER,
        "scopeKey": f"session:{USER}:s-1",
        "surfaceContext": {"surface": "tara", "sessionId": "s-1", "itemId": "book-42"},
        "anchorRef": {"surface": "tara", "kind": "segment", "ref": "book-42/ch-3/seg-7"},
        "posture": "listening",
        "deviceId": "phone-1",
        "clientTimestamp": "2025-03-01T12:00:00Z",
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not ...}


def violation(payload: Any) -> RuleViolation:
    with pytest.raises(RuleViolation) as caught:
        rules.parse_token(payload)
    return caught.value


def test_a_valid_token_parses_into_references_and_posture() -> None:
    draft = rules.parse_token(token(anchorRef={**token()["anchorRef"], "offsetMs": 73_500}))
    assert draft.surface == "tara"
    assert draft.anchor_ref.as_contract()["offsetMs"] == 73_500
    assert draft.posture is rules.Posture.LISTENING
    assert draft.sensitive_categories == ()
    assert draft.client_timestamp == T0


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        (
            token(anchorRef={"surface": "nyx", "kind": "segment", "ref": "x"}),
            "anchorRef.surface",
            "anchor-surface-mismatch",
        ),
        (
            token(surfaceContext={"surface": "myspace"}),
            "surfaceContext.surface",
            "invalid_choice",
        ),
        (token(colour="blue"), "colour", "unknown-field"),
        (token(transcript="we talked about"), "transcript", "content-not-allowed"),
        (
            token(anchorRef={"surface": "tara", "kind": "segment", "ref": "x", "text": "hi"}),
            "anchorRef.text",
            "content-not-allowed",
        ),
        (
            token(surfaceContext={"surface": "tara", "summary": "a sad chapter"}),
            "surfaceContext.summary",
            "content-not-allowed",
        ),
        (
            token(anchorRef={"surface": "tara", "kind": "segment", "ref": "she said it"}),
            "anchorRef.ref",
            "not-a-reference",
        ),
        (
            token(anchorRef={"surface": "tara", "kind": "segment", "ref": "x" * 513}),
            "anchorRef.ref",
            "max_length",
        ),
        (token(posture="dancing"), "posture", "invalid_choice"),
        (token(sensitiveCategories=["preference"]), "sensitiveCategories[0]", "invalid_choice"),
        (token(scopeKey="galaxy:1"), "scopeKey", "invalid_choice"),
        (token(deviceId=...), "deviceId", "required"),
        (token(clientTimestamp="2025-03-01T12:00:00"), "clientTimestamp", "timezone-required"),
        (token(id=str(uuid.uuid4())), "id", "read-only"),
        (
            token(anchorRef={"surface": "tara", "kind": "segment", "ref": "x", "offsetMs": -1}),
            "anchorRef.offsetMs",
            "out-of-range",
        ),
    ],
)
def test_bad_tokens_name_the_field_and_the_rule(payload: Any, field: str, rule: str) -> None:
    broken = violation(payload)
    assert (broken.field, broken.rule) == (field, rule)


def test_sensitive_categories_need_a_cross_device_consent_id() -> None:
    draft = rules.parse_token(token(sensitiveCategories=["mental_health"]))
    with pytest.raises(RuleViolation) as caught:
        rules.check_cross_device_consent(draft, GRANT)
    assert caught.value.rule == "cross-device-consent-required"


@pytest.mark.parametrize("current", [None, uuid.uuid4()])
def test_sensitive_categories_need_the_current_grant(current: uuid.UUID | None) -> None:
    draft = rules.parse_token(
        token(sensitiveCategories=["mental_health"], crossDeviceConsentId=str(GRANT))
    )
    with pytest.raises(RuleViolation) as caught:
        rules.check_cross_device_consent(draft, current)
    assert caught.value.rule == "cross-device-consent-not-current"
    rules.check_cross_device_consent(draft, GRANT)  # the current grant passes


def test_tokens_without_sensitive_categories_need_no_consent() -> None:
    rules.check_cross_device_consent(rules.parse_token(token()), None)
    assert rules.token_visible([], None, None)
    assert not rules.token_visible(["medical"], GRANT, None)
    assert not rules.token_visible(["medical"], GRANT, uuid.uuid4())
    assert rules.token_visible(["medical"], GRANT, GRANT)


def test_the_first_write_to_a_slot_creates_it() -> None:
    decision = rules.decide_write(SlotWrite("phone", T0), None, WINDOW)
    assert (decision.outcome, decision.created, decision.other) == (Outcome.WRITTEN, True, None)


def test_a_later_write_from_another_device_within_the_window_wins_and_is_told() -> None:
    phone = SlotWrite("phone", T0)
    decision = rules.decide_write(SlotWrite("laptop", T0 + timedelta(seconds=3)), phone, WINDOW)
    assert (decision.outcome, decision.other) == (Outcome.WRITTEN, phone)


def test_an_overtaken_write_is_superseded_and_names_the_winner() -> None:
    laptop = SlotWrite("laptop", T0 + timedelta(seconds=3))
    decision = rules.decide_write(SlotWrite("phone", T0), laptop, WINDOW)
    assert (decision.outcome, decision.other) == (Outcome.SUPERSEDED, laptop)


def test_writes_outside_the_window_or_from_the_same_device_are_no_conflict() -> None:
    later = rules.decide_write(
        SlotWrite("laptop", T0 + timedelta(seconds=11)), SlotWrite("phone", T0), WINDOW
    )
    assert (later.outcome, later.other) == (Outcome.WRITTEN, None)
    same = rules.decide_write(
        SlotWrite("phone", T0), SlotWrite("phone", T0 + timedelta(seconds=1)), WINDOW
    )
    assert (same.outcome, same.other) == (Outcome.SUPERSEDED, None)


def test_read_query_is_strict() -> None:
    assert rules.parse_read_query({"userId": USER}, limit_max=50) == (None, 10)
    assert rules.parse_read_query({"surface": "tara", "limit": "3"}, limit_max=50) == ("tara", 3)
    for params, rule in (
        ({"limit": "0"}, "out-of-range"),
        ({"limit": "x"}, "invalid"),
        ({"surface": "myspace"}, "invalid_choice"),
        ({"scope": "x"}, "unknown-field"),
    ):
        with pytest.raises(RuleViolation) as caught:
            rules.parse_read_query(params, limit_max=50)
        assert caught.value.rule == rule
