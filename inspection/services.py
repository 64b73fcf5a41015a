"""Inspection use cases: the only code that writes inspections, their trail, snapshots,
reads, incident references and notices.

Each public function is keyword-only and takes the acting principal. It validates its
input (malformed input is refused before anything is recorded), then asks the governance
kernel. A request the rules refuse — an illegal move, an empty justification, a self-grant,
a forged or spent incident reference, a gate refusal, a read after expiry, a member or a
surface knocking at all — is put to the kernel as a refusal, so `InspectionGateCheck`
records it as a deny with its reason code before the caller gets the problem. Everything
allowed happens in one durable transaction with its allow record, its trail step and its
`iris.admin_inspection.transition` event.

Who may move an inspection where (docs/decisions/inspection.md):
- an operator requests (requested → the path they name, in one go);
- a reviewer — another operator of the tenant with a reviewing role — grants (through the
  gate, `inspection.policy`) or denies; the requester may withdraw (deny) their own;
- the requester, the reviewer, an admin, or Iris itself (expiry) closes a grant; only
  trust and safety closes an incident escalation under an investigation carve-out;
- Iris itself denies requests that waited too long and closes grants that ran out.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.db import transaction
from django.utils import timezone

from governance import keys
from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import (
    Conflict,
    Forbidden,
    IrisError,
    NotFound,
    ValidationFailed,
    invalid,
)
from governance.models import Tenant, User
from governance.pipeline import (
    Check,
    Decision,
    Denied,
    Effect,
    Hook,
    Operation,
    Verdict,
    govern,
    record_pending,
)
from governance.principal import Principal
from governance.roles import Role
from governance.rules import RuleError
from governance.text import TextRuleError, check_usable
from inspection import incidents, lifecycle, policy
from inspection.enums import (
    PATHS,
    IncidentReferenceStatus,
    InspectionState,
    ReadKind,
    Refusal,
    Sensitivity,
)
from inspection.models import (
    JUSTIFICATION_MAX,
    MAX_HOURS,
    IncidentReference,
    Inspection,
    InspectionNotice,
    InspectionPolicy,
    InspectionTransition,
    SnapshotItem,
    SnapshotRead,
)
from inspection.selectors import (
    SnapshotView,
    current_consent_snapshot,
    entry_is_sensitive,
    inspection_get,
    is_operator,
    snapshot_candidates,
    snapshot_view,
    tenant_of,
    time_boxes,
)
from memory.rules.scopes import build_scope_key

log = logging.getLogger(__name__)

POLICY_ID = "iris.admin_inspection.state_machine.v1"
NOTICE_WINDOW = timedelta(hours=72)
REASON_CODE_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SCOPE_KEY_MAX = 200
S = InspectionState
R = Refusal

# Who may close a grant besides the two people on it.
CLOSER_ROLES = frozenset({Role.ADMIN.value})
# Who may replay a snapshot: the roles that verify the audit chain.
AUDITOR_ROLES = frozenset({Role.ADMIN.value, Role.LEGAL.value, Role.TRUST_AND_SAFETY.value})
ISSUER_ROLES = frozenset({Role.TRUST_AND_SAFETY.value})

_STATUS: dict[Refusal, int] = {
    R.NOT_AN_OPERATOR: 404,
    R.TRANSITION_NOT_ALLOWED: 409,
    R.JUSTIFICATION_REQUIRED: 400,
}


# --------------------------------------------------------------------------- the gate


class InspectionGateCheck(Check):
    """Records a refusal the inspection services reached as a kernel deny, with its
    reason code. Registered by `inspection.apps`; decides only operations that carry an
    `inspectionRefusal` attribute, so every refused attempt is on record."""

    name = "inspection-gate"
    priority = 23
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        code = op.attributes.get("inspectionRefusal")
        if not code:
            return None
        return Decision(self.name, Verdict.DENY, str(code), "Refused by the inspection policy.")


@dataclass(frozen=True)
class Refused:
    """A refusal: the reason the audit records, and the problem the caller answers with
    (which for a 404 does not say the reason)."""

    reason: Refusal
    error: IrisError


def _refusal(code: Refusal, detail: str, *, field: str | None = None, rule: str = "") -> Refused:
    """The problem a refusal answers with: 404 for someone who may not see inspections at
    all, 409 for an illegal move, 400 for a missing justification, else 403."""
    status = _STATUS.get(code, 403)
    error: IrisError
    if status == 404:
        error = NotFound(NOT_FOUND_TEXT)
    else:
        cls = {409: Conflict, 400: ValidationFailed}.get(status, Forbidden)
        error = cls(detail, code=code.value, field=field, rule=rule or code.value)
    return Refused(code, error)


NOT_FOUND_TEXT = "No such inspection."


def _roles(principal: Principal) -> list[str]:
    return sorted(principal.roles)


def _operation(
    principal: Principal,
    name: str,
    *,
    member: User | None,
    tenant_id: Any,
    subject_ids: tuple[str, ...] = (),
    arguments: Mapping[str, Any] | None = None,
    texts: Mapping[str, str | None] | None = None,
    effect: Effect = Effect.WRITE,
    refused: str = "",
) -> Operation:
    attributes: dict[str, Any] = {"arguments": dict(arguments or {})}
    if refused:
        attributes["inspectionRefusal"] = refused
    return Operation(
        name=name,
        effect=effect,
        principal=principal,
        tenant_id=tenant_id,
        member_id=member.public_id if member is not None else None,
        subject_ids=subject_ids,
        attributes=attributes,
        texts=dict(texts or {}),
    )


def _refuse(
    principal: Principal,
    name: str,
    refused: Refused,
    *,
    member: User | None = None,
    subject_ids: tuple[str, ...] = (),
    arguments: Mapping[str, Any] | None = None,
) -> IrisError:
    """Put a refused attempt on record (a kernel deny with its code) and return the error
    the caller raises. The tenant is the caller's own, so the record lands in its chain."""
    reason = refused.reason.value
    try:
        govern(
            Hook.PRE_WRITE,
            _operation(
                principal,
                name,
                member=None,
                tenant_id=principal.tenant_id,
                subject_ids=(
                    *((str(member.public_id),) if member is not None else ()),
                    *subject_ids,
                ),
                arguments={**(arguments or {}), "refusal": reason},
                refused=reason,
            ),
        )
    except Denied:
        pass
    return refused.error


def _allow(
    principal: Principal,
    name: str,
    *,
    member: User | None,
    tenant_id: Any,
    subject_ids: tuple[str, ...] = (),
    arguments: Mapping[str, Any] | None = None,
    texts: Mapping[str, str | None] | None = None,
    effect: Effect = Effect.WRITE,
) -> list[dict[str, Any]]:
    """Govern an allowed operation; the allow is queued for its transaction."""
    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        _operation(
            principal,
            name,
            member=member,
            tenant_id=tenant_id,
            subject_ids=subject_ids,
            arguments=arguments,
            texts=texts,
            effect=effect,
        ),
        pending=decided,
    )
    return decided


def _require_operator(principal: Principal, name: str, **kwargs: Any) -> None:
    """Members, surfaces and anyone outside a tenant never see inspections: 404, on record."""
    if not is_operator(principal):
        raise _refuse(principal, name, _refusal(R.NOT_AN_OPERATOR, NOT_FOUND_TEXT), **kwargs)


# --------------------------------------------------------------------------- helpers


def _screened_justification(value: Any) -> str:
    """The justification as stored. Text that is not usable text at all (control
    characters, unpaired surrogates) is malformed input: refused before the kernel, like
    every malformed field. An empty one is a refusal the kernel records."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(
            "justification must be text.", field="justification", rule="wrong-type"
        )
    try:
        text = check_usable(value)
    except TextRuleError as exc:
        raise ValidationFailed(exc.message, field="justification", rule=exc.rule) from None
    if len(text) > JUSTIFICATION_MAX:
        raise ValidationFailed(
            f"justification is at most {JUSTIFICATION_MAX} characters.",
            field="justification",
            rule="max_length",
        )
    return text.strip()


def _reason_code(value: Any, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or len(value) > 64 or not REASON_CODE_RE.match(value):
        raise ValidationFailed(
            "reasonCode is a short code: lower-case words joined by hyphens.",
            field="reasonCode",
            rule="invalid",
        )
    return value


def _scope(member: User, scope: Any) -> tuple[str, str, dict[str, str]]:
    """(kind, key, identifiers) of a wire scope object."""
    if scope is None:
        scope = {"kind": "profile", "userId": str(member.public_id)}
    if not isinstance(scope, Mapping) or not isinstance(scope.get("kind"), str):
        raise ValidationFailed(
            "scope is a scope object with a kind.", field="scope", rule="invalid"
        )
    identifiers = {k: v for k, v in scope.items() if k != "kind"}
    try:
        key = build_scope_key(scope["kind"], identifiers)
    except RuleError as exc:
        raise invalid(exc, field=f"scope.{exc.field}") from None
    if len(key) > SCOPE_KEY_MAX:
        raise ValidationFailed(
            f"The scope's identifiers are at most {SCOPE_KEY_MAX} characters together.",
            field="scope",
            rule="max_length",
        )
    return scope["kind"], key, identifiers


def _reference_text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValidationFailed(
            "incidentReference is text.", field="incidentReference", rule="wrong-type"
        )
    if len(value) > incidents.MAX_LENGTH:
        raise ValidationFailed(
            "incidentReference is not a reference.", field="incidentReference", rule="max_length"
        )
    return value.strip()


def _uuid_or_none(value: Any, field: str) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed(f"{field} must be a UUID.", field=field, rule="invalid") from None


def _audit_transition(
    principal: Principal,
    inspection: Inspection,
    *,
    from_state: str,
    to_state: str,
    reason_code: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    audit_record(
        actor=principal.actor,
        action=AuditAction.ADMIN_INSPECTION_TRANSITION,
        tenant_id=inspection.tenant_id,
        policy_id=POLICY_ID,
        reason_code=reason_code,
        subject_ids=[inspection.member.public_id, inspection.id],
        payload={
            "inspectionId": str(inspection.id),
            "from": from_state,
            "to": to_state,
            "role": _roles(principal),
            "scope": {"kind": inspection.scope_kind, "key": inspection.scope_key},
            "targetUserId": str(inspection.member.public_id),
            "targetTenantId": str(inspection.tenant_id),
            "path": inspection.path,
            "sensitivity": inspection.sensitivity,
            **(extra or {}),
        },
    )


def _append(
    principal: Principal,
    inspection: Inspection,
    target: InspectionState,
    *,
    now: datetime,
    reason_code: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Move `inspection` to `target` and append the trail step and its audit event; inside
    the caller's transaction, with the row locked. The table is checked here, whoever
    calls."""
    try:
        lifecycle.transition(inspection.state, target)
    except RuleError as exc:
        raise invalid(exc) from None
    last = inspection.trail.order_by("-position").first()
    at = max(now, last.occurred_at) if last else now
    InspectionTransition.objects.create(
        tenant_id=inspection.tenant_id,
        inspection=inspection,
        position=(last.position + 1) if last else 1,
        from_state=inspection.state,
        to_state=target,
        occurred_at=at,
        actor_kind=principal.kind,
        actor_id=str(principal.id),
        actor_roles=_roles(principal),
        reason_code=reason_code,
    )
    previous = inspection.state
    inspection.state = target
    inspection.updated_at = at
    if target in PATHS:
        inspection.path = target.value
    if target in lifecycle.TERMINAL:
        inspection.finished_at = at
    inspection.save()
    _audit_transition(
        principal,
        inspection,
        from_state=previous,
        to_state=target.value,
        reason_code=reason_code,
        extra=extra,
    )


def _locked(inspection_id: uuid.UUID, tenant_id: Any) -> Inspection:
    row = (
        Inspection.objects.select_for_update()
        .select_related("member", "tenant")
        .filter(tenant_id=tenant_id, id=inspection_id)
        .first()
    )
    if row is None:
        raise NotFound(NOT_FOUND_TEXT)
    return row


def _acting_user(principal: Principal) -> User:
    return User.objects.get(tenant_id=tenant_of(principal), public_id=principal.id)


def _user_roles(user: User) -> frozenset[str]:
    return frozenset(user.groups.values_list("name", flat=True))


# --------------------------------------------------------------------------- request


def inspection_request(
    *,
    principal: Principal,
    member: User,
    path: str,
    justification: Any,
    scope: Any = None,
    sensitivity: str = Sensitivity.STANDARD.value,
    reason_code: Any = None,
    incident_reference: Any = None,
    consent_snapshot_id: Any = None,
    now: datetime | None = None,
) -> Inspection:
    """An operator asks to see one member's memory, on one path, with a justification.

    The inspection is requested and routed to its path in one transaction (two trail
    steps); it then waits for a reviewer until the tenant's pending window runs out. An
    incident escalation cites its signed incident reference here; a sensitive inspection
    cites the member's current consent snapshot (both are checked at the grant)."""
    now = now or timezone.now()
    name = "inspection.request"
    _require_operator(principal, name, member=member)
    if member.tenant_id != principal.tenant_id:
        raise NotFound("No such member.")
    try:
        route = InspectionState(path)
    except ValueError:
        raise ValidationFailed(
            "path is an inspection path.",
            field="path",
            rule="invalid_choice",
            allowed=sorted(p.value for p in PATHS),
        ) from None
    if sensitivity not in {s.value for s in Sensitivity}:
        raise ValidationFailed(
            "sensitivity is standard or sensitive.",
            field="sensitivity",
            rule="invalid_choice",
            allowed=[s.value for s in Sensitivity],
        )
    text = _screened_justification(justification)
    code = _reason_code(reason_code, route.value)
    scope_kind, scope_key, identifiers = _scope(member, scope)
    snapshot_id = _uuid_or_none(consent_snapshot_id, "consentSnapshotId")
    incident_reference = _reference_text(incident_reference)
    arguments = {"path": route.value, "sensitivity": sensitivity, "scopeKind": scope_kind}
    if route not in PATHS:
        raise _refuse(
            principal,
            name,
            _refusal(
                R.TRANSITION_NOT_ALLOWED, "A request goes to one of the three paths.", field="path"
            ),
            member=member,
            arguments=arguments,
        )
    if not text:
        raise _refuse(
            principal,
            name,
            _refusal(
                R.JUSTIFICATION_REQUIRED,
                "Say why you need to look: a justification is required.",
                field="justification",
                rule="required",
            ),
            member=member,
            arguments=arguments,
        )
    decided = _allow(
        principal,
        name,
        member=member,
        tenant_id=member.tenant_id,
        arguments=arguments,
        texts={"justification": text},
    )
    _, pending_hours = time_boxes(member.tenant_id)
    requester = _acting_user(principal)
    with transaction.atomic(durable=True):
        record_pending(decided)
        inspection = Inspection.objects.create(
            tenant_id=member.tenant_id,
            member=member,
            requester=requester,
            requester_roles=_roles(principal),
            state=S.REQUESTED,
            sensitivity=sensitivity,
            scope_kind=scope_kind,
            scope_key=scope_key,
            scope_identifiers=identifiers,
            reason_code=code,
            justification=text,
            incident_reference_text=(incident_reference or "").strip(),
            consent_snapshot_id=snapshot_id,
            requested_at=now,
            pending_until=now + timedelta(hours=pending_hours),
            updated_at=now,
        )
        InspectionTransition.objects.create(
            tenant_id=member.tenant_id,
            inspection=inspection,
            position=1,
            from_state="",
            to_state=S.REQUESTED,
            occurred_at=now,
            actor_kind=principal.kind,
            actor_id=str(principal.id),
            actor_roles=_roles(principal),
            reason_code=code,
        )
        _audit_transition(
            principal, inspection, from_state="", to_state=S.REQUESTED.value, reason_code=code
        )
        _append(principal, inspection, route, now=now, reason_code=code)
    return inspection


# --------------------------------------------------------------------------- transitions


def inspection_transition(
    *,
    principal: Principal,
    inspection_id: uuid.UUID | str,
    to: str,
    reason_code: Any = None,
    incident_reference: Any = None,
    consent_snapshot_id: Any = None,
    carve_out: bool = False,
    now: datetime | None = None,
) -> Inspection:
    """Move an inspection along the state machine, as the caller may (module docstring).

    To `granted`: the reviewer's move, through the gate; the snapshot (the exact entry and
    revision ids) is fixed in the same transaction and the grant runs for the tenant's
    grant hours. A reference or consent snapshot sent here replaces the one the request
    cited. To `closed`: a sensitive read owes the member a notice within 72 hours unless
    trust and safety closes an incident escalation under an investigation carve-out."""
    now = now or timezone.now()
    name = "inspection.transition"
    _require_operator(principal, name, subject_ids=(str(inspection_id),))
    inspection = inspection_get(principal, inspection_id)
    subject = (str(inspection.id),)
    try:
        target = InspectionState(to)
    except ValueError:
        raise ValidationFailed(
            "to is an inspection state.",
            field="to",
            rule="invalid_choice",
            allowed=[s.value for s in InspectionState],
        ) from None
    code = _reason_code(reason_code, target.value)
    snapshot_id = _uuid_or_none(consent_snapshot_id, "consentSnapshotId")
    incident_reference = _reference_text(incident_reference)
    if not isinstance(carve_out, bool):
        raise ValidationFailed("carveOut is true or false.", field="carveOut", rule="wrong-type")
    member = inspection.member
    arguments = {"to": target.value, "from": inspection.state}

    def refuse(error: Refused) -> IrisError:
        return _refuse(
            principal, name, error, member=member, subject_ids=subject, arguments=arguments
        )

    if not lifecycle.is_allowed(inspection.state, target):
        allowed = sorted(lifecycle.TRANSITIONS[InspectionState(inspection.state)])
        error = _refusal(
            R.TRANSITION_NOT_ALLOWED,
            f"An inspection that is {inspection.state} cannot become {target.value}.",
            field="to",
        )
        error.error.allowed = [a.value for a in allowed]
        raise refuse(error)
    if carve_out and not (
        target is S.CLOSED
        and inspection.path == S.INCIDENT_ESCALATION
        and Role.TRUST_AND_SAFETY.value in principal.roles
    ):
        raise refuse(
            _refusal(
                R.CARVE_OUT_NOT_PERMITTED,
                "Only trust and safety closes an incident escalation under a carve-out.",
                field="carveOut",
            )
        )
    is_requester = str(principal.id) == str(inspection.requester.public_id)
    if target in PATHS and not is_requester:
        raise refuse(_refusal(R.NOT_PERMITTED, "Only the requester routes a request.", field="to"))
    if target is S.DENIED and not (is_requester or principal.roles & policy.REVIEWER_ROLES):
        raise refuse(
            _refusal(R.NOT_PERMITTED, "Only a reviewer or the requester denies.", field="to")
        )
    if target is S.CLOSED and not (
        is_requester
        or (
            inspection.reviewer is not None
            and str(principal.id) == str(inspection.reviewer.public_id)
        )
        or principal.roles & CLOSER_ROLES
    ):
        raise refuse(
            _refusal(
                R.NOT_PERMITTED, "Only the people on the grant or an admin close it.", field="to"
            )
        )
    if target is S.GRANTED:
        return _grant(
            principal,
            inspection,
            reason_code=code,
            incident_reference=incident_reference,
            consent_snapshot_id=snapshot_id,
            now=now,
            refuse=refuse,
        )
    decided = _allow(
        principal,
        name,
        member=member,
        tenant_id=inspection.tenant_id,
        subject_ids=subject,
        arguments=arguments,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        inspection = _locked(inspection.id, inspection.tenant_id)
        if target is S.DENIED and not is_requester:
            inspection.reviewer = _acting_user(principal)
            inspection.reviewer_roles = _roles(principal)
        if target is S.CLOSED:
            _close(principal, inspection, now=now, reason_code=code, carve_out=carve_out)
        else:
            _append(principal, inspection, target, now=now, reason_code=code)
    return inspection


def _close(
    principal: Principal,
    inspection: Inspection,
    *,
    now: datetime,
    reason_code: str,
    carve_out: bool = False,
) -> None:
    """granted → closed, inside the caller's transaction; queue the member's notice for a
    sensitive read unless a carve-out withholds it."""
    inspection.carve_out = carve_out
    owed = inspection.sensitive_read and not carve_out
    extra: dict[str, Any] = {"carveOut": carve_out, "noticeOwed": owed}
    if owed:
        extra["noticeDueAt"] = (now + NOTICE_WINDOW).isoformat()
    _append(principal, inspection, S.CLOSED, now=now, reason_code=reason_code, extra=extra)
    if owed:
        notice = InspectionNotice.objects.create(
            tenant_id=inspection.tenant_id,
            member=inspection.member,
            inspection=inspection,
            created_at=now,
            due_at=now + NOTICE_WINDOW,
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.ADMIN_INSPECTION_NOTICE_QUEUED,
            tenant_id=inspection.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[inspection.member.public_id, inspection.id],
            payload={"inspectionId": str(inspection.id), "noticeId": str(notice.id)},
        )


def _reference_status(
    inspection: Inspection, text: Any, now: datetime
) -> tuple[IncidentReferenceStatus, IncidentReference | None]:
    parsed = incidents.parse(text) if text else None
    row = (
        IncidentReference.objects.filter(tenant_id=inspection.tenant_id, id=parsed.reference_id)
        .select_related("member")
        .first()
        if parsed is not None
        else None
    )
    mac_ok = False
    if parsed is not None and row is not None:
        mac_ok = keys.verify_signature(
            incidents.PURPOSE,
            incidents.message(
                row.id, str(row.tenant_id), str(row.member.public_id), parsed.expires_at
            ),
            parsed.key_id,
            parsed.mac,
        )
    status = incidents.verdict(
        cited=bool(text),
        parsed=parsed,
        mac_verifies=mac_ok,
        issued=incidents.IssuedReference(
            tenant_id=str(row.tenant_id),
            member_id=str(row.member.public_id),
            expires_at=row.expires_at,
            spent_by=str(row.spent_by) if row.spent_by else None,
        )
        if row is not None
        else None,
        tenant_id=str(inspection.tenant_id),
        member_id=str(inspection.member.public_id),
        inspection_id=str(inspection.id),
        now=now,
    )
    return status, row


class _SpentMeanwhile(Exception):
    """Another grant spent the incident reference between the check and the spend."""


def _grant(
    principal: Principal,
    inspection: Inspection,
    *,
    reason_code: str,
    incident_reference: str | None,
    consent_snapshot_id: uuid.UUID | None,
    now: datetime,
    refuse: Callable[[Refused], IrisError],
) -> Inspection:
    member = inspection.member
    cited_text = incident_reference or inspection.incident_reference_text or None
    status, reference = _reference_status(inspection, cited_text, now)
    cited_consent = consent_snapshot_id or inspection.consent_snapshot_id
    current_consent = current_consent_snapshot(member)
    scope_ids = inspection.scope_identifiers
    result = policy.decide(
        policy.GateInput(
            requester_kind="operator",
            requester_id=str(inspection.requester.public_id),
            requester_roles=_user_roles(inspection.requester),
            requester_tenant_id=str(inspection.requester.tenant_id),
            reviewer_kind=principal.kind,
            reviewer_id=str(principal.id),
            reviewer_roles=frozenset(principal.roles),
            reviewer_tenant_id=str(principal.tenant_id),
            target_tenant_id=str(member.tenant_id),
            target_member_id=str(member.public_id),
            scope_tenant_id=scope_ids.get("tenantId"),
            scope_member_id=scope_ids.get("userId"),
            path=InspectionState(inspection.state),
            sensitivity=Sensitivity(inspection.sensitivity),
            incident_reference=status,
            cited_consent_snapshot=str(cited_consent) if cited_consent else None,
            current_consent_snapshot=str(current_consent) if current_consent else None,
        )
    )
    if result.refusal is not None:
        raise refuse(
            _refusal(
                result.refusal,
                _GATE_WORDS.get(result.refusal, "The inspection policy refuses this grant."),
                field=_GATE_FIELDS.get(result.refusal, "to"),
                rule=result.rule or result.refusal.value,
            )
        )
    grant_hours, _ = time_boxes(inspection.tenant_id)
    decided = _allow(
        principal,
        "inspection.transition",
        member=member,
        tenant_id=inspection.tenant_id,
        subject_ids=(str(inspection.id),),
        arguments={"to": S.GRANTED.value, "from": inspection.state},
    )
    reviewer = _acting_user(principal)
    spend = reference is not None and inspection.state == S.INCIDENT_ESCALATION
    try:
        with transaction.atomic(durable=True):
            record_pending(decided)
            inspection = _locked(inspection.id, inspection.tenant_id)
            if spend:
                assert reference is not None
                # Used once: the conditional UPDATE loses to a grant that spent it first.
                spent = IncidentReference.objects.filter(
                    tenant_id=inspection.tenant_id, id=reference.id, spent_by__isnull=True
                ).update(spent_by=inspection.id, spent_at=now)
                if spent != 1:
                    raise _SpentMeanwhile
                inspection.incident_reference = reference
            entries = snapshot_candidates(
                member, scope_key=inspection.scope_key, sensitivity=inspection.sensitivity
            )
            SnapshotItem.objects.bulk_create(
                [
                    SnapshotItem(
                        tenant_id=inspection.tenant_id,
                        inspection=inspection,
                        position=index,
                        entry_id=entry.entry_id,
                        revision_id=entry.revision_id,
                        category=entry.category,
                        sensitive=entry_is_sensitive(entry),
                    )
                    for index, entry in enumerate(entries, start=1)
                ]
            )
            inspection.reviewer = reviewer
            inspection.reviewer_roles = _roles(principal)
            inspection.consent_snapshot_id = cited_consent
            inspection.granted_at = now
            inspection.expires_at = now + timedelta(hours=grant_hours)
            inspection.entry_count = len(entries)
            inspection.sensitive_read = any(entry_is_sensitive(e) for e in entries)
            inspection.categories = sorted({e.category for e in entries})
            _append(
                principal,
                inspection,
                S.GRANTED,
                now=now,
                reason_code=reason_code,
                extra={
                    "entryIds": [str(e.entry_id) for e in entries],
                    "revisionIds": [str(e.revision_id) for e in entries],
                    "expiresAt": inspection.expires_at.isoformat(),
                    "reviewerRole": _roles(principal),
                },
            )
    except _SpentMeanwhile:
        raise refuse(
            _refusal(
                R.NO_LEGITIMATE_INTEREST,
                _GATE_WORDS[R.NO_LEGITIMATE_INTEREST],
                field="incidentReference",
                rule=IncidentReferenceStatus.USED.value,
            )
        ) from None
    return inspection


_GATE_WORDS: dict[Refusal, str] = {
    R.CROSS_TENANT: "The scope belongs to another tenant.",
    R.SCOPE_OUT_OF_BOUNDS: "The scope belongs to another member than the one inspected.",
    R.SELF_GRANT: "Four eyes: somebody other than the requester grants.",
    R.REVIEWER_NOT_PERMITTED: "Your role does not review inspections.",
    R.PATH_NOT_PERMITTED: "The requester's role may not use this path.",
    R.NO_LEGITIMATE_INTEREST: (
        "An incident escalation needs a valid signed incident reference: this one is "
        "missing, forged, expired, for someone else or already used."
    ),
    R.CONSENT_NOT_CURRENT: "Cite the member's current consent snapshot to read sensitive memory.",
    R.ROUTINE_REVIEW_OF_SENSITIVE: "A routine review never reads sensitive memory.",
    R.SENSITIVE_ROLE_REFUSED: "Support and admin never read sensitive memory.",
    R.LEGAL_DSAR_ONLY: "Legal reads sensitive memory only to fulfil a data-rights request.",
    R.TRUST_AND_SAFETY_INCIDENT_ONLY: (
        "Trust and safety reads sensitive memory only in an incident escalation."
    ),
}
_GATE_FIELDS: dict[Refusal, str] = {
    R.NO_LEGITIMATE_INTEREST: "incidentReference",
    R.CONSENT_NOT_CURRENT: "consentSnapshotId",
    R.CROSS_TENANT: "scope",
    R.SCOPE_OUT_OF_BOUNDS: "scope",
}


# --------------------------------------------------------------------------- reading


def inspection_read_snapshot(
    *, principal: Principal, inspection_id: uuid.UUID | str, now: datetime | None = None
) -> SnapshotView:
    """The requester's view of a granted snapshot, while the grant lasts. Every read is
    recorded (a `SnapshotRead` row and an audit event); a read after expiry is refused
    (`grant-expired`) and on record, and the job closes the grant."""
    now = now or timezone.now()
    name = "inspection.read_snapshot"
    _require_operator(principal, name, subject_ids=(str(inspection_id),))
    inspection = inspection_get(principal, inspection_id)
    subject = (str(inspection.id),)
    member = inspection.member
    if str(principal.id) != str(inspection.requester.public_id):
        raise _refuse(
            principal,
            name,
            _refusal(R.NOT_PERMITTED, "Only the operator who asked reads the snapshot."),
            member=member,
            subject_ids=subject,
        )
    if inspection.state != S.GRANTED:
        raise _refuse(
            principal,
            name,
            _refusal(
                R.GRANT_EXPIRED if inspection.state == S.CLOSED else R.NOT_PERMITTED,
                "There is no grant to read: the inspection is " + inspection.state + ".",
            ),
            member=member,
            subject_ids=subject,
        )
    assert inspection.expires_at is not None
    if now >= inspection.expires_at:
        raise _refuse(
            principal,
            name,
            _refusal(R.GRANT_EXPIRED, "The grant has expired."),
            member=member,
            subject_ids=subject,
        )
    return _record_read(principal, inspection, ReadKind.VIEWED, now=now, name=name)


def inspection_replay(
    *, principal: Principal, inspection_id: uuid.UUID | str, now: datetime | None = None
) -> SnapshotView:
    """Reconstruct a granted snapshot exactly as it was seen, at any time after the grant,
    for an auditor of the tenant (admin, legal, trust and safety) other than the requester.
    Built from the recorded revision ids: edits since do not show, forgotten entries
    show as "forgotten since" without their text. The replay is itself recorded."""
    now = now or timezone.now()
    name = "inspection.replay"
    _require_operator(principal, name, subject_ids=(str(inspection_id),))
    inspection = inspection_get(principal, inspection_id)
    subject = (str(inspection.id),)
    if inspection.granted_at is None:
        raise _refuse(
            principal,
            name,
            _refusal(R.NOT_PERMITTED, "The inspection was never granted: nothing to replay."),
            member=inspection.member,
            subject_ids=subject,
        )
    if not principal.roles & AUDITOR_ROLES:
        raise _refuse(
            principal,
            name,
            _refusal(R.NOT_PERMITTED, "Only an auditor of the tenant replays a snapshot."),
            member=inspection.member,
            subject_ids=subject,
        )
    return _record_read(principal, inspection, ReadKind.REPLAYED, now=now, name=name)


def _record_read(
    principal: Principal, inspection: Inspection, kind: ReadKind, *, now: datetime, name: str
) -> SnapshotView:
    decided = _allow(
        principal,
        name,
        member=inspection.member,
        tenant_id=inspection.tenant_id,
        subject_ids=(str(inspection.id),),
        effect=Effect.READ,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        view = snapshot_view(inspection)
        SnapshotRead.objects.create(
            tenant_id=inspection.tenant_id,
            inspection=inspection,
            kind=kind,
            actor_id=str(principal.id),
            actor_roles=_roles(principal),
            read_at=now,
        )
        audit_record(
            actor=principal.actor,
            action=(
                AuditAction.ADMIN_INSPECTION_SNAPSHOT_VIEWED
                if kind is ReadKind.VIEWED
                else AuditAction.ADMIN_INSPECTION_SNAPSHOT_REPLAYED
            ),
            tenant_id=inspection.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[inspection.member.public_id, inspection.id],
            payload={
                "inspectionId": str(inspection.id),
                "role": _roles(principal),
                "entryIds": [item["entryId"] for item in view.items],
                "forgottenCount": sum(1 for item in view.items if item["forgotten"]),
            },
        )
    return view


# --------------------------------------------------------------------------- incident references


@dataclass(frozen=True)
class IssuedIncidentReference:
    reference: str  # shown once to the issuer; only what verifies it is stored
    row: IncidentReference


def incident_reference_issue(
    *,
    principal: Principal,
    member: User,
    hours: int = incidents.DEFAULT_TTL_HOURS,
    now: datetime | None = None,
) -> IssuedIncidentReference:
    """A trust-and-safety operator issues a signed incident reference for one member of
    their tenant, valid `hours` (at most incidents.MAX_TTL_HOURS), good for one grant."""
    now = now or timezone.now()
    name = "inspection.incident_reference_issue"
    _require_operator(principal, name, member=member)
    if member.tenant_id != principal.tenant_id:
        raise NotFound("No such member.")
    if (
        isinstance(hours, bool)
        or not isinstance(hours, int)
        or not 1 <= hours <= incidents.MAX_TTL_HOURS
    ):
        raise ValidationFailed(
            f"hours is between 1 and {incidents.MAX_TTL_HOURS}.", field="hours", rule="range"
        )
    if not principal.roles & ISSUER_ROLES:
        raise _refuse(
            principal,
            name,
            _refusal(R.NOT_PERMITTED, "Only trust and safety issues incident references."),
            member=member,
        )
    decided = _allow(
        principal, name, member=member, tenant_id=member.tenant_id, arguments={"hours": hours}
    )
    # Whole seconds: the reference carries its expiry as unix seconds.
    expires = (now + timedelta(hours=hours)).replace(microsecond=0)
    reference_id = uuid.uuid4()
    key_id, mac = keys.sign(
        incidents.PURPOSE,
        incidents.message(reference_id, str(member.tenant_id), str(member.public_id), expires),
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        row = IncidentReference.objects.create(
            id=reference_id,
            tenant_id=member.tenant_id,
            member=member,
            issued_by=principal.id,
            issued_at=now,
            expires_at=expires,
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.ADMIN_INSPECTION_INCIDENT_REFERENCE_ISSUED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[member.public_id, reference_id],
            payload={"referenceId": str(reference_id), "expiresAt": expires.isoformat()},
        )
    return IssuedIncidentReference(incidents.encode(reference_id, expires, key_id, mac), row)


# --------------------------------------------------------------------------- tenant setting


def inspection_policy_set(
    *,
    principal: Principal,
    tenant: Tenant,
    grant_hours: int | None = None,
    pending_hours: int | None = None,
) -> InspectionPolicy:
    """Set the tenant's time boxes (an admin of the tenant, or Iris itself). Grants and
    requests already open keep the times they were given."""
    name = "inspection.policy_set"
    if principal.kind != "system":
        _require_operator(principal, name)
        if principal.tenant_id != tenant.id:
            raise NotFound("No such tenant.")
        if Role.ADMIN.value not in principal.roles:
            raise _refuse(principal, name, _refusal(R.NOT_PERMITTED, "Only an admin sets this."))
    values: dict[str, int] = {}
    for field, value in (("grantHours", grant_hours), ("pendingHours", pending_hours)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOURS:
            raise ValidationFailed(
                f"{field} is between 1 and {MAX_HOURS}.", field=field, rule="range"
            )
        values["grant_hours" if field == "grantHours" else "pending_hours"] = value
    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        _operation(principal, name, member=None, tenant_id=tenant.id, arguments=values),
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        row, _ = InspectionPolicy.objects.update_or_create(tenant=tenant, defaults=values)
        audit_record(
            actor=principal.actor,
            action=AuditAction.ADMIN_INSPECTION_POLICY_SET,
            tenant_id=tenant.id,
            policy_id=POLICY_ID,
            subject_ids=[tenant.id],
            payload={"grantHours": row.grant_hours, "pendingHours": row.pending_hours},
        )
    return row
