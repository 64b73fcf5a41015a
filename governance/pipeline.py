"""The governance kernel: one mandatory pipeline of checks at fixed hook points.

Every service in memory, consent, dsar and inspection calls `govern` before it acts.
Checks are small classes with a priority, registered in one place (`checks.py` and the
apps' `ready()`); each decision (allow, deny, ask the owner) is written to the audit chain
with the check's name. `govern` records in its own transaction when called outside one,
so a denial stays on record even though the operation it stopped never happens.

A caller that passes `pending=` (a list) gets its *allow* records queued there instead,
and writes them with `record_pending` inside the operation's own transaction: one commit
per operation, and an allow is on record exactly when what it allowed took effect. Denials
and holds are always committed at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from django.db import transaction

from governance.actions import decision_action
from governance.audit import audit_record, audit_record_many
from governance.errors import IrisError, ValidationFailed
from governance.principal import Principal

POLICY_ID = "iris-governance-kernel-v1"


class Hook(StrEnum):
    PRE_WRITE = "pre_write"
    PRE_RECALL = "pre_recall"
    POST_RECALL = "post_recall"
    PRE_DESTRUCTIVE = "pre_destructive"
    PRE_RESPONSE = "pre_response"
    POST_OPERATION = "post_operation"
    # Spec 003: a request through the governed HTTP client, before it is sent and after it
    # ends (events.delivery posts webhooks this way).
    PRE_EGRESS = "pre_egress"
    POST_EGRESS = "post_egress"


class Effect(StrEnum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class Verdict(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Operation:
    """What is about to happen. `text` and `texts` are content to screen, never audited:
    `texts` maps every stored free-text field of the call (by wire path) to its text;
    `text` is the older single field, named by `attributes["text_field"]`."""

    name: str
    effect: Effect
    principal: Principal
    tenant_id: uuid.UUID | None
    member_id: uuid.UUID | None = None
    subject_ids: tuple[str, ...] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None
    texts: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    check: str
    verdict: Verdict
    reason_code: str = ""
    detail: str = ""
    # Ids a caller needs to act on a deny or an ask (e.g. `approvalId`); never content.
    extra: Mapping[str, Any] = field(default_factory=dict)


class Check:
    name: ClassVar[str]
    priority: ClassVar[int] = 50
    hooks: ClassVar[frozenset[Hook]] = frozenset(Hook)

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        raise NotImplementedError


_REGISTRY: list[Check] = []


def register(check: Check) -> Check:
    if any(c.name == check.name for c in _REGISTRY):
        raise ValueError(f"check {check.name!r} is registered twice")
    _REGISTRY.append(check)
    _REGISTRY.sort(key=lambda c: (c.priority, c.name))
    return check


def registered_checks() -> tuple[Check, ...]:
    return tuple(_REGISTRY)


class Denied(IrisError):
    status = 403
    code = "governance-denied"
    title = "Refused by policy"


class HeldForApproval(IrisError):
    """The owner must approve first; the caller answers 202 with the approval id."""

    status = 202
    code = "held-for-approval"
    title = "Waiting for the owner's approval"


def govern(
    hook: Hook | str, op: Operation, *, pending: list[dict[str, Any]] | None = None
) -> list[Decision]:
    """Run every check registered for `hook` and record the decisions.

    Raises Denied on the first deny (after recording it) and HeldForApproval when a check
    asks the owner. Returns the decisions when everything allows; with `pending`, their
    record is queued there for `record_pending` instead of being written now.
    """
    try:
        hook = Hook(hook)
    except ValueError:
        raise ValidationFailed(
            "Unknown hook.", code="unknown-hook", field="hook", allowed=[h.value for h in Hook]
        ) from None
    decisions: list[Decision] = []
    stop: Decision | None = None
    for check in _REGISTRY:
        if hook not in check.hooks:
            continue
        decision = check.evaluate(hook, op)
        if decision is None:
            decision = Decision(check.name, Verdict.ALLOW)
        decisions.append(decision)
        if decision.verdict != Verdict.ALLOW:
            stop = decision
            break
    if stop is None and pending is not None:
        pending.append(_record_fields(hook, op, decisions, None))
    else:
        _record(hook, op, decisions, stop)
    if stop is not None and stop.verdict == Verdict.DENY:
        raise Denied(
            stop.detail or "Refused by policy.", code=stop.reason_code or None, extra=stop.extra
        )
    if stop is not None and stop.verdict == Verdict.ASK:
        raise HeldForApproval(stop.detail or "Waiting for the owner's approval.", extra=stop.extra)
    return decisions


def record_pending(pending: list[dict[str, Any]]) -> None:
    """Write queued allow decisions; call inside the operation's transaction."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("record_pending belongs inside the operation's transaction")
    audit_record_many(pending)
    pending.clear()


def _record(
    hook: Hook, op: Operation, decisions: Iterable[Decision], stop: Decision | None
) -> None:
    with transaction.atomic():
        audit_record(**_record_fields(hook, op, decisions, stop))


def _record_fields(
    hook: Hook, op: Operation, decisions: Iterable[Decision], stop: Decision | None
) -> dict[str, Any]:
    payload = {
        "hook": hook.value,
        "operation": op.name,
        "effect": op.effect.value,
        "decisions": [
            {"check": d.check, "verdict": d.verdict.value, "reason": d.reason_code}
            for d in decisions
        ],
    }
    verdict = stop.verdict.value if stop else Verdict.ALLOW.value
    return {
        "actor": op.principal.actor,
        "action": decision_action(verdict),
        "tenant_id": op.tenant_id,
        "policy_id": POLICY_ID,
        "severity": "warning" if stop else "info",
        "reason_code": stop.reason_code if stop else "",
        "subject_ids": [str(op.member_id), *op.subject_ids] if op.member_id else op.subject_ids,
        "payload": payload,
    }
