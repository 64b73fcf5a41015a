"""Effects and approvals (spec 003, "Effects, approvals and the side-effect ledger").

Reads run freely; a destructive member-data operation (full clear, per-category clear,
forget-all-mentions, hard delete) waits for its owner's approval on every call, and so does
a listed write in a tainted run (`governance.runs`). The wait is a durable `Approval` row
that the member answers in the browser (`/approvals/`, or the card on their memory page) or
through `POST /api/v1/approvals/{id}/decide`. On approval the held call resumes from its
stored arguments through the resumable registry and is governed again: the checks see the
approval id, accept it once, and mark it completed (one approval = one call).

Wiring for a service (memory registers its destructive services in its AppConfig.ready())::

    register_resumable("memory.clear_all", _resume_clear_all,
                       action="clear everything Iris remembers about you")

    def _resume_clear_all(call: Resume) -> Any:
        member = User.objects.get(tenant_id=call.principal.tenant_id,
                                  public_id=call.member_id)
        return memory_clear_all(principal=call.principal, member=member, **call.attributes)

Operation attributes the kernel checks read (`Operation.attributes`):

- ``approval_id`` (str UUID): the approval this call claims; accepted only when it is
  approved, unexpired, and for the same tenant, owner, operation and fingerprint;
- ``arguments`` (mapping): what the call needs to be issued again, ids and enum values only
  (e.g. ``{"entryId": "…"}``, ``{"category": "health"}``, ``{"actorHandle": "…"}``); the
  call's fingerprint is made of the operation name, the member, ``subject_ids`` and these;
  without it the fingerprint and the stored arguments are the subject ids alone;
- ``run_id`` (str UUID): the surface's run, for taint and run limits (`governance.runs`);
- ``can_pause`` (bool, default True): False for a lane that cannot wait for an answer; a
  call that would be held is refused instead (`taint-cannot-pause`, `cannot-pause`);
- ``side_effect_id`` (str UUID): set by `resume_operations` completing a crashed call;
- ``previous_fingerprint`` (hex): optional, the content fingerprint of the revision a
  correction replaces, for flip detection (`governance.runs`).

`govern` raises `HeldForApproval` (HTTP 202, code ``held-for-approval``) whose problem body
carries ``approvalId`` and ``card``; call `govern` before opening the service's transaction,
as `governance.pipeline` requires, so that the approval row is committed even though the
operation does not run.

What an approval stores: the operation name, the arguments above, their fingerprint, a
reason code and a plain-English card — no memory text. The card may name an enum value the
member chose (a category) because only the member and their tenant's surfaces read it.
Rows are deleted with their owner; the audit chain keeps ids and codes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.actions import AuditAction
from governance.audit import Actor, audit_record
from governance.effects import (
    ArgumentsNotStorable,
    attribute_uuid,
    operation_arguments,
    operation_fingerprint,
)
from governance.errors import Conflict, Forbidden, IrisError, NotFound, ValidationFailed
from governance.kernel_models import Approval
from governance.models import SurfaceClient, User
from governance.operations import (  # noqa: F401 - the registry's names, re-exported
    ResumableFunc,
    Resume,
    describe_operation,
    operation_action,
    operation_undo,
    register_resumable,
    resumable,
)
from governance.pipeline import Check, Decision, Effect, Hook, Operation, Verdict
from governance.principal import Principal, principal_of

log = logging.getLogger(__name__)

POLICY_ID = "iris-governance-approvals-v1"
DECISIONS = ("approve", "deny")
MAX_CARD = 300


def _requester_label(principal: Principal) -> str:
    if principal.kind == "surface":
        return f"The {principal.surface or 'assistant'} app"
    if principal.kind == "member":
        return "You"
    if principal.kind == "operator":
        return "An operator"
    return "Iris"


def destructive_card(op: Operation, arguments: dict[str, Any]) -> str:
    verb = "want" if op.principal.kind == "member" else "wants"
    undo = operation_undo(op.name)
    why = (
        f"You can undo it for {undo} afterwards, but it waits for your approval first."
        if undo
        else "This cannot be undone, so it waits for your approval."
    )
    return (
        f"{_requester_label(op.principal)} {verb} to {operation_action(op.name, arguments)}. {why}"[
            :MAX_CARD
        ]
    )


def taint_card(op: Operation, arguments: dict[str, Any]) -> str:
    return (
        "Iris read text from outside earlier in this run and now wants to make this change: "
        f"{operation_action(op.name, arguments)}. Approve it only if you asked for it."
    )[:MAX_CARD]


def approval_ttl() -> timedelta:
    return timedelta(hours=getattr(settings, "IRIS_APPROVAL_TTL_HOURS", 24))


# -- selectors -----------------------------------------------------------------------------


def approvals_pending_for(*, member: User, now: datetime | None = None) -> list[Approval]:
    """The member's unanswered, unexpired approvals, oldest first. Tenant first, then owner."""
    return list(
        Approval.objects.filter(
            tenant_id=member.tenant_id,
            owner=member,
            status=Approval.Status.PENDING,
            expires_at__gt=now or timezone.now(),
        ).order_by("created_at", "id")
    )


def approval_for_owner(*, principal: Principal, approval_id: uuid.UUID | str) -> Approval:
    """One approval of the member `principal`; anyone else's is a 404."""
    try:
        key = uuid.UUID(str(approval_id))
    except ValueError:
        raise NotFound("No such approval.") from None
    if principal.tenant_id is None:  # no tenant, so no approvals (the filter would match none)
        raise NotFound("No such approval.")
    approval = Approval.objects.filter(
        tenant_id=principal.tenant_id, owner__public_id=principal.id, id=key
    ).first()
    if approval is None:
        raise NotFound("No such approval.")
    return approval


# -- holding and matching (used by the checks) ----------------------------------------------


def _owner_of(op: Operation) -> User | None:
    if op.tenant_id is None or op.member_id is None:
        return None
    return User.objects.filter(
        tenant_id=op.tenant_id, public_id=op.member_id, kind=User.Kind.MEMBER
    ).first()


def matching_approval(op: Operation, fingerprint: str) -> Approval | None:
    """The approved, unexpired approval `op` claims, if it really is this call's."""
    try:
        approval_id = attribute_uuid(op, "approval_id")
    except ValueError:
        return None
    if approval_id is None or op.tenant_id is None or op.member_id is None:
        return None
    return Approval.objects.filter(
        tenant_id=op.tenant_id,
        id=approval_id,
        owner__public_id=op.member_id,
        operation=op.name,
        fingerprint=fingerprint,
        status=Approval.Status.APPROVED,
        expires_at__gt=timezone.now(),
    ).first()


def consume(approval: Approval) -> bool:
    """Spend an approval on the call it allowed. False when another call spent it first."""
    now = timezone.now()
    spent = Approval.objects.filter(pk=approval.pk, status=Approval.Status.APPROVED).update(
        status=Approval.Status.COMPLETED, completed_at=now
    )
    if spent:
        audit_record(
            actor=_system_actor(),
            action=AuditAction.GOVERNANCE_APPROVAL_CONSUMED,
            tenant_id=approval.tenant_id,
            policy_id=POLICY_ID,
            reason_code=approval.reason_code,
            subject_ids=[approval.id],
            payload={"operation": approval.operation},
        )
    return bool(spent)


def _system_actor() -> Actor:
    return Principal.system().actor


def hold(
    op: Operation, *, owner: User, fingerprint: str, reason_code: str, card_text: str
) -> Approval:
    """The pending approval for this call: the one already waiting, or a new one.

    Asking twice for the same call (a surface retrying) shows one card, not two.
    """
    # `owner` is op's member, found in op's tenant (`_owner_of`), so op has a tenant.
    assert op.tenant_id is not None
    arguments = operation_arguments(op)
    run_id = attribute_uuid(op, "run_id")
    now = timezone.now()
    with transaction.atomic():
        waiting = (
            Approval.objects.select_for_update()
            .filter(
                tenant_id=op.tenant_id,
                owner=owner,
                operation=op.name,
                fingerprint=fingerprint,
                status=Approval.Status.PENDING,
                expires_at__gt=now,
            )
            .order_by("created_at")
            .first()
        )
        if waiting is not None:
            return waiting
        approval = Approval.objects.create(
            tenant_id=op.tenant_id,
            owner=owner,
            operation=op.name,
            arguments=arguments,
            fingerprint=fingerprint,
            reason_code=reason_code,
            card_text=card_text,
            requested_by_kind=op.principal.kind,
            requested_by_id=str(op.principal.id),
            requested_by_surface=op.principal.surface or "",
            run_id=run_id,
            created_at=now,
            expires_at=now + approval_ttl(),
        )
        audit_record(
            actor=op.principal.actor,
            action=AuditAction.GOVERNANCE_APPROVAL_REQUESTED,
            tenant_id=op.tenant_id,
            policy_id=POLICY_ID,
            reason_code=reason_code,
            subject_ids=[owner.public_id, approval.id],
            payload={"operation": op.name, "fingerprint": fingerprint},
        )
    return approval


def ask_owner(check: str, op: Operation, *, reason_code: str, card: Callable[..., str]) -> Decision:
    """Hold `op` for its owner (ASK), or refuse it when nobody can answer (DENY)."""
    owner = _owner_of(op)
    if owner is None:
        return Decision(check, Verdict.DENY, "no-owner-to-ask", "Nobody can approve this call.")
    if op.attributes.get("can_pause", True) is False:
        code = "taint-cannot-pause" if reason_code == "tainted-run" else "cannot-pause"
        return Decision(
            check,
            Verdict.DENY,
            code,
            "This call needs the member's approval and this lane cannot wait for it.",
        )
    try:
        fingerprint = operation_fingerprint(op)
        arguments = operation_arguments(op)
        attribute_uuid(op, "run_id")
    except (ArgumentsNotStorable, ValueError):
        return Decision(
            check, Verdict.DENY, "approval-arguments-invalid", "The call cannot be held."
        )
    approval = hold(
        op,
        owner=owner,
        fingerprint=fingerprint,
        reason_code=reason_code,
        card_text=card(op, arguments),
    )
    return Decision(
        check,
        Verdict.ASK,
        reason_code,
        approval.card_text,
        extra={"approvalId": str(approval.id), "card": approval.card_text},
    )


class OwnerApproval(Check):
    """A destructive call waits for its owner's approval, on every call."""

    name = "owner-approval"
    priority = 45
    hooks = frozenset({Hook.PRE_DESTRUCTIVE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if op.effect != Effect.DESTRUCTIVE:
            return None
        if op.principal.kind == "system":
            # Iris's own jobs (retention purge after the grace window, completing a crashed
            # call the member already approved) act on rules the member agreed to.
            return Decision(self.name, Verdict.ALLOW, "system-job")
        try:
            fingerprint = operation_fingerprint(op)
        except ArgumentsNotStorable:
            return Decision(
                self.name, Verdict.DENY, "approval-arguments-invalid", "The call cannot be held."
            )
        approval = matching_approval(op, fingerprint)
        if approval is not None and consume(approval):
            return Decision(self.name, Verdict.ALLOW, "owner-approved")
        return ask_owner(
            self.name, op, reason_code="owner-approval-required", card=destructive_card
        )


# -- services ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecideOutcome:
    approval: Approval
    # "" when denied; otherwise completed | not-resumable | requester-revoked | an error code.
    resume_code: str
    result: Any = None


def _validate_decision(decision: object) -> str:
    if decision not in DECISIONS:
        raise ValidationFailed(
            "decision must be approve or deny.",
            field="decision",
            rule="choice",
            allowed=DECISIONS,
        )
    return str(decision)


def approval_decide(
    *, principal: Principal, approval_id: uuid.UUID | str, decision: str
) -> DecideOutcome:
    """The owner answers an approval; an approved call resumes, governed again.

    Only the member the approval belongs to may answer (a surface or operator: 403; anyone
    else's approval: 404); an approval answered or expired already is a 409; an unknown
    decision a 400. Nothing changes on a refusal. The answer is committed before the call
    resumes, so a resumed call that fails leaves the answer on record.
    """
    decision = _validate_decision(decision)
    if principal.kind != "member":
        raise Forbidden("Only the member an approval is for may answer it.")
    now = timezone.now()
    with transaction.atomic(durable=True):
        approval = approval_for_owner(principal=principal, approval_id=approval_id)
        approval = Approval.objects.select_for_update().get(pk=approval.pk)
        if approval.status != Approval.Status.PENDING:
            raise Conflict("This approval was already answered.", code="approval-already-decided")
        if approval.expires_at <= now:
            raise Conflict("This approval has expired.", code="approval-expired")
        # The approval was found in the principal's tenant, so its tenant is theirs.
        owner = User.objects.get(tenant_id=approval.tenant_id, public_id=principal.id)
        approval.status = (
            Approval.Status.APPROVED if decision == "approve" else Approval.Status.DENIED
        )
        approval.decided_at = now
        approval.decided_by = owner
        approval.save(update_fields=["status", "decided_at", "decided_by"])
        audit_record(
            actor=principal.actor,
            action=AuditAction.GOVERNANCE_APPROVAL_APPROVED
            if approval.status == Approval.Status.APPROVED
            else AuditAction.GOVERNANCE_APPROVAL_DENIED,
            tenant_id=approval.tenant_id,
            policy_id=POLICY_ID,
            reason_code=approval.reason_code,
            subject_ids=[principal.id, approval.id],
            payload={"operation": approval.operation},
        )
    if approval.status == Approval.Status.DENIED:
        return DecideOutcome(approval, "")
    return approval_resume(approval)


def _requester(approval: Approval) -> Principal | None:
    kind, ident = approval.requested_by_kind, approval.requested_by_id
    if kind == "surface":
        client = SurfaceClient.objects.filter(
            tenant_id=approval.tenant_id, id=ident, revoked_at__isnull=True
        ).first()
        if client is None:
            return None
        return Principal(
            "surface",
            client.id,
            client.tenant_id,
            surface=client.surface,
            destination_tier=client.destination_tier,
        )
    if kind in {"member", "operator"}:
        user = User.objects.filter(
            tenant_id=approval.tenant_id, public_id=ident, is_active=True
        ).first()
        return principal_of(user) if user is not None else None
    return Principal.system(ident, approval.tenant_id)


def approval_resume(approval: Approval) -> DecideOutcome:
    """Issue an approved call again from its stored arguments, through the registry.

    Without a registered function the approval stays approved: the caller may retry the
    call itself with `approval_id` until the approval expires.
    """
    func = resumable(approval.operation)
    if func is None:
        return _settle(approval, "not-resumable")
    principal = _requester(approval)
    if principal is None:
        return _settle(approval, "requester-revoked")
    call = Resume(
        principal=principal,
        member_id=approval.owner.public_id,
        arguments=dict(approval.arguments),
        approval_id=approval.id,
        run_id=approval.run_id,
    )
    try:
        result = func(call)
    except IrisError as exc:
        return _settle(approval, exc.code)
    except Exception as exc:
        # Name the failure without its message: messages can quote content.
        log.error("resuming approval %s failed: %s", approval.id, type(exc).__name__)
        return _settle(approval, "resume-failed")
    return _settle(approval, "completed", result)


def _settle(approval: Approval, code: str, result: Any = None) -> DecideOutcome:
    Approval.objects.filter(pk=approval.pk).update(outcome_code=code[:64])
    approval.refresh_from_db()
    return DecideOutcome(approval, code, result)


def approvals_expire(*, now: datetime | None = None, batch: int = 500) -> int:
    """Expire approvals nobody answered (or used) in time. Idempotent, one batch per call."""
    now = now or timezone.now()
    open_statuses = (Approval.Status.PENDING, Approval.Status.APPROVED)
    rows = list(
        Approval.objects.filter(status__in=open_statuses, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("id", "tenant_id", "reason_code")[:batch]
    )
    expired = 0
    for approval_id, tenant_id, reason_code in rows:
        with transaction.atomic():
            changed = Approval.objects.filter(id=approval_id, status__in=open_statuses).update(
                status=Approval.Status.EXPIRED, completed_at=now
            )
            if changed:
                audit_record(
                    actor=_system_actor(),
                    action=AuditAction.GOVERNANCE_APPROVAL_EXPIRED,
                    tenant_id=tenant_id,
                    policy_id=POLICY_ID,
                    reason_code=reason_code,
                    subject_ids=[approval_id],
                )
        expired += changed
    return expired


@shared_task(name="governance.approvals.expire")
def approvals_expire_task() -> int:
    return approvals_expire()


def register_checks() -> None:
    from governance.pipeline import register, registered_checks

    if not any(c.name == OwnerApproval.name for c in registered_checks()):
        register(OwnerApproval())
