"""Statutory clocks for data-rights requests, calendar-correct, per jurisdiction.

GDPR (Art. 12(3)): answer within one calendar month of receipt, the same date next month
or that month's last day when it has none (31 Jan → 28/29 Feb); extendable once by two
further months, the member told why within the first month.
CCPA (Cal. Civ. Code 1798.130, regs 7021): confirm receipt within 10 business days,
answer within 45 calendar days of receipt; extendable once by 45 more days with notice
inside the first 45. Business days are Monday to Friday; public holidays are not counted
out (docs/decisions/data-rights.md says why that errs on the member's side).
Every clock runs from receipt and never pauses for verification. An unverified request
expires 7 days after receipt. Plain Python: no Django.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

from dsar.enums import Jurisdiction
from governance.rules import RuleError

VERIFICATION_WINDOW = timedelta(days=7)
# Reminders reach the legal queue this long before a request is due.
REMINDER_LEAD = timedelta(days=7)
CCPA_CONFIRM_BUSINESS_DAYS = 10
CCPA_ANSWER = timedelta(days=45)
CCPA_EXTENSION = timedelta(days=45)
GDPR_ANSWER_MONTHS = 1
GDPR_EXTENSION_MONTHS = 2


def add_months(moment: datetime, months: int) -> datetime:
    """The same day `months` later, or that month's last day when it has none."""
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def add_business_days(moment: datetime, days: int) -> datetime:
    """`days` working days (Monday to Friday) after `moment`, at the same time of day."""
    current = moment
    left = days
    while left > 0:
        current += timedelta(days=1)
        if current.weekday() < 5:
            left -= 1
    return current


@dataclass(frozen=True)
class Clock:
    """What is due when, for one request."""

    received_at: datetime
    verify_by: datetime
    due_at: datetime
    # CCPA's acknowledgement of receipt; None under GDPR.
    confirm_by: datetime | None
    # The latest a single extension can set `due_at` to.
    extended_due_at: datetime
    # An extension must be decided (and the member told) before this.
    extend_by: datetime


def clock_for(jurisdiction: str, received_at: datetime) -> Clock:
    if received_at.tzinfo is None:
        raise ValueError("received_at must be timezone-aware")
    rule = Jurisdiction(jurisdiction)
    verify_by = received_at + VERIFICATION_WINDOW
    if rule is Jurisdiction.GDPR:
        due = add_months(received_at, GDPR_ANSWER_MONTHS)
        return Clock(
            received_at=received_at,
            verify_by=verify_by,
            due_at=due,
            confirm_by=None,
            extended_due_at=add_months(received_at, GDPR_ANSWER_MONTHS + GDPR_EXTENSION_MONTHS),
            extend_by=due,
        )
    due = received_at + CCPA_ANSWER
    return Clock(
        received_at=received_at,
        verify_by=verify_by,
        due_at=due,
        confirm_by=add_business_days(received_at, CCPA_CONFIRM_BUSINESS_DAYS),
        extended_due_at=due + CCPA_EXTENSION,
        extend_by=due,
    )


def check_extension(
    *, clock: Clock, already_extended: bool, reason: str, now: datetime
) -> datetime:
    """The new due date of a first extension asked for at `now`, or a RuleError."""
    if already_extended:
        raise RuleError("extend", "already-extended", "A request can be extended only once.")
    if not reason.strip():
        raise RuleError("reason", "required", "Give the member the reason for the extension.")
    if now >= clock.extend_by:
        raise RuleError(
            "extend",
            "extension-too-late",
            "An extension must be given before the first deadline passes.",
        )
    return clock.extended_due_at


def reminder_due(due_at: datetime, now: datetime) -> bool:
    """True from REMINDER_LEAD before the deadline on (overdue included)."""
    return now >= due_at - REMINDER_LEAD


def days_left(due_at: datetime, now: datetime) -> int:
    """Whole days until `due_at` (negative when overdue), rounded towards overdue."""
    seconds = (due_at - now).total_seconds()
    return int(seconds // 86400)
