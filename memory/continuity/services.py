"""Continuity use cases: the only place that writes continuation tokens.

Each public function validates (ValidationFailed, 400), asks the governance kernel outside
any transaction (`govern`: a refusal is audited at once), then opens its one durable
transaction, in which it records the allow, writes and audits. Audit payloads carry ids, codes
and counts only; a token's anchor, scope key and device are never audited.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import NotFound, invalid
from governance.models import JobRun, User
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
from memory.continuity import conf, rules
from memory.continuity.models import ContinuationToken
from memory.continuity.selectors import current_cross_device_grant, sync_opted_out
from memory.screening import continuation_texts

POLICY_ID = "iris-continuity-v1"
EXPIRY_JOB = "continuity.expire"


class ContinuityGate(Check):
    """A member who switched cross-device sync off ("conversations stay on the device where
    they started") gets no continuation tokens written. Decides only operations that carry
    a `continuityGate` attribute (built by `continuation_token_write`)."""

    name = "continuity-gate"
    priority = 21
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        gate = op.attributes.get("continuityGate")
        if gate is None:
            return None
        if gate["syncOptedOut"]:
            return Decision(
                self.name,
                Verdict.DENY,
                "cross-device-sync-off",
                "The member switched sync between devices off.",
            )
        return None


def _govern(
    name: str,
    principal: Principal,
    member: User,
    attributes: Mapping[str, Any] | None = None,
    texts: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Ask the kernel; returns the allow record for `record_pending` inside the write's
    transaction, so an allow never commits without the write it allowed."""
    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        Operation(
            name=name,
            effect=Effect.WRITE,
            principal=principal,
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            attributes=dict(attributes or {}),
            texts=texts or {},
        ),
        pending=decided,
    )
    return decided


def _audit(
    principal: Principal,
    member: User,
    action: AuditAction,
    *,
    subject_ids: Iterable[Any] = (),
    reason_code: str = "",
    payload: Mapping[str, Any] | None = None,
) -> None:
    audit_record(
        actor=principal.actor,
        action=action,
        tenant_id=member.tenant_id,
        policy_id=POLICY_ID,
        reason_code=reason_code,
        subject_ids=[member.public_id, *subject_ids],
        payload=payload,
    )


# ---------------------------------------------------------------------------------- write


@dataclass(frozen=True)
class WriteResult:
    token: ContinuationToken  # the slot's token after the write: the winner's
    outcome: rules.Outcome
    created: bool
    conflict_with: rules.SlotWrite | None  # the other device, when there was a conflict


def _slot(member: User, draft: rules.TokenDraft) -> QuerySet[ContinuationToken]:
    return ContinuationToken.objects.filter(
        tenant_id=member.tenant_id, member=member, scope_key=draft.scope_key, surface=draft.surface
    )


def _fields(draft: rules.TokenDraft, server_time: datetime) -> dict[str, Any]:
    return {
        "surface_context": draft.surface_context.as_contract(),
        "anchor_ref": draft.anchor_ref.as_contract(),
        "posture": draft.posture.value,
        "sensitive_categories": list(draft.sensitive_categories),
        "is_sensitive": bool(draft.sensitive_categories),
        "cross_device_consent_id": draft.cross_device_consent_id,
        "device_id": draft.device_id,
        "client_timestamp": draft.client_timestamp,
        "updated_at": server_time,
    }


def continuation_token_write(
    *,
    principal: Principal,
    member: User,
    payload: Any,
    now: datetime | None = None,
) -> WriteResult:
    """Write a checkpoint to its slot (member, scope key, surface); last write wins.

    `now` is the server time of the write: when Iris received it, taken before the write
    waits for the slot's lock (`rules.decide_write` says who wins and who is told).
    Raises ValidationFailed for a broken contract or consent rule (nothing written) and
    Denied when governance refuses (sync switched off). Caller has resolved `member`.
    """
    server_time = now or timezone.now()
    try:
        draft = rules.parse_token(payload)
    except rules.RuleViolation as violation:
        raise invalid(violation) from None
    if draft.user_id != member.public_id:
        raise NotFound("No such member.")
    if draft.sensitive_categories:
        try:
            rules.check_cross_device_consent(draft, current_cross_device_grant(member))
        except rules.RuleViolation as violation:
            raise invalid(violation) from None
    decided = _govern(
        "memory.continuation.write",
        principal,
        member,
        {
            "surface": draft.surface,
            "sensitive": bool(draft.sensitive_categories),
            "continuityGate": {"syncOptedOut": sync_opted_out(member)},
        },
        continuation_texts(draft),
    )
    incoming = rules.SlotWrite(device_id=draft.device_id, server_time=server_time)
    with transaction.atomic(durable=True):
        record_pending(decided)
        # The slot's row lock serialises writers of one slot (PostgreSQL); SQLite
        # serialises all writers. A slot's first two writers cannot lock a row that does
        # not exist yet: the unique constraint lets one insert, and the other, once the
        # first commits, locks the row and is decided against it.
        current = _slot(member, draft).select_for_update().first()
        if current is None:
            try:
                with transaction.atomic():
                    token = ContinuationToken.objects.create(
                        tenant_id=member.tenant_id,
                        member=member,
                        scope_key=draft.scope_key,
                        surface=draft.surface,
                        created_at=server_time,
                        **_fields(draft, server_time),
                    )
            except IntegrityError:
                current = _slot(member, draft).select_for_update().get()
            else:
                result = WriteResult(token, rules.Outcome.WRITTEN, True, None)
        if current is not None:
            decision = rules.decide_write(
                incoming,
                rules.SlotWrite(device_id=current.device_id, server_time=current.updated_at),
                conf.conflict_window(),
            )
            if decision.outcome is rules.Outcome.WRITTEN:
                for name, value in _fields(draft, server_time).items():
                    setattr(current, name, value)
                current.revision += 1
                current.save()
            result = WriteResult(current, decision.outcome, False, decision.other)
        _audit(
            principal,
            member,
            AuditAction.MEMORY_CONTINUATION_WRITTEN
            if result.outcome is rules.Outcome.WRITTEN
            else AuditAction.MEMORY_CONTINUATION_SUPERSEDED,
            subject_ids=[result.token.id],
            reason_code="device-conflict" if result.conflict_with else "",
            payload={
                "surface": draft.surface,
                "revision": result.token.revision,
                "created": result.created,
                "conflict": result.conflict_with is not None,
                "sensitive": bool(draft.sensitive_categories),
            },
        )
    return result


# ---------------------------------------------------------------------- removal and expiry


def _delete(
    principal: Principal, member: User, ids: list[uuid.UUID], action: AuditAction, reason: str
) -> int:
    deleted, _ = ContinuationToken.objects.filter(
        tenant_id=member.tenant_id, member=member, pk__in=ids
    ).delete()
    if deleted:
        _audit(
            principal,
            member,
            action,
            subject_ids=ids,
            reason_code=reason,
            payload={"count": deleted},
        )
    return deleted


def _unconsented(member: User, categories: frozenset[str], *, lock: bool) -> list[uuid.UUID]:
    current = current_cross_device_grant(member)
    rows = ContinuationToken.objects.filter(
        tenant_id=member.tenant_id, member=member, is_sensitive=True
    ).only("id", "sensitive_categories", "cross_device_consent_id")
    if lock:
        rows = rows.select_for_update()
    return [
        row.id
        for row in rows
        if not rules.token_visible(row.sensitive_categories, row.cross_device_consent_id, current)
        or categories.intersection(row.sensitive_categories)
    ]


def continuation_tokens_purge_unconsented(
    *, principal: Principal, member: User, categories: Iterable[str] = ()
) -> int:
    """Delete the member's tokens that may no longer travel: sensitive tokens whose
    cross-device consent is not the current grant, and tokens carrying any of
    `categories` (a sensitive category whose consent was just revoked). Idempotent."""
    revoked = frozenset(categories)
    if not _unconsented(member, revoked, lock=False):
        return 0
    decided = _govern("memory.continuation.purge", principal, member)
    with transaction.atomic(durable=True):
        record_pending(decided)
        ids = _unconsented(member, revoked, lock=True)
        return _delete(
            principal, member, ids, AuditAction.MEMORY_CONTINUATION_PURGED, "consent-not-current"
        )


def continuation_tokens_forget(*, principal: Principal, member: User) -> int:
    """Delete every continuation token of the member; returns how many.

    Forgetting and data-rights deletion must call this (tokens are member data, if not
    content). Governed as a write, not as a destructive call: a token is a pointer the
    surface can rebuild, so removing it waits for nobody's approval. Idempotent; call it
    outside your own transaction (it governs, then commits on its own).
    """
    decided = _govern("memory.continuation.forget", principal, member)
    with transaction.atomic(durable=True):
        record_pending(decided)
        ids = list(
            ContinuationToken.objects.filter(tenant_id=member.tenant_id, member=member)
            .select_for_update()
            .values_list("id", flat=True)
        )
        return _delete(principal, member, ids, AuditAction.MEMORY_CONTINUATION_FORGOTTEN, "forget")


def continuation_tokens_expire(
    *,
    tenant_id: uuid.UUID,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int = 20,
) -> JobRun:
    """Delete one tenant's tokens not written for the TTL, in batches; records a JobRun.

    Each batch commits on its own, so a worker killed mid-run leaves whole batches done and
    the next run finishes the rest (the run row stays `running`). Running it twice deletes
    nothing the second time.
    """
    now = now or timezone.now()
    batch = batch_size or conf.expiry_batch()
    cutoff = rules.expiry_cutoff(now, conf.token_ttl())
    principal = Principal.system("continuity-expiry", tenant_id=tenant_id)
    decided: list[dict[str, Any]] = []
    govern(
        Hook.PRE_WRITE,
        Operation(
            name="memory.continuation.expire",
            effect=Effect.WRITE,
            principal=principal,
            tenant_id=tenant_id,
        ),
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with the run it started
        run = JobRun.objects.create(job=EXPIRY_JOB, tenant_id=tenant_id, started_at=now)
    deleted = batches = 0
    try:
        for _ in range(max_batches):
            expired = ContinuationToken.objects.filter(tenant_id=tenant_id, updated_at__lt=cutoff)
            with transaction.atomic(durable=True):
                ids = list(expired.order_by("updated_at").values_list("id", flat=True)[:batch])
                if not ids:
                    break
                # Re-check the cutoff: a token written again since it was listed stays.
                count, _ = expired.filter(id__in=ids).delete()
                audit_record(
                    actor=principal.actor,
                    action=AuditAction.MEMORY_CONTINUATION_EXPIRED,
                    tenant_id=tenant_id,
                    policy_id=POLICY_ID,
                    reason_code="ttl",
                    payload={"count": count, "batch": batches},
                )
            deleted += count
            batches += 1
            if len(ids) < batch:
                break
    except Exception:
        JobRun.objects.filter(pk=run.pk).update(
            status="failed",
            finished_at=timezone.now(),
            counts={"deleted": deleted, "batches": batches},
        )
        raise
    run.status = "done"
    run.finished_at = timezone.now()
    run.counts = {"deleted": deleted, "batches": batches}
    run.save(update_fields=["status", "finished_at", "counts"])
    return run
