"""Data-rights use cases: the only code that writes requests, their trail and their codes.

Each public function is keyword-only, takes the acting principal, validates its input
(nothing is written for bad input), asks the governance kernel (`govern` with `pending=`,
so the allow commits with what it allowed), then opens one durable transaction that writes
the request, its trail step and its audit event. Work (building an export, applying a
deletion) is queued after commit (`dsar.tasks.process`). Audit events carry ids, kinds,
states and codes: never a payload's categories (that a member deletes health memory is
health data), a code or a passphrase.

Who may move a request where (docs/decisions/data-rights.md):
- the member, or a surface acting for them: cancel while it waits, appeal once finished,
  verify with a code they received;
- an operator with the legal role, in the member's tenant: verify (operator sign-off or a
  court order), start, complete, fail, extend;
- Iris itself (jobs): everything, within the table.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from dsar import deadlines, lifecycle, payloads
from dsar.enums import (
    CODE_METHODS,
    OPEN_STATES,
    OPERATOR_METHODS,
    Jurisdiction,
    RequestKind,
    RequestState,
    VerificationMethod,
)
from dsar.models import (
    DataRightsEvent,
    DataRightsRequest,
    LegalHold,
    TenantDataRightsPolicy,
    VerificationCode,
)
from dsar.selectors import active_hold, clock_of, is_legal, jurisdiction_of, open_request_of
from governance import keys, vault
from governance.actions import AuditAction
from governance.after_commit import after_commit, enqueue
from governance.audit import audit_record
from governance.errors import Conflict, Forbidden, NotFound, ValidationFailed, invalid
from governance.models import Tenant, User
from governance.pipeline import (
    Check,
    Decision,
    Effect,
    Hook,
    Operation,
    Verdict,
    govern,
    record_pending,
)
from governance.principal import Principal
from governance.rules import RuleError
from governance.text import TextRuleError, check_usable

log = logging.getLogger(__name__)

POLICY_ID = "iris.dsar.lifecycle.v1"
CODE_PURPOSE = "iris-dsar-verification-code-v1"
PASSPHRASE_PURPOSE = "dsar-export-passphrase"  # noqa: S105 (a vault purpose name)
CODE_DIGITS = 8
REASON_MAX = 500

S = RequestState
MEMBER_MOVES = frozenset({S.CANCELLED, S.APPEALED})
OPERATOR_MOVES = frozenset({S.VERIFIED, S.IN_PROGRESS, S.COMPLETED, S.FAILED})


# --------------------------------------------------------------------------- the gate


class DataRightsCallerGate(Check):
    """Legal holds and extensions are for an operator with the legal role. A kernel check,
    so that anyone else's attempt is on record as a deny. Registered by `dsar.apps`;
    decides only operations that carry a `dsarLegalOnly` attribute."""

    name = "dsar-caller"
    priority = 22
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if not op.attributes.get("dsarLegalOnly") or is_legal(op.principal):
            return None
        if op.principal.kind == "system":
            return None
        return Decision(
            self.name,
            Verdict.DENY,
            "legal-role-required",
            "Only an operator with the legal role may do this.",
        )


class LegalHoldGate(Check):
    """While a legal hold applies to a member, memory's own purge of forgotten entries
    waits: the hold pauses deletion, whoever would delete. (Data-rights deletions wait in
    `dsar.work` before they ever reach memory.) Registered by `dsar.apps`."""

    name = "dsar-legal-hold"
    priority = 23
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_DESTRUCTIVE})
    HELD_REASONS = frozenset({"soft-delete-grace-expired"})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        arguments = op.attributes.get("arguments") or {}
        if op.name != "memory.hard_delete" or arguments.get("reasonCode") not in self.HELD_REASONS:
            return None
        if op.tenant_id is None or op.member_id is None:
            return None
        held = LegalHold.objects.filter(
            tenant_id=op.tenant_id, member__public_id=op.member_id, lifted_at__isnull=True
        ).exists()
        if not held:
            return None
        return Decision(self.name, Verdict.DENY, "legal-hold", "A legal hold applies.")


# --------------------------------------------------------------------------- helpers


def _is_owner_side(principal: Principal) -> bool:
    return principal.kind in {"member", "surface"}


def _audit(
    principal: Principal,
    request: DataRightsRequest,
    action: AuditAction,
    *,
    reason_code: str = "",
    payload: Mapping[str, Any] | None = None,
) -> None:
    audit_record(
        actor=principal.actor,
        action=action,
        tenant_id=request.tenant_id,
        policy_id=POLICY_ID,
        reason_code=reason_code,
        subject_ids=[request.member.public_id, request.id],
        payload={"requestId": str(request.id), "kind": request.kind, **(payload or {})},
    )


def _govern(
    principal: Principal,
    member: User,
    name: str,
    *,
    subject_ids: tuple[str, ...] = (),
    arguments: Mapping[str, Any] | None = None,
    texts: Mapping[str, str | None] | None = None,
    effect: Effect = Effect.WRITE,
    legal_only: bool = False,
    pending: list[dict[str, Any]],
) -> None:
    govern(
        Hook.PRE_WRITE,
        Operation(
            name=name,
            effect=effect,
            principal=principal,
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            subject_ids=subject_ids,
            attributes={"arguments": dict(arguments or {}), "dsarLegalOnly": legal_only},
            texts=dict(texts or {}),
        ),
        pending=pending,
    )


def _append(
    principal: Principal,
    request: DataRightsRequest,
    target: RequestState,
    *,
    now: datetime,
    reason_code: str = "",
) -> None:
    """Move `request` to `target` and append the trail step; inside the caller's
    transaction, with the request locked. The table is checked here, whoever calls."""
    try:
        lifecycle.check_transition(request.state, target)
    except RuleError as exc:
        raise invalid(exc) from None
    last = request.trail.order_by("-position").first()
    # The trail never goes back in time, even when a fixed clock is older than its head.
    at = max(now, last.occurred_at) if last else now
    DataRightsEvent.objects.create(
        tenant_id=request.tenant_id,
        request=request,
        position=(last.position + 1) if last else 1,
        from_state=request.state,
        to_state=target,
        occurred_at=at,
        actor_kind=principal.kind,
        actor_id=str(principal.id),
        reason_code=reason_code,
    )
    previous = request.state
    request.state = target
    request.updated_at = at
    if target in lifecycle.TERMINAL or target in (S.COMPLETED, S.FAILED):
        request.finished_at = at
    request.save()
    _audit(
        principal,
        request,
        AuditAction.DSAR_REQUEST_TRANSITIONED,
        reason_code=reason_code,
        payload={"from": previous, "to": target.value},
    )


def _locked(request_id: uuid.UUID, tenant_id: uuid.UUID) -> DataRightsRequest:
    row = (
        DataRightsRequest.objects.select_for_update()
        .select_related("member")
        .filter(tenant_id=tenant_id, id=request_id)
        .first()
    )
    if row is None:
        raise NotFound("No such data-rights request.")
    return row


def _screened(value: Any, field: str, *, required: bool) -> str:
    if value is None or value == "":
        if required:
            raise ValidationFailed(f"{field} is required.", field=field, rule="required")
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be text.", field=field, rule="wrong-type")
    try:
        text = check_usable(value)
    except TextRuleError as exc:
        raise ValidationFailed(exc.message, field=field, rule=exc.rule) from None
    if len(text) > REASON_MAX:
        raise ValidationFailed(
            f"{field} is at most {REASON_MAX} characters.", field=field, rule="max_length"
        )
    if not text.strip():
        if required:
            raise ValidationFailed(f"{field} is required.", field=field, rule="required")
        return ""
    return text


def _duplicate(existing: DataRightsRequest) -> Conflict:
    return Conflict(
        f"You already have an open {existing.kind} request.",
        code="open-request-exists",
        field="kind",
        rule="one-open-request-per-kind",
        extra={"openRequestId": str(existing.id)},
    )


# --------------------------------------------------------------------------- open


def data_rights_open(
    *,
    principal: Principal,
    member: User,
    kind: str,
    payload: Any = None,
    now: datetime | None = None,
) -> DataRightsRequest:
    """File a request (spec: IrisDataRightsRequest). Validates the payload of its kind;
    a second open request of the same kind is 409 naming the open one. Filed by the
    member in their own signed-in session, it is verified at once (session-token); filed
    by a surface, it waits for a code the member receives or an operator's sign-off.
    The clock starts now and never pauses (`dsar.deadlines`)."""
    now = now or timezone.now()
    if principal.kind not in {"member", "surface"}:
        raise Forbidden("Only the member, or a surface acting for them, files a request.")
    try:
        stored = payloads.validate(kind, payload)
    except RuleError as exc:
        raise invalid(exc) from None
    passphrase = stored.pop("passphrase", None)
    existing = open_request_of(member, kind)
    if existing is not None:
        raise _duplicate(existing)
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        member,
        "dsar.open",
        arguments={"kind": kind},
        pending=decided,
    )
    jurisdiction = jurisdiction_of(member.tenant_id)
    clock = deadlines.clock_for(jurisdiction, now)
    try:
        with transaction.atomic(durable=True):
            record_pending(decided)
            request = DataRightsRequest(
                tenant_id=member.tenant_id,
                member=member,
                kind=kind,
                state=S.SUBMITTED,
                payload=stored,
                jurisdiction=jurisdiction,
                filed_by=principal.kind,
                received_at=now,
                verify_by=clock.verify_by,
                due_at=clock.due_at,
                confirm_by=clock.confirm_by,
                # The receipt email below is the confirmation CCPA asks for.
                confirmed_at=now,
                updated_at=now,
            )
            if passphrase:
                request.passphrase_handle = vault.vault_put(
                    value=passphrase,
                    tenant=member.tenant,
                    owner=member,
                    purpose=PASSPHRASE_PURPOSE,
                    actor=principal.actor,
                )
            request.save(force_insert=True)
            DataRightsEvent.objects.create(
                tenant_id=member.tenant_id,
                request=request,
                position=1,
                from_state="",
                to_state=S.SUBMITTED,
                occurred_at=now,
                actor_kind=principal.kind,
                actor_id=str(principal.id),
            )
            _audit(
                principal,
                request,
                AuditAction.DSAR_REQUEST_SUBMITTED,
                payload={"jurisdiction": jurisdiction, "filedBy": principal.kind},
            )
            if principal.kind == "member":
                request.verified_at = now
                request.verification_method = VerificationMethod.SESSION_TOKEN
                _append(principal, request, S.VERIFIED, now=now, reason_code="session-token")
                after_commit(_queue_process, request.id)
            after_commit(_send_receipt, request.id)
    except IntegrityError:
        # Another request of this kind opened between the check and the insert.
        existing = open_request_of(member, kind)
        if existing is None:
            raise
        raise _duplicate(existing) from None
    return request


def _queue_process(request_id: uuid.UUID) -> None:
    from dsar import tasks

    enqueue(tasks.process, str(request_id))


def _send_receipt(request_id: uuid.UUID) -> None:
    request = DataRightsRequest.objects.select_related("member").get(id=request_id)
    if not request.member.email:
        return
    send_mail(
        "We received your data request",
        (
            f"We received your {request.kind} request on "
            f"{request.received_at:%d %B %Y}. We will answer by {request.due_at:%d %B %Y}. "
            "You can follow it on your data requests page."
        ),
        None,
        [request.member.email],
    )


# --------------------------------------------------------------------------- transitions


def data_rights_transition(
    *,
    principal: Principal,
    member: User | None,
    request_id: uuid.UUID,
    to: str,
    reason_code: str = "",
    now: datetime | None = None,
) -> DataRightsRequest:
    """Move a request along its lifecycle, as the caller may (module docstring).

    Verification goes through `data_rights_verify`; completion of a delete or export needs
    the work's result fingerprint, which only the work itself records."""
    now = now or timezone.now()
    request = _visible(principal, member, request_id)
    try:
        target = lifecycle.check_transition(request.state, to)
    except RuleError as exc:
        raise invalid(exc) from None
    if target is S.VERIFIED:
        raise ValidationFailed(
            "Verify with a method: send method and code or reference.",
            field="method",
            rule="required",
            allowed=[m.value for m in VerificationMethod],
        )
    _check_mover(principal, target)
    if (
        target is S.COMPLETED
        and request.kind != RequestKind.ACCESS
        and not request.result_fingerprint
    ):
        raise Conflict(
            "The work has not finished: it completes the request itself.",
            code="work-not-finished",
            field="to",
            rule="result-required",
        )
    reason = _screened(reason_code, "reasonCode", required=False)
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.transition",
        subject_ids=(str(request.id),),
        arguments={"to": target.value},
        texts={"reasonCode": reason},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        request = _locked(request.id, request.tenant_id)
        _append(principal, request, target, now=now, reason_code=reason)
        if target is S.IN_PROGRESS:
            after_commit(_queue_process, request.id)
    return request


def _check_mover(principal: Principal, target: RequestState) -> None:
    if principal.kind == "system":
        return
    if _is_owner_side(principal) and target in MEMBER_MOVES:
        return
    if is_legal(principal) and target in OPERATOR_MOVES:
        return
    raise Forbidden(
        f"You may not move a request to {target.value}.",
        code="transition-not-permitted",
        field="to",
        rule="caller-may-not-move",
    )


def _visible(principal: Principal, member: User | None, request_id: uuid.UUID) -> DataRightsRequest:
    """The request, if the caller may see it: the member's own, or any in the legal
    operator's tenant. Anything else is 404."""
    if principal.tenant_id is None:
        raise NotFound("No such data-rights request.")
    query = DataRightsRequest.objects.select_related("member").filter(
        tenant_id=principal.tenant_id, id=request_id
    )
    if principal.kind == "operator":
        if not is_legal(principal):
            raise NotFound("No such data-rights request.")
    elif principal.kind != "system":
        if member is None:
            raise NotFound("No such data-rights request.")
        query = query.filter(member=member)
    request = query.first()
    if request is None:
        raise NotFound("No such data-rights request.")
    return request


# --------------------------------------------------------------------------- verification


def _code_hash(request_id: uuid.UUID, code: str) -> str:
    key = keys.derived_keys(CODE_PURPOSE)[0][1]
    return hmac.new(key, f"{request_id}:{code}".encode(), hashlib.sha256).hexdigest()


def data_rights_send_code(
    *,
    principal: Principal,
    member: User,
    request_id: uuid.UUID,
    method: str,
    now: datetime | None = None,
) -> VerificationCode:
    """Send a one-time code (email link or phone OTP) for an unverified request. Earlier
    unused codes stop working. Only the code's keyed hash is kept. Codes go through
    Django's email backend (console in development); the phone gateway is the same
    backend's address for the member (docs/decisions/data-rights.md)."""
    now = now or timezone.now()
    request = _visible(principal, member, request_id)
    if method not in {m.value for m in CODE_METHODS}:
        raise ValidationFailed(
            "method is a code method.",
            field="method",
            rule="invalid_choice",
            allowed=sorted(m.value for m in CODE_METHODS),
        )
    if request.state != S.SUBMITTED:
        raise Conflict(
            "Only a request waiting for verification gets a code.",
            code="not-awaiting-verification",
            field="method",
            rule="state",
        )
    if not request.member.email:
        raise Conflict(
            "No address is on record to send the code to.",
            code="no-contact-address",
            field="method",
            rule="contact-required",
        )
    code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.send_code",
        subject_ids=(str(request.id),),
        arguments={"method": method},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        request = _locked(request.id, request.tenant_id)
        VerificationCode.objects.filter(
            tenant_id=request.tenant_id, request=request, used_at__isnull=True
        ).update(used_at=now)
        row = VerificationCode.objects.create(
            tenant_id=request.tenant_id,
            request=request,
            method=method,
            code_hash=_code_hash(request.id, code),
            created_at=now,
            expires_at=now + timedelta(minutes=settings.IRIS_DSAR_CODE_TTL_MINUTES),
        )
        _audit(principal, request, AuditAction.DSAR_CODE_SENT, payload={"method": method})
        after_commit(_mail_code, request.member.email, code, request.kind)
    return row


def _mail_code(address: str, code: str, kind: str) -> None:
    send_mail(
        "Your verification code",
        (
            f"Your code to confirm your {kind} request is {code}. It works once, for "
            f"{settings.IRIS_DSAR_CODE_TTL_MINUTES} minutes. If you did not ask for it, "
            "ignore this message."
        ),
        None,
        [address],
    )


def data_rights_verify(
    *,
    principal: Principal,
    member: User | None,
    request_id: uuid.UUID,
    method: str,
    code: str | None = None,
    reference: str | None = None,
    now: datetime | None = None,
) -> DataRightsRequest:
    """submitted → verified by `method`. A code is checked against its keyed hash: good
    once, before it expires, for at most VerificationCode.MAX_ATTEMPTS tries (a wrong try
    is counted and audited even though nothing else changes). Operator sign-off and court
    orders are for an operator with the legal role; a court order names its reference."""
    now = now or timezone.now()
    request = _visible(principal, member, request_id)
    try:
        wanted = VerificationMethod(method)
    except ValueError:
        raise ValidationFailed(
            "method is not a verification method.",
            field="method",
            rule="invalid_choice",
            allowed=[m.value for m in VerificationMethod],
        ) from None
    try:
        lifecycle.check_transition(request.state, S.VERIFIED)
    except RuleError as exc:
        raise invalid(exc) from None
    if wanted in OPERATOR_METHODS:
        if not is_legal(principal):
            raise Forbidden(
                "Only an operator with the legal role signs a request off.",
                code="transition-not-permitted",
                field="method",
                rule="legal-role-required",
            )
        ref = _screened(reference, "reference", required=wanted is VerificationMethod.COURT_ORDER)
    elif wanted in CODE_METHODS:
        if not _is_owner_side(principal) and principal.kind != "system":
            raise Forbidden(
                "The member verifies with their own code.",
                code="transition-not-permitted",
                field="method",
                rule="member-only",
            )
        if not isinstance(code, str) or not code.strip():
            raise ValidationFailed("code is required.", field="code", rule="required")
        _check_code(principal, request, wanted, code.strip(), now)
        ref = ""
    else:  # session-token: only the member's own signed-in session proves it
        if principal.kind != "member":
            raise Forbidden(
                "Only the member's own session verifies by session.",
                code="transition-not-permitted",
                field="method",
                rule="member-session-only",
            )
        ref = ""
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.verify",
        subject_ids=(str(request.id),),
        arguments={"method": wanted.value},
        texts={"reference": ref or None},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        request = _locked(request.id, request.tenant_id)
        if wanted in CODE_METHODS:
            # Spent inside the transaction that verifies, so a code works once.
            spent = VerificationCode.objects.filter(
                tenant_id=request.tenant_id,
                request=request,
                code_hash=_code_hash(request.id, code.strip() if code else ""),
                used_at__isnull=True,
            ).update(used_at=now)
            if spent != 1:
                raise _code_refused("code-used")
        request.verified_at = now
        request.verification_method = wanted.value
        _append(principal, request, S.VERIFIED, now=now, reason_code=wanted.value)
        after_commit(_queue_process, request.id)
    return request


def _code_refused(rule: str) -> ValidationFailed:
    words = {
        "code-wrong": "That code is not right.",
        "code-expired": "That code has expired: ask for a new one.",
        "code-used": "That code was already used: ask for a new one.",
        "too-many-attempts": "Too many tries: ask for a new code.",
    }
    return ValidationFailed(words[rule], code="verification-failed", field="code", rule=rule)


def _check_code(
    principal: Principal,
    request: DataRightsRequest,
    method: VerificationMethod,
    code: str,
    now: datetime,
) -> None:
    """Raise unless `code` is the latest live code of `method`; count the try."""
    with transaction.atomic(durable=True):
        latest = (
            VerificationCode.objects.select_for_update()
            .filter(tenant_id=request.tenant_id, request=request, method=method.value)
            .order_by("-created_at")
            .first()
        )
        rule = None
        if latest is None:
            rule = "code-wrong"
        elif latest.used_at is not None:
            rule = "code-used"
        elif latest.attempts >= VerificationCode.MAX_ATTEMPTS:
            rule = "too-many-attempts"
        elif now >= latest.expires_at:
            rule = "code-expired"
        elif not hmac.compare_digest(latest.code_hash, _code_hash(request.id, code)):
            rule = "code-wrong"
            latest.attempts += 1
            latest.save(update_fields=["attempts"])
        if rule is not None:
            _audit(principal, request, AuditAction.DSAR_CODE_REFUSED, reason_code=rule)
    if rule is not None:
        raise _code_refused(rule)


# --------------------------------------------------------------------------- extension


def data_rights_extend(
    *,
    principal: Principal,
    request_id: uuid.UUID,
    reason: str,
    now: datetime | None = None,
) -> DataRightsRequest:
    """Extend the deadline once (GDPR: two more months; CCPA: 45 more days), before the
    first deadline passes, with the reason sent to the member. Legal operators only."""
    now = now or timezone.now()
    if not is_legal(principal):
        raise NotFound("No such data-rights request.")
    request = _visible(principal, None, request_id)
    text = _screened(reason, "reason", required=True)
    if request.state not in {s.value for s in OPEN_STATES}:
        raise Conflict(
            "Only an open request can be extended.",
            code="request-not-open",
            field="extend",
            rule="state",
        )
    try:
        new_due = deadlines.check_extension(
            clock=clock_of(request),
            already_extended=request.extended_at is not None,
            reason=text,
            now=now,
        )
    except RuleError as exc:
        raise invalid(exc) from None
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.extend",
        subject_ids=(str(request.id),),
        texts={"reason": text},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        request = _locked(request.id, request.tenant_id)
        request.extended_at = now
        request.extension_reason = text
        request.due_at = new_due
        request.updated_at = now
        request.save()
        _audit(
            principal,
            request,
            AuditAction.DSAR_REQUEST_EXTENDED,
            payload={"dueAt": new_due.isoformat()},
        )
        after_commit(_mail_extension, request.id)
    return request


def _mail_extension(request_id: uuid.UUID) -> None:
    request = DataRightsRequest.objects.select_related("member").get(id=request_id)
    if not request.member.email:
        return
    send_mail(
        "We need more time for your data request",
        (
            f"We need more time to answer your {request.kind} request. We will answer by "
            f"{request.due_at:%d %B %Y}. Why: {request.extension_reason}"
        ),
        None,
        [request.member.email],
    )


# --------------------------------------------------------------------------- legal holds


def legal_hold_place(
    *, principal: Principal, member: User, reason: str, now: datetime | None = None
) -> LegalHold:
    """Place a legal hold: deletion of the member's data waits until it is lifted."""
    now = now or timezone.now()
    if member.tenant_id != principal.tenant_id:
        raise NotFound("No such member.")
    text = _screened(reason, "reason", required=True)
    existing = active_hold(member)
    if existing is not None:
        raise Conflict(
            "A legal hold already applies.",
            code="legal-hold-exists",
            field="member",
            rule="one-hold",
            extra={"holdId": str(existing.id)},
        )
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        member,
        "dsar.legal_hold_place",
        texts={"reason": text},
        legal_only=True,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        hold = LegalHold.objects.create(
            tenant_id=member.tenant_id,
            member=member,
            reason=text,
            placed_by=str(principal.id),
            placed_at=now,
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.DSAR_LEGAL_HOLD_PLACED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[member.public_id, hold.id],
            payload={"holdId": str(hold.id)},
        )
    return hold


def legal_hold_lift(
    *, principal: Principal, member: User, now: datetime | None = None
) -> LegalHold:
    """Lift the member's legal hold; deletions that waited for it are queued again."""
    now = now or timezone.now()
    if member.tenant_id != principal.tenant_id:
        raise NotFound("No such member.")
    decided: list[dict[str, Any]] = []
    _govern(principal, member, "dsar.legal_hold_lift", legal_only=True, pending=decided)
    hold = active_hold(member)
    if hold is None:
        raise NotFound("No legal hold applies.")
    with transaction.atomic(durable=True):
        record_pending(decided)
        LegalHold.objects.filter(tenant_id=member.tenant_id, id=hold.id).update(
            lifted_at=now, lifted_by=str(principal.id)
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.DSAR_LEGAL_HOLD_LIFTED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[member.public_id, hold.id],
            payload={"holdId": str(hold.id)},
        )
        for waiting in DataRightsRequest.objects.filter(
            tenant_id=member.tenant_id,
            member=member,
            kind=RequestKind.DELETE,
            state__in=[S.VERIFIED, S.IN_PROGRESS],
        ).values_list("id", flat=True):
            after_commit(_queue_process, waiting)
    hold.refresh_from_db()
    return hold


# --------------------------------------------------------------------------- tenant setting


def data_rights_jurisdiction_set(*, principal: Principal, tenant: Tenant, jurisdiction: str) -> str:
    """Set which statutory clock the tenant's new requests run on (GDPR or CCPA). Requests
    already filed keep the clock they were received under."""
    if jurisdiction not in {j.value for j in Jurisdiction}:
        raise ValidationFailed(
            "jurisdiction is gdpr or ccpa.",
            field="jurisdiction",
            rule="invalid_choice",
            allowed=[j.value for j in Jurisdiction],
        )
    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        Operation(
            name="dsar.jurisdiction_set",
            effect=Effect.WRITE,
            principal=principal,
            tenant_id=tenant.id,
            attributes={"arguments": {"jurisdiction": jurisdiction}},
        ),
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        TenantDataRightsPolicy.objects.update_or_create(
            tenant=tenant, defaults={"jurisdiction": jurisdiction}
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.DSAR_JURISDICTION_SET,
            tenant_id=tenant.id,
            policy_id=POLICY_ID,
            subject_ids=[tenant.id],
            payload={"jurisdiction": jurisdiction},
        )
    return jurisdiction
