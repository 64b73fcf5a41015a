"""What the data-rights pages say, in plain words.

A member reads "In progress" and "Confirmed by a code sent to you", never `in-progress` or
`email-link`: every value the pages show passes through one of these tables, and the page
tests check that no raw value reaches a member's page. The words a member reads
on other pages too (kinds of memory, topics, states) are `governance.vocabulary`'s, so a
member reads the same name for the same thing everywhere; the queue's own words stay here.
"""

from __future__ import annotations

from consent.enums import Category, LegalBasis
from consent.views import label_of
from dsar.enums import Jurisdiction, RequestKind, RequestState, VerificationMethod
from governance import vocabulary
from memory.enums import ScopeKind

S = RequestState

# The member's words are governance.vocabulary's, shared with every member page.
KIND_LABELS: dict[str, str] = vocabulary.DATA_RIGHTS_KIND_LABELS

# What the legal queue calls each kind: the operator is not the person it is about.
QUEUE_KIND_LABELS: dict[str, str] = {
    RequestKind.EXPORT: "Export",
    RequestKind.DELETE: "Deletion",
    RequestKind.ACCESS: "Access",
}

# The status a member reads, and one sentence on what happens next.
STATE_LABELS: dict[str, str] = vocabulary.DATA_RIGHTS_STATE_LABELS

STATE_NEXT: dict[str, str] = {
    S.SUBMITTED: "An app asked for this on your behalf. Nothing happens until you confirm "
    "it with a code we send you.",
    S.VERIFIED: "We have confirmed it is you. The work starts shortly.",
    S.IN_PROGRESS: "We are working on it.",
    S.COMPLETED: "We finished this request. If something is missing or wrong, ask us to "
    "look at it again.",
    S.FAILED: "We could not finish this request. You can ask us to look at it again.",
    S.CANCELLED: "This request was cancelled. Nothing was done.",
    S.EXPIRED: "Nobody confirmed this request within 7 days, so we closed it. Nothing was done.",
    S.APPEALED: "You asked us to look at this request again.",
}

READY_NEXT: dict[str, str] = {
    RequestKind.EXPORT: "Your copy is ready. Download it soon: we keep it only for a limited time.",
    RequestKind.ACCESS: "Your report is ready.",
}

HELD_NEXT = "A legal hold applies: this deletion waits until it is lifted."

# Short words for the legal queue: operators know the lifecycle, but read words too.
QUEUE_STATE_LABELS: dict[str, str] = {
    S.SUBMITTED: "Not yet verified",
    S.VERIFIED: "Verified, not started",
    S.IN_PROGRESS: "In progress",
    S.COMPLETED: "Completed",
    S.FAILED: "Failed",
    S.CANCELLED: "Cancelled",
    S.EXPIRED: "Expired",
    S.APPEALED: "Appealed",
}

METHOD_LABELS: dict[str, str] = {
    VerificationMethod.SESSION_TOKEN: "You asked while signed in",
    VerificationMethod.EMAIL_LINK: "With a code we emailed you",
    VerificationMethod.PHONE_OTP: "With a code we sent to your phone",
    VerificationMethod.OPERATOR_SIGNOFF: "Checked by our privacy team",
    VerificationMethod.COURT_ORDER: "Under a court order",
}

QUEUE_METHOD_LABELS: dict[str, str] = {
    VerificationMethod.SESSION_TOKEN: "The member's own signed-in session",
    VerificationMethod.EMAIL_LINK: "A code sent by email",
    VerificationMethod.PHONE_OTP: "A code sent by phone",
    VerificationMethod.OPERATOR_SIGNOFF: "Signed off by the legal team",
    VerificationMethod.COURT_ORDER: "Court order",
}

# Who took a step of a request's trail, as the member reads it.
ACTOR_LABELS: dict[str, str] = {
    "member": "You",
    "surface": "An app, for you",
    "operator": "Our privacy team",
    "system": "Iris",
}

QUEUE_ACTOR_LABELS: dict[str, str] = {
    "member": "The member",
    "surface": "An app, for the member",
    "operator": "Legal team",
    "system": "Iris",
}

# What a step of the trail means, by the state it reached.
STEP_LABELS: dict[str, str] = {
    S.SUBMITTED: "Received",
    S.VERIFIED: "Confirmed it is you",
    S.IN_PROGRESS: "Work started",
    S.COMPLETED: "Finished",
    S.FAILED: "Could not be done",
    S.CANCELLED: "Cancelled",
    S.EXPIRED: "Closed, not confirmed in time",
    S.APPEALED: "Asked to look again",
}

JURISDICTION_LABELS: dict[str, str] = {
    Jurisdiction.GDPR: "European data protection law (GDPR) gives us one calendar month to "
    "answer, which we may extend once, by two more months, if we tell you why.",
    Jurisdiction.CCPA: "California law (CCPA) gives us 45 days to answer, which we may "
    "extend once, by 45 more days, if we tell you why.",
}

# Why the legal team marks a request failed: a fixed list, so the member reads a sentence.
FAIL_REASONS: dict[str, str] = {
    "identity-not-confirmed": "We could not confirm that the request came from you.",
    "legal-exemption": "The law requires us to keep this data, so we could not act on it.",
    "data-unavailable": "The data could not be gathered. Ask us to look at it again.",
    "work-failed": "Something went wrong on our side. Ask us to look at it again.",
}

# Reason codes on trail steps that mean something to the member; others are not shown.
STEP_REASONS: dict[str, str] = {
    **FAIL_REASONS,
    "verification-window-passed": "Not confirmed within 7 days.",
    "undone": "You undid this deletion; your memories are back.",
}

TOPIC_LABELS: dict[str, str] = vocabulary.TOPIC_LABELS
MEMORY_KIND_LABELS: dict[str, str] = vocabulary.SCOPE_LABELS

if set(TOPIC_LABELS) != {c.value for c in Category} or set(MEMORY_KIND_LABELS) != set(ScopeKind):
    raise RuntimeError("every memory topic and kind needs a plain label on the data-rights page")
if set(KIND_LABELS) != set(RequestKind) or set(STATE_LABELS) != set(RequestState):
    raise RuntimeError("every data-rights kind and state needs a plain label")

# What a refusal from the services means for the member, by its rule. The services word
# their refusals for developers; a member reads these.
RULE_WORDS: dict[str, str] = {
    "scope-or-category-required": "Choose at least one kind of memory or one topic for us "
    "to delete.",
    "hard-delete-has-no-grace": "Deleting at once leaves no time to change your mind, so "
    "it cannot have a waiting time.",
    "passphrase-length": "Your passphrase needs between 12 and 200 characters.",
    "one-open-request-per-kind": "You already have an open request of this kind. You can "
    "ask again once it is finished.",
    "code-wrong": "That code is not right. Check the message we sent you and try again.",
    "code-expired": "That code has expired. Ask us for a new one.",
    "code-used": "That code was already used. Ask us for a new one.",
    "too-many-attempts": "You tried too many times. Ask us for a new code.",
    "no-contact-address": "We have no email address for you, so we cannot send a code.",
    "not-awaiting-verification": "This request is already confirmed.",
    "transition-not-allowed": "This request can no longer be changed that way.",
    "required": "This is required.",
}


def plain_error(rule: str | None, fallback: str) -> str:
    return RULE_WORDS.get(rule or "", fallback)


def days_phrase(days: int) -> str:
    """`days` whole days left, as the queue says it."""
    if days < 0:
        late = -days
        return f"{late} day{'s' if late != 1 else ''} overdue"
    if days == 0:
        return "Due today"
    return f"{days} day{'s' if days != 1 else ''} left"


# ------------------------------------------------------------------- the access report

REPORT_SECTIONS: dict[str, str] = {
    "memories": "Your memories",
    "consent-events": "Your consent history",
    "consents-active": "Consents in force",
    "opt-outs": "Features you switched off",
    "data-rights": "Your data requests",
    "pose-aggregates": "Pose totals",
    "recall-log": "When the assistant recalled your memories",
    "continuation-tokens": "Conversations carried between your devices",
    "operator-accesses": "When someone at the company looked at your memory",
}

ACCESS_PATH_LABELS: dict[str, str] = vocabulary.INSPECTION_PATH_LABELS

NOTICE_LABELS: dict[str, str] = {
    "queued": "We will tell you by email",
    "sending": "We will tell you by email",
    "delivered": "We told you by email",
    "not-required": "No notice needed (nothing sensitive was seen)",
}

LIFECYCLE_LABELS: dict[str, str] = vocabulary.LIFECYCLE_LABELS
LEGAL_BASIS_LABELS: dict[str, str] = vocabulary.LEGAL_BASIS_LABELS
ORIGIN_LABELS: dict[str, str] = vocabulary.ORIGIN_LABELS
STATUS_LABELS: dict[str, str] = vocabulary.CONSENT_STATUS_LABELS
CAPTURE_LABELS: dict[str, str] = vocabulary.CAPTURE_LABELS

if set(LEGAL_BASIS_LABELS) != set(LegalBasis):
    raise RuntimeError("every legal basis needs a plain label")

# Report fields whose values Iris has words for, by the field's name.
_REPORT_VALUES: dict[str, tuple[dict[str, str], ...]] = {
    "state": (STATE_LABELS,),
    "toState": (STEP_LABELS,),
    "fromState": (STEP_LABELS,),
    "kind": (KIND_LABELS, MEMORY_KIND_LABELS),
    "scopeKind": (MEMORY_KIND_LABELS,),
    "scopes": (MEMORY_KIND_LABELS,),
    "category": (TOPIC_LABELS,),
    "categories": (TOPIC_LABELS,),
    "origin": (ORIGIN_LABELS,),
    "lifecycle": (LIFECYCLE_LABELS,),
    "status": (STATUS_LABELS,),
    "verificationMethod": (METHOD_LABELS,),
    "actorKind": (ACTOR_LABELS,),
    "filedBy": (ACTOR_LABELS,),
    "captureMethod": ({**CAPTURE_LABELS, "settings-toggle": "on your consent page"},),
    "legalBasis": (LEGAL_BASIS_LABELS,),
    "reasonCode": (METHOD_LABELS, STEP_REASONS),
    "jurisdiction": ({"gdpr": "GDPR", "ccpa": "CCPA"},),
    "path": (ACCESS_PATH_LABELS,),
    "noticeStatus": (NOTICE_LABELS,),
}


def report_label(key: str, value: str) -> str | None:
    """Words for a value of the access report's field `key`, or None when it has none."""
    for table in _REPORT_VALUES.get(key, ()):
        if value in table:
            label = table[value]
            return label[:1].upper() + label[1:]
    if key in {"type", "consentType"}:
        try:
            return label_of("consent", value)
        except (KeyError, ValueError):
            return None
    return None
