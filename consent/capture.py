"""Who may record a consent event, by which capture method, dated when (issue 19, 5).

Pure: no Django. The write and recall gates trust the ledger, so the ledger must only hold
what its recorder could have seen: a surface records what the member just did in that
surface, the member's own session what the member just did, an operator what that
operator witnessed, and only Iris itself imports records from elsewhere. One table says
it; `capture_refusal` reads it; `consent.services` enforces it through the kernel, so a
refusal is a 403 with the rule's code and a deny in the audit chain.
See docs/decisions/consent.md, "Who may record consent".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from consent.enums import CaptureMethod

# Clocks disagree a little; an act "now" may carry a time this far either side of ours.
CLOCK_SKEW = timedelta(minutes=5)
# A witnessed form or call is entered after the fact, but not long after.
OPERATOR_BACKDATE = timedelta(days=30)
# The operator roles that take members' calls and signed forms.
RECORDING_ROLES: frozenset[str] = frozenset({"support", "legal"})


@dataclass(frozen=True)
class CaptureRule:
    """How far before now an event recorded this way may say it happened (None: any
    time in the past, for an import of older records)."""

    max_backdate: timedelta | None
    roles: frozenset[str] | None = None  # operators only: the roles that may record
    witness_is_caller: bool = False


CAPTURE_TABLE: Mapping[str, Mapping[CaptureMethod, CaptureRule]] = {
    "surface": {CaptureMethod.INLINE_PROMPT: CaptureRule(CLOCK_SKEW)},
    "member": {
        CaptureMethod.INLINE_PROMPT: CaptureRule(CLOCK_SKEW),
        CaptureMethod.SETTINGS_TOGGLE: CaptureRule(CLOCK_SKEW),
    },
    "operator": {
        CaptureMethod.OPERATOR_RECORDED: CaptureRule(
            OPERATOR_BACKDATE, roles=RECORDING_ROLES, witness_is_caller=True
        ),
    },
    "system": {CaptureMethod.DSAR_IMPORT: CaptureRule(None)},
}


@dataclass(frozen=True)
class CaptureRefusal:
    field: str  # the wire field the rule is about
    rule: str  # a stable code: the problem's `code` and the audit's reason
    detail: str
    allowed: tuple[str, ...] = ()


def allowed_methods(caller_kind: str) -> tuple[str, ...]:
    return tuple(str(m) for m in CAPTURE_TABLE.get(caller_kind, {}))


def capture_refusal(
    *,
    caller_kind: str,
    roles: Iterable[str],
    capture_method: str,
    occurred_at: datetime,
    now: datetime,
    witness_is_caller: bool,
) -> CaptureRefusal | None:
    """None when this caller may record this event, else the first rule it breaks.

    Order: the method for the caller kind, the operator's role, the witness, then the
    date (never later than now plus the skew, never earlier than the rule allows).
    """
    rules = CAPTURE_TABLE.get(caller_kind, {})
    rule = (
        rules.get(CaptureMethod(capture_method)) if capture_method in set(CaptureMethod) else None
    )
    if rule is None:
        return CaptureRefusal(
            "captureMethod",
            "capture-method-not-allowed",
            f"A {caller_kind} may not record consent captured by {capture_method}.",
            allowed_methods(caller_kind),
        )
    if rule.roles is not None and not rule.roles & set(roles):
        return CaptureRefusal(
            "captureMethod",
            "capture-role-not-allowed",
            "Only support and legal operators record witnessed consent.",
            tuple(sorted(rule.roles)),
        )
    if rule.witness_is_caller and not witness_is_caller:
        return CaptureRefusal(
            "witness",
            "witness-must-be-recorder",
            "The witness of an operator-recorded consent is the operator recording it.",
        )
    if occurred_at > now + CLOCK_SKEW:
        return CaptureRefusal(
            "occurredAt", "capture-future-dated", "occurredAt may not be in the future."
        )
    if rule.max_backdate is not None and occurred_at < now - rule.max_backdate:
        return CaptureRefusal(
            "occurredAt",
            "capture-backdated",
            f"Consent captured by {capture_method} is recorded when it happens; occurredAt "
            f"may be at most {_span(rule.max_backdate)} before now.",
        )
    return None


def _span(delta: timedelta) -> str:
    if delta >= timedelta(days=1):
        return f"{delta.days} days"
    return f"{int(delta.total_seconds() // 60)} minutes"
