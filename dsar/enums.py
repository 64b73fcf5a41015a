"""The data-rights vocabulary (spec: "Data Rights (DSAR)"), named once and imported
everywhere else. Plain Python: no Django."""

from __future__ import annotations

from enum import StrEnum


class RequestKind(StrEnum):
    DELETE = "delete"
    EXPORT = "export"
    ACCESS = "access"


class RequestState(StrEnum):
    SUBMITTED = "submitted"
    VERIFIED = "verified"
    IN_PROGRESS = "in-progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    APPEALED = "appealed"


# A request in one of these states blocks a second request of its kind for the member.
OPEN_STATES: frozenset[RequestState] = frozenset(
    {RequestState.SUBMITTED, RequestState.VERIFIED, RequestState.IN_PROGRESS}
)


class VerificationMethod(StrEnum):
    SESSION_TOKEN = "session-token"  # noqa: S105 (a method name, not a secret)
    EMAIL_LINK = "email-link"
    PHONE_OTP = "phone-otp"
    OPERATOR_SIGNOFF = "operator-signoff"
    COURT_ORDER = "court-order"


# Methods proven by a one-time code the member receives.
CODE_METHODS: frozenset[VerificationMethod] = frozenset(
    {VerificationMethod.EMAIL_LINK, VerificationMethod.PHONE_OTP}
)
# Methods an operator with the legal role records.
OPERATOR_METHODS: frozenset[VerificationMethod] = frozenset(
    {VerificationMethod.OPERATOR_SIGNOFF, VerificationMethod.COURT_ORDER}
)


class DeleteMode(StrEnum):
    SOFT = "soft"
    HARD = "hard"


class ExportFormat(StrEnum):
    # A zip of JSON files with a readable index.html beside them.
    JSON = "json"


class DeliveryChannel(StrEnum):
    DOWNLOAD = "download"
    EMAIL_LINK = "email-link"


class Jurisdiction(StrEnum):
    GDPR = "gdpr"
    CCPA = "ccpa"
