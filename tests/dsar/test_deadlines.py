"""Statutory clocks on calendar edge cases, for both jurisdictions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsar.deadlines import (
    add_business_days,
    add_months,
    check_extension,
    clock_for,
    days_left,
    reminder_due,
)
from governance.rules import RuleError


def at(y: int, m: int, d: int, h: int = 9) -> datetime:
    return datetime(y, m, d, h, tzinfo=UTC)


@pytest.mark.parametrize(
    ("received", "due"),
    [
        (at(2026, 1, 31), at(2026, 2, 28)),  # no 31 Feb: the month's last day
        (at(2028, 1, 31), at(2028, 2, 29)),  # leap year
        (at(2028, 1, 29), at(2028, 2, 29)),
        (at(2028, 2, 29), at(2028, 3, 29)),
        (at(2026, 3, 31), at(2026, 4, 30)),  # 31-day month into a 30-day one
        (at(2026, 4, 30), at(2026, 5, 30)),  # 30-day month into a 31-day one
        (at(2026, 5, 31), at(2026, 6, 30)),
        (at(2026, 12, 31), at(2027, 1, 31)),  # across the year
        (at(2026, 12, 15), at(2027, 1, 15)),
        (at(2026, 7, 1), at(2026, 8, 1)),
    ],
)
def test_gdpr_answer_is_due_one_calendar_month_after_receipt(received, due):
    assert clock_for("gdpr", received).due_at == due


@pytest.mark.parametrize(
    ("received", "extended"),
    [
        (at(2026, 1, 31), at(2026, 4, 30)),
        (at(2027, 11, 30), at(2028, 2, 29)),
        (at(2026, 11, 30), at(2027, 2, 28)),
        (at(2026, 6, 15), at(2026, 9, 15)),
    ],
)
def test_gdpr_extension_adds_two_further_months(received, extended):
    assert clock_for("gdpr", received).extended_due_at == extended


@pytest.mark.parametrize(
    ("received", "confirm_by"),
    [
        (at(2026, 12, 7), at(2026, 12, 21)),  # Monday: two full weeks
        (at(2026, 12, 4), at(2026, 12, 18)),  # Friday
        (at(2026, 12, 5), at(2026, 12, 18)),  # Saturday: the weekend does not count
        (at(2026, 12, 6), at(2026, 12, 18)),  # Sunday
        (at(2028, 2, 25), at(2028, 3, 10)),  # over 29 Feb in a leap year
    ],
)
def test_ccpa_receipt_is_confirmed_within_ten_business_days(received, confirm_by):
    clock = clock_for("ccpa", received)
    assert clock.confirm_by == confirm_by


@pytest.mark.parametrize(
    ("received", "due", "extended"),
    [
        (at(2026, 1, 31), at(2026, 3, 17), at(2026, 5, 1)),
        (at(2028, 1, 31), at(2028, 3, 16), at(2028, 4, 30)),  # leap year
        (at(2026, 12, 20), at(2027, 2, 3), at(2027, 3, 20)),
    ],
)
def test_ccpa_answers_in_45_days_extendable_by_45(received, due, extended):
    clock = clock_for("ccpa", received)
    assert clock.due_at == due == received + timedelta(days=45)
    assert clock.extended_due_at == extended == received + timedelta(days=90)
    assert clock_for("gdpr", received).confirm_by is None


@pytest.mark.parametrize("jurisdiction", ["gdpr", "ccpa"])
def test_verification_window_is_seven_days_and_the_clock_runs_from_receipt(jurisdiction):
    clock = clock_for(jurisdiction, at(2026, 2, 26))
    assert clock.verify_by == at(2026, 3, 5)
    assert clock.received_at == at(2026, 2, 26)


def test_an_extension_is_given_once_before_the_first_deadline_with_a_reason():
    clock = clock_for("gdpr", at(2026, 1, 31))
    assert check_extension(
        clock=clock, already_extended=False, reason="Large archive", now=at(2026, 2, 20)
    ) == at(2026, 4, 30)
    cases = [
        (True, "Large archive", at(2026, 2, 20), "already-extended"),
        (False, "  ", at(2026, 2, 20), "required"),
        (False, "Large archive", at(2026, 2, 28), "extension-too-late"),
        (False, "Large archive", at(2026, 3, 1), "extension-too-late"),
    ]
    for already, reason, now, rule in cases:
        with pytest.raises(RuleError) as refused:
            check_extension(clock=clock, already_extended=already, reason=reason, now=now)
        assert refused.value.rule == rule


def test_month_arithmetic_and_business_days_are_plain_functions():
    assert add_months(at(2026, 8, 31), 6) == at(2027, 2, 28)
    assert add_months(at(2026, 1, 15), 12) == at(2027, 1, 15)
    assert add_business_days(at(2026, 12, 31), 1) == at(2027, 1, 1)  # Friday
    assert add_business_days(at(2027, 1, 1), 1) == at(2027, 1, 4)  # over the weekend


def test_reminders_start_a_week_before_the_deadline_and_days_left_go_negative():
    due = at(2026, 3, 1)
    assert not reminder_due(due, at(2026, 2, 21, 8))
    assert reminder_due(due, at(2026, 2, 22, 9))
    assert reminder_due(due, at(2026, 3, 2))
    assert days_left(due, at(2026, 2, 27, 9)) == 2
    assert days_left(due, at(2026, 3, 1, 10)) == -1


def test_a_naive_receipt_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        clock_for("gdpr", datetime(2026, 1, 1))  # noqa: DTZ001
