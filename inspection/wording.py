"""What the inspection pages say, in plain words.

An operator reads "Routine review" and "Waiting for a reviewer", a member reads "To
answer a request you made about your data"; nobody reads `routine-review` or
`role-never-reads-sensitive-memory`. Every value the pages show passes through one of
these tables, and the page tests check that no raw value reaches a page. The words a
member reads (topics, kinds of memory, why someone looked, the notice) are
`governance.vocabulary`'s; the console's own words stay here.
"""

from __future__ import annotations

from consent.enums import Category
from governance import vocabulary
from inspection.enums import InspectionState, NoticeStatus, Refusal, Sensitivity
from memory.enums import ScopeKind

S = InspectionState
R = Refusal

# The three paths, as the operator chooses one.
PATH_LABELS: dict[str, str] = {
    S.ROUTINE_REVIEW: "Routine review",
    S.DSAR_FULFILLMENT: "Fulfil a data-rights request",
    S.INCIDENT_ESCALATION: "Incident escalation",
}

# The same paths, as the member reads why someone looked (the vocabulary's words).
MEMBER_PATH_LABELS: dict[str, str] = vocabulary.INSPECTION_PATH_LABELS

STATE_LABELS: dict[str, str] = {
    S.REQUESTED: "Requested",
    S.ROUTINE_REVIEW: "Waiting for a reviewer",
    S.DSAR_FULFILLMENT: "Waiting for a reviewer",
    S.INCIDENT_ESCALATION: "Waiting for a reviewer",
    S.GRANTED: "Granted",
    S.DENIED: "Denied",
    S.CLOSED: "Closed",
}

# What a step of the trail did, by the state it reached.
STEP_LABELS: dict[str, str] = {
    S.REQUESTED: "Requested",
    S.ROUTINE_REVIEW: "Sent for review as a routine review",
    S.DSAR_FULFILLMENT: "Sent for review as a data-rights fulfilment",
    S.INCIDENT_ESCALATION: "Sent for review as an incident escalation",
    S.GRANTED: "Granted",
    S.DENIED: "Denied",
    S.CLOSED: "Closed",
}

SENSITIVITY_LABELS: dict[str, str] = {
    Sensitivity.STANDARD: "Standard memory only",
    Sensitivity.SENSITIVE: "Sensitive memory too (health, beliefs and the like)",
}

ROLE_LABELS: dict[str, str] = {
    "support": "Support",
    "admin": "Administrator",
    "legal": "Legal team",
    "trust-and-safety": "Trust and safety",
    "operator": "Staff",
}

ACTOR_LABELS: dict[str, str] = {"operator": "Staff", "system": "Iris", "job": "Iris"}

# Why a reviewer denies: a fixed list, so the requester reads a sentence.
DENY_REASONS: dict[str, str] = {
    "not-justified": "Not justified enough",
    "not-necessary": "Answerable without looking",
    "wrong-path": "Needs another path or role",
    "withdrawn": "Withdrawn by the requester.",
}

# Reasons on trail steps, in words; any other code is shown as "Other".
REASON_LABELS: dict[str, str] = {
    **PATH_LABELS,
    **DENY_REASONS,
    S.GRANTED: "Granted by a reviewer",
    S.DENIED: "Denied",
    S.CLOSED: "Closed by staff",
    "request-expired": "Nobody reviewed it in time",
    "grant-expired": "The grant ran out",
    "done": "The work is done",
}

# Refusals of the gate and the services, as the operator reads them.
REFUSAL_WORDS: dict[str, str] = {
    R.NOT_AN_OPERATOR: "No such inspection.",
    R.CROSS_TENANT: "The memory asked for belongs to another organisation.",
    R.SCOPE_OUT_OF_BOUNDS: "The memory asked for belongs to another member.",
    R.SELF_GRANT: "You cannot grant your own request: another operator must review it (four eyes).",
    R.REVIEWER_NOT_PERMITTED: "Your role does not review inspections: an administrator, the "
    "legal team or trust and safety does.",
    R.PATH_NOT_PERMITTED: "The requester's role may not use this path.",
    R.NO_LEGITIMATE_INTEREST: "An incident escalation needs a valid signed incident reference: "
    "this one is missing, not genuine, expired, for another member or already used.",
    R.CONSENT_NOT_CURRENT: "Sensitive memory needs the member's current consent snapshot: "
    "none was given, or the member has changed their consent since.",
    R.ROUTINE_REVIEW_OF_SENSITIVE: "A routine review never reads sensitive memory.",
    R.SENSITIVE_ROLE_REFUSED: "Support and administrators never read sensitive memory.",
    R.LEGAL_DSAR_ONLY: "The legal team reads sensitive memory only to fulfil a data-rights "
    "request.",
    R.TRUST_AND_SAFETY_INCIDENT_ONLY: "Trust and safety reads sensitive memory only in an "
    "incident escalation.",
    R.TRANSITION_NOT_ALLOWED: "This inspection can no longer be changed that way.",
    R.NOT_PERMITTED: "You may not do this with this inspection.",
    R.JUSTIFICATION_REQUIRED: "Say why you need to look: a justification is required.",
    R.GRANT_EXPIRED: "The grant has run out: the snapshot can no longer be read.",
    R.CARVE_OUT_NOT_PERMITTED: "Only trust and safety closes an incident escalation without "
    "telling the member.",
}

# Malformed-input rules of the services, by rule.
RULE_WORDS: dict[str, str] = {
    "required": "This is required.",
    "invalid_choice": "Choose one of the options.",
    "max_length": "This is too long.",
    "invalid": "This is not in the right form.",
    "wrong-type": "This is not in the right form.",
}

NOTICE_LABELS: dict[str, str] = vocabulary.INSPECTION_NOTICE_LABELS
TOPIC_LABELS: dict[str, str] = vocabulary.TOPIC_LABELS
MEMORY_KIND_LABELS: dict[str, str] = vocabulary.SCOPE_LABELS

if (
    set(TOPIC_LABELS) != {c.value for c in Category}
    or set(MEMORY_KIND_LABELS) != set(ScopeKind)
    or set(MEMBER_PATH_LABELS) != {S.ROUTINE_REVIEW, S.DSAR_FULFILLMENT, S.INCIDENT_ESCALATION}
    or not {n.value for n in NoticeStatus} <= set(NOTICE_LABELS)
):
    raise RuntimeError("every topic, memory kind, path and notice needs a plain label")


def refusal(code: str | None, rule: str | None, fallback: str) -> str:
    """Words for a service's refusal: by its code, else its rule, else its own text."""
    return REFUSAL_WORDS.get(code or "") or RULE_WORDS.get(rule or "") or fallback


def roles(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(ROLE_LABELS.get(v, "Staff") for v in values) or "Staff"


def reason(code: str) -> str:
    return REASON_LABELS.get(code, "Other")


def topics(values: list[str]) -> str:
    return ", ".join(TOPIC_LABELS.get(v, "Other") for v in values)
