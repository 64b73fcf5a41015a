"""The inspection vocabulary (spec: "Operator Inspection Regime"), named once and imported
everywhere else. Plain Python: no Django."""

from __future__ import annotations

from enum import StrEnum


class InspectionState(StrEnum):
    REQUESTED = "requested"
    DSAR_FULFILLMENT = "dsar-fulfillment"
    INCIDENT_ESCALATION = "incident-escalation"
    ROUTINE_REVIEW = "routine-review"
    GRANTED = "granted"
    DENIED = "denied"
    CLOSED = "closed"


# The three legitimate entry paths: an inspection waits for a reviewer in one of them.
PATHS: frozenset[InspectionState] = frozenset(
    {
        InspectionState.DSAR_FULFILLMENT,
        InspectionState.INCIDENT_ESCALATION,
        InspectionState.ROUTINE_REVIEW,
    }
)

# An inspection in one of these states is open: it may still become (or is) a grant.
OPEN_STATES: frozenset[InspectionState] = PATHS | {
    InspectionState.REQUESTED,
    InspectionState.GRANTED,
}


class Sensitivity(StrEnum):
    """What the operator asks to see: memory outside the sensitive categories only, or
    sensitive memory too (the gate's stricter rows)."""

    STANDARD = "standard"
    SENSITIVE = "sensitive"


class IncidentReferenceStatus(StrEnum):
    """What verifying a cited incident reference found (`inspection.incidents`)."""

    VALID = "valid"
    MISSING = "missing"
    FORGED = "forged"  # malformed, a MAC that does not verify, or no such issued reference
    MISMATCHED = "mismatched"  # issued for another member or tenant
    EXPIRED = "expired"
    USED = "used"  # already spent on another grant


class Refusal(StrEnum):
    """Every reason the gate (`inspection.policy`) or the services refuse a move. The
    value is the problem's `code` and the audited reason code."""

    NOT_AN_OPERATOR = "not-an-operator"
    CROSS_TENANT = "cross-tenant"
    SCOPE_OUT_OF_BOUNDS = "scope-out-of-bounds"
    SELF_GRANT = "self-grant"
    REVIEWER_NOT_PERMITTED = "reviewer-not-permitted"
    PATH_NOT_PERMITTED = "path-not-permitted-for-role"
    NO_LEGITIMATE_INTEREST = "no-legitimate-interest"
    CONSENT_NOT_CURRENT = "consent-not-current"
    ROUTINE_REVIEW_OF_SENSITIVE = "routine-review-of-sensitive-memory"
    SENSITIVE_ROLE_REFUSED = "role-never-reads-sensitive-memory"
    LEGAL_DSAR_ONLY = "legal-reads-sensitive-only-in-dsar-fulfillment"
    TRUST_AND_SAFETY_INCIDENT_ONLY = "trust-and-safety-reads-sensitive-only-in-incidents"
    # Outside the gate: the state machine and the services.
    TRANSITION_NOT_ALLOWED = "transition-not-allowed"
    NOT_PERMITTED = "not-permitted"
    JUSTIFICATION_REQUIRED = "justification-required"
    GRANT_EXPIRED = "grant-expired"
    CARVE_OUT_NOT_PERMITTED = "carve-out-not-permitted"


class NoticeStatus(StrEnum):
    QUEUED = "queued"
    SENDING = "sending"  # claimed by one worker; reclaimed only after its lease runs out
    DELIVERED = "delivered"


class ReadKind(StrEnum):
    VIEWED = "viewed"  # the requester, inside the grant
    REPLAYED = "replayed"  # an auditor, reconstructing what was seen
