"""Inference vs confirmation: when a session fact may become durable profile memory.

Pure rules: no Django, no database (spec: "Session-to-profile promotion" and "Inference vs
Confirmation Policy"). Session memory never silently becomes profile memory: a promotion
goes ahead only when the member asks for it or confirms it, or when the same inference has
recurred in enough distinct sessions. A sensitive inference never takes the second path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from memory.enums import Origin

# IRIS_SESSION_PROFILE_PROMOTION_THRESHOLD in the spec.
PROMOTION_THRESHOLD = 3


class PromotionReason(StrEnum):
    """Stable reason codes (the spec's spelling); they go into the audit chain."""

    EXPLICIT_PROMOTION = "explicit-promotion"
    REPEATED_OCCURRENCE_THRESHOLD_MET = "repeated-occurrence-threshold-met"
    NOT_REQUESTED = "not-requested"
    IMPLICIT_PROMOTION_BLOCKED = "implicit-promotion-blocked"
    REPEATED_OCCURRENCE_THRESHOLD_NOT_MET = "repeated-occurrence-threshold-not-met"


@dataclass(frozen=True)
class PromotionDecision:
    allowed: bool
    reason: PromotionReason


def evaluate_promotion(
    *, requested: bool, explicit: bool, distinct_sessions: int, sensitive: bool
) -> PromotionDecision:
    """May this promotion request go ahead?

    `requested`: someone (the member, a surface, the inference job) asked for it.
    `explicit`: the member asked for it or confirmed an inline prompt.
    `distinct_sessions`: how many different sessions the same inference recurred in.
    `sensitive`: the fact falls in a sensitive category or is a sensitive interaction.

    An explicit promotion of a sensitive fact is allowed here; the sensitive-category
    storage gate still requires the per-category consent before anything is written.
    """
    if distinct_sessions < 0:
        raise ValueError("distinct_sessions must not be negative")
    # Nothing happens without a request, so a stale `explicit` flag cannot promote alone.
    if not requested:
        return PromotionDecision(False, PromotionReason.NOT_REQUESTED)
    if explicit:
        return PromotionDecision(True, PromotionReason.EXPLICIT_PROMOTION)
    # Sensitive inferences are never auto-persisted, however often they recur.
    if sensitive:
        return PromotionDecision(False, PromotionReason.IMPLICIT_PROMOTION_BLOCKED)
    if distinct_sessions >= PROMOTION_THRESHOLD:
        return PromotionDecision(True, PromotionReason.REPEATED_OCCURRENCE_THRESHOLD_MET)
    return PromotionDecision(False, PromotionReason.REPEATED_OCCURRENCE_THRESHOLD_NOT_MET)


def count_distinct_sessions(session_ids: Iterable[str | None]) -> int:
    """Occurrences count once per session: saying it three times in one chat is one."""
    return len({session_id for session_id in session_ids if session_id})


def promoted_origin(decision: PromotionDecision, current: Origin | str) -> Origin:
    """The origin a promoted entry carries.

    A confirmed inference becomes `user-confirmed`; a statement the member made stays
    `user-stated` (confirming does not lower it). A threshold promotion keeps its inferred
    origin: recurring is evidence, not the member's word, so it still ranks and decays as
    an inference and loses a conflict to anything the member says.
    """
    if not decision.allowed:
        raise ValueError("a refused promotion has no promoted origin")
    origin = Origin(current)
    if decision.reason is PromotionReason.EXPLICIT_PROMOTION and origin is not Origin.USER_STATED:
        return Origin.USER_CONFIRMED
    return origin
