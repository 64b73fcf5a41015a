"""Retention envelopes, soft-delete grace and usage-weighted decay.

Pure rules: no Django, no database (spec: "Retention, Decay, and Compaction"). The
retention and decay jobs ask these functions what is due; they never decide it themselves.
The table and thresholds are explained in docs/decisions/memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from consent.enums import AdapterScope
from memory.enums import CANONICAL_DEFAULT_ADAPTER, Origin, ScopeKind
from memory.recall.pipeline import RECENCY_SCALE, REFERENCE_COUNT_SATURATION


class RetentionAction(StrEnum):
    SUMMARIZE = "summarize"  # replace raw memory by a summary with provenance
    PURGE = "purge"  # remove the text for good
    REVIEW = "review"  # queue for a human decision; nothing is removed automatically
    KEEP = "keep"  # nothing is due


@dataclass(frozen=True)
class RetentionEnvelope:
    """How long raw and summarised memory of one adapter scope survive.

    `raw` is None when raw memory has no automatic end (the member decides). `summarized`
    is how long a summary lives, counted from the summary's own creation, then it is
    purged; None means summaries are kept. `at_expiry` is what happens when `raw` runs out.
    """

    scope: AdapterScope
    raw: timedelta | None
    summarized: timedelta | None
    at_expiry: RetentionAction


# IRIS_OPERATOR_COPILOT_RETENTION_DAYS in the spec.
OPERATOR_COPILOT_RETENTION = timedelta(days=14)

# Envelopes per adapter scope. Raw memory of ephemeral scopes is summarised, then the
# summary ages out; member-curated scopes are kept until the member forgets them; scopes
# that need governance review go to review rather than being deleted by a timer.
RETENTION_ENVELOPES: dict[AdapterScope, RetentionEnvelope] = {
    envelope.scope: envelope
    for envelope in (
        RetentionEnvelope(AdapterScope.ASSISTANT_PROFILE, None, None, RetentionAction.KEEP),
        RetentionEnvelope(
            AdapterScope.SESSION, timedelta(days=7), timedelta(days=30), RetentionAction.SUMMARIZE
        ),
        RetentionEnvelope(
            AdapterScope.CONVERSATION,
            timedelta(days=90),
            timedelta(days=365),
            RetentionAction.SUMMARIZE,
        ),
        RetentionEnvelope(
            AdapterScope.SCENE, timedelta(days=30), timedelta(days=90), RetentionAction.SUMMARIZE
        ),
        # Pose samples are biometric: raw for a day, then only an aggregate survives.
        RetentionEnvelope(
            AdapterScope.POSE, timedelta(days=1), timedelta(days=30), RetentionAction.SUMMARIZE
        ),
        RetentionEnvelope(AdapterScope.DOMAIN, None, None, RetentionAction.KEEP),
        # Links across products must be re-justified, not kept by default.
        RetentionEnvelope(
            AdapterScope.CROSS_DOMAIN, timedelta(days=180), None, RetentionAction.REVIEW
        ),
        RetentionEnvelope(AdapterScope.NOTEBOOK, None, None, RetentionAction.KEEP),
        RetentionEnvelope(
            AdapterScope.OPERATOR_COPILOT, OPERATOR_COPILOT_RETENTION, None, RetentionAction.REVIEW
        ),
        RetentionEnvelope(AdapterScope.TENANT, timedelta(days=365), None, RetentionAction.REVIEW),
        # Working copies made for an operator review must not outlive the review.
        RetentionEnvelope(
            AdapterScope.ADMIN_REVIEW, timedelta(days=30), None, RetentionAction.PURGE
        ),
    )
}

# How long a soft-deleted memory can be restored before its text is purged. Short enough
# that the purge lands well inside the 30-day statutory window of a deletion request.
SOFT_DELETE_GRACE = timedelta(days=14)

# Decay (spec: "Decay function") uses the recall ranker's half-life and reference
# normalisation, defined once there. See `recency_score` for why it is a true half-life.
DECAY_HALF_LIFE = RECENCY_SCALE
REFERENCE_SATURATION = REFERENCE_COUNT_SATURATION
# An unconfirmed inference whose usage weight falls below this is retired.
STALE_INFERENCE_THRESHOLD = 0.1
# Origins that are guesses rather than the member's word; only these ever go stale.
INFERRED_ORIGINS = frozenset({Origin.MODEL_INFERRED, Origin.SUMMARIZED_FROM_SESSION})


def _require_aware(**values: datetime) -> None:
    for name, value in values.items():
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware")


def envelope_for(scope: AdapterScope | ScopeKind | str) -> RetentionEnvelope:
    """The envelope of an adapter scope, or of a canonical kind's default adapter scope.

    The kinds that share a name with an adapter scope (session, scene, pose, notebook,
    tenant) map to that same adapter scope, so the lookup is unambiguous.
    """
    try:
        adapter = AdapterScope(scope)
    except ValueError:
        adapter = CANONICAL_DEFAULT_ADAPTER[ScopeKind(scope)]
    return RETENTION_ENVELOPES[adapter]


def _age(created_at: datetime, now: datetime) -> timedelta:
    # A timestamp from a fast clock is treated as brand new, never as negative age.
    return max(now - created_at, timedelta(0))


def retention_action(
    scope: AdapterScope | ScopeKind | str,
    created_at: datetime,
    now: datetime,
    summarized: bool,
) -> RetentionAction:
    """What is due for one memory now. A lifetime ends at its boundary, inclusive.

    For a summary (`summarized=True`) pass the summary's own `created_at`.
    """
    _require_aware(created_at=created_at, now=now)
    envelope = envelope_for(scope)
    age = _age(created_at, now)
    if summarized:
        if envelope.summarized is not None and age >= envelope.summarized:
            return RetentionAction.PURGE
        return RetentionAction.KEEP
    if envelope.raw is not None and age >= envelope.raw:
        return envelope.at_expiry
    return RetentionAction.KEEP


def purge_due_at(deleted_at: datetime, grace: timedelta = SOFT_DELETE_GRACE) -> datetime:
    _require_aware(deleted_at=deleted_at)
    return deleted_at + grace


def soft_delete_purge_due(
    deleted_at: datetime, now: datetime, grace: timedelta = SOFT_DELETE_GRACE
) -> bool:
    _require_aware(deleted_at=deleted_at, now=now)
    return now >= purge_due_at(deleted_at, grace)


def recency_score(now: datetime, referenced_at: datetime) -> float:
    """1.0 when just referenced, halving every 30 days.

    Pass `last_referenced_at`, or `updated_at` when the memory was never referenced.

    The spec's code writes `exp(-age / halfLife)`, which is 0.37 at 30 days: its constant is
    really an e-folding time. Iris implements what the name promises, 0.5 at 30 days.
    """
    _require_aware(now=now, referenced_at=referenced_at)
    age = _age(referenced_at, now)
    # 2 ** -n is exact at whole half-lives, which keeps the synthetic timelines exact.
    return 2.0 ** -(age / DECAY_HALF_LIFE)


def usage_weight(
    now: datetime,
    *,
    last_referenced_at: datetime | None,
    updated_at: datetime,
    reference_count: int,
) -> float:
    """Recency scaled by use: between 1x (never referenced) and 2x (ten or more times)."""
    if reference_count < 0:
        raise ValueError("reference_count must not be negative")
    referenced_at = last_referenced_at or updated_at
    usage = min(1.0, reference_count / REFERENCE_SATURATION)
    return recency_score(now, referenced_at) * (1.0 + usage)


def is_stale_inference(
    now: datetime,
    *,
    origin: Origin | str,
    last_referenced_at: datetime | None,
    updated_at: datetime,
    reference_count: int,
) -> bool:
    """Retire an unconfirmed inference once its usage weight falls below 0.1.

    That is about 100 days after its last reference for an inference never used again,
    and about 130 days for one referenced ten or more times. What the member stated or
    confirmed, imports and operator notes never go stale by decay (operator notes have
    their own 14-day review).
    """
    if Origin(origin) not in INFERRED_ORIGINS:
        return False
    weight = usage_weight(
        now,
        last_referenced_at=last_referenced_at,
        updated_at=updated_at,
        reference_count=reference_count,
    )
    return weight < STALE_INFERENCE_THRESHOLD
