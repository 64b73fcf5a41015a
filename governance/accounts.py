"""Sign-in: the audit of login attempts, operator session lengths, and operators' TOTP.

Throttling itself is django-axes (settings, "Accounts and logins"); this module records
what axes and Django's login decided, and owns the second step. Login events carry the
operator's public id or a keyed fingerprint of the attempted username and of the address,
never a password, a code, a raw username or an address (docs/decisions/accounts.md).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime

import pyotp
from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from governance import keys, vault
from governance.actions import AuditAction
from governance.audit import Actor, audit_record
from governance.errors import Conflict
from governance.models import AuditEvent, OperatorTotp, User

POLICY = "iris-accounts-v1"
FINGERPRINT_PURPOSE = "iris-login-fingerprint-v1"
TOTP_PURPOSE = "operator-totp"
TOTP_ISSUER = "Iris"
# One step either side of now: a phone clock a little off still works, and a code lives
# at most 90 seconds.
TOTP_WINDOW = 1
LOGIN_ACTOR = Actor.system("login")
SESSION_LOGIN_AT = "iris_operator_login_at"


def login_fingerprint(value: str) -> str:
    """A keyed fingerprint that links attempts on one username (or address) without
    storing it; the key never lives in the database."""
    _, mac = keys.sign(FINGERPRINT_PURPOSE, value.encode("utf-8", "surrogatepass"))
    return mac[:32]


def _user_named(username: str | None) -> User | None:
    if not username:
        return None
    return User.objects.filter(username=username).select_related("tenant").first()


def _address_payload(request: HttpRequest | None) -> dict[str, str]:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    address = getattr(request, "axes_ip_address", None) or address
    return {"addressFingerprint": login_fingerprint(address)} if address else {}


def login_succeeded_record(*, request: HttpRequest | None, user: User) -> None:
    """An operator signed in (members' own sign-ins are not audited)."""
    if not user.is_operator:
        return
    # Not durable: Django's login() may run inside a caller's transaction.
    with transaction.atomic():
        audit_record(
            actor=Actor("operator", str(user.public_id)),
            action=AuditAction.ACCOUNT_LOGIN_SUCCEEDED,
            tenant_id=user.tenant_id,
            policy_id=POLICY,
            reason_code="totp" if _has_totp(user) else "password",
            subject_ids=[user.public_id],
            payload=_address_payload(request),
        )


def login_failed_record(
    *, request: HttpRequest | None, username: str | None, reason: str, lockout_began: bool
) -> None:
    """A refused sign-in: on the account's tenant chain when the username names an
    account, otherwise on the system chain under the username's fingerprint."""
    user = _user_named(username)
    payload: dict[str, object] = dict(_address_payload(request))
    if user is None:
        payload["usernameFingerprint"] = login_fingerprint(username or "")
    else:
        payload["accountKind"] = user.kind
    with transaction.atomic():
        audit_record(
            actor=LOGIN_ACTOR,
            action=AuditAction.ACCOUNT_LOGIN_FAILED,
            tenant_id=user.tenant_id if user else None,
            policy_id=POLICY,
            severity=AuditEvent.Severity.WARNING if user and user.is_operator else "info",
            reason_code=reason,
            subject_ids=[user.public_id] if user else [],
            payload=payload,
        )
        if lockout_began:
            audit_record(
                actor=LOGIN_ACTOR,
                action=AuditAction.ACCOUNT_LOGIN_LOCKED_OUT,
                tenant_id=user.tenant_id if user else None,
                policy_id=POLICY,
                severity=AuditEvent.Severity.WARNING,
                reason_code="failure-limit",
                subject_ids=[user.public_id] if user else [],
                payload={**payload, "failureLimit": settings.AXES_FAILURE_LIMIT},
            )


# -- operator sessions ---------------------------------------------------------------------


def operator_session_start(request: HttpRequest, user: User) -> None:
    """Stamp an operator's new session: it ends 10 hours on, or after 30 idle minutes."""
    if not user.is_operator or not hasattr(request, "session"):
        return
    request.session[SESSION_LOGIN_AT] = timezone.now().timestamp()
    request.session.set_expiry(settings.IRIS_OPERATOR_SESSION_IDLE_SECONDS)


def operator_session_remaining(request: HttpRequest) -> float | None:
    """Seconds left of the operator session's absolute lifetime; None if it has no stamp."""
    started = request.session.get(SESSION_LOGIN_AT)
    if not isinstance(started, int | float):
        return None
    return started + settings.IRIS_OPERATOR_SESSION_MAX_SECONDS - timezone.now().timestamp()


# -- TOTP ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TotpEnrolment:
    secret: str  # base32, shown to its operator only, on the enrolment page
    uri: str  # otpauth://


def _has_totp(user: User) -> bool:
    return OperatorTotp.objects.filter(user=user, confirmed_at__isnull=False).exists()


def totp_is_enrolled(user: User) -> bool:
    return user.is_operator and _has_totp(user)


def _enrolment(user: User, secret: str) -> TotpEnrolment:
    uri = pyotp.TOTP(secret).provisioning_uri(name=user.username, issuer_name=TOTP_ISSUER)
    return TotpEnrolment(secret=secret, uri=uri)


def _secret_of(row: OperatorTotp) -> str:
    return vault.vault_get(row.secret_handle, tenant=row.user.tenant, owner=row.user)


def totp_enrolment_start(*, actor: Actor, user: User) -> TotpEnrolment:
    """A new secret for an operator not yet enrolled; the same one again until confirmed,
    so reloading the page does not invalidate what the authenticator app already holds."""
    if not user.is_operator:
        raise Conflict("Two-step sign-in is for operators.", code="totp-operators-only")
    with transaction.atomic(durable=True):
        row = OperatorTotp.objects.select_for_update().filter(user=user).first()
        if row is not None and row.confirmed_at is not None:
            raise Conflict("Two-step sign-in is already set up.", code="totp-enrolled")
        if row is not None:
            return _enrolment(user, _secret_of(row))
        secret = pyotp.random_base32()
        handle = vault.vault_put(
            tenant=user.tenant, owner=user, purpose=TOTP_PURPOSE, value=secret, actor=actor
        )
        OperatorTotp.objects.create(user=user, secret_handle=handle)
        audit_record(
            actor=actor,
            action=AuditAction.ACCOUNT_TOTP_ENROLMENT_STARTED,
            tenant_id=user.tenant_id,
            policy_id=POLICY,
            subject_ids=[user.public_id],
        )
    return _enrolment(user, secret)


def _matching_step(secret: str, code: str, now: datetime) -> int | None:
    code = (code or "").strip().replace(" ", "")
    if not (code.isascii() and code.isdigit() and len(code) == 6):
        return None
    totp = pyotp.TOTP(secret)
    current = totp.timecode(now)
    for step in range(current - TOTP_WINDOW, current + TOTP_WINDOW + 1):
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def _accept(row: OperatorTotp, code: str, now: datetime) -> bool:
    """Caller holds the row's lock. A code of a step at or before the last accepted one is
    refused: a code is good once, even inside its window."""
    step = _matching_step(_secret_of(row), code, now)
    if step is None or (row.last_used_step is not None and step <= row.last_used_step):
        return False
    row.last_used_step = step
    return True


def totp_enrolment_confirm(*, actor: Actor, user: User, code: str) -> bool:
    """Confirm the pending secret with a code from the app; False if the code is wrong."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        row = (
            OperatorTotp.objects.select_for_update()
            .select_related("user__tenant")
            .filter(user=user, confirmed_at__isnull=True)
            .first()
        )
        if row is None or not _accept(row, code, now):
            return False
        row.confirmed_at = now
        row.save(update_fields=["confirmed_at", "last_used_step"])
        audit_record(
            actor=actor,
            action=AuditAction.ACCOUNT_TOTP_ENROLLED,
            tenant_id=user.tenant_id,
            policy_id=POLICY,
            subject_ids=[user.public_id],
        )
    return True


def totp_check(*, user: User, code: str) -> bool:
    """The second step of an enrolled operator's sign-in. The caller reports a False to
    axes (it counts toward the lockout) and audits it there."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        row = (
            OperatorTotp.objects.select_for_update()
            .select_related("user__tenant")
            .filter(user=user, confirmed_at__isnull=False)
            .first()
        )
        if row is None or not _accept(row, code, now):
            return False
        row.save(update_fields=["last_used_step"])
    return True


def totp_reset(*, actor: Actor, user: User) -> bool:
    """Remove an operator's authenticator (a lost phone): the next sign-in is by password
    alone until they enrol again. False if there was none."""
    with transaction.atomic(durable=True):
        row = OperatorTotp.objects.select_for_update().filter(user=user).first()
        if row is None:
            return False
        handle = row.secret_handle
        row.delete()
        vault.vault_delete(handle, tenant=user.tenant, owner=user, actor=actor)
        audit_record(
            actor=actor,
            action=AuditAction.ACCOUNT_TOTP_RESET,
            tenant_id=user.tenant_id,
            policy_id=POLICY,
            subject_ids=[user.public_id],
        )
    return True
