"""The side-effect ledger (spec 003, "Effects, approvals and the side-effect ledger").

A destructive call gets its ledger row written and *committed* before it runs, so a crash
in the middle still leaves a record that `manage.py resume_operations` finds. If that row
cannot be written, the call is denied and does not run. Turning the ledger off
(`IRIS_SIDE_EFFECT_LEDGER=0`) makes destructive operations refuse rather than run
unrecorded; `IRIS_SIDE_EFFECT_LEDGER_ALL=1` records every write's side effects as well.

How a service uses it, outside any transaction::

    counts = run_destructive(op, _clear_all_in_one_transaction, member)

`run_destructive` asks the kernel at PRE_DESTRUCTIVE itself, and the allow decision commits
in the same transaction as the ledger row: a call is either refused (and the refusal is on
record) or allowed and recorded as started, never allowed on record with no trace of it.

`func` opens its own `transaction.atomic(durable=True)`; what it returns is recorded as the
row's counts when it is a mapping of names to integers (or has such a `.counts`). A plain
write does the same with `run_write`, which records only when `IRIS_SIDE_EFFECT_LEDGER_ALL`
is on. For finer control, `with side_effect(op) as entry: ...; entry.add(deleted=3)`.

Operation attributes read here (see `governance.approvals` for the full list):

- ``arguments``: the call's resumable arguments (ids and enum values only); with
  ``subject_ids`` they make the call's fingerprint;
- ``side_effect_id``: set by `resume_operations` when it completes a pending row; the call
  then reuses that row instead of writing a new one;
- ``approval_id`` / ``run_id``: copied onto the row for the record.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from governance.actions import AuditAction
from governance.audit import canonical_json, sha256_hex
from governance.errors import IrisError
from governance.kernel_models import SideEffect
from governance.pipeline import (
    POLICY_ID,
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

log = logging.getLogger(__name__)

T = TypeVar("T")

CHECK_NAME = "side-effect-ledger"
MAX_ARGUMENT_STRING = 200
MAX_ARGUMENTS_BYTES = 4096
# Keys that would carry content rather than ids; the same rule as the audit payload.
_CONTENT_KEYS = frozenset(
    {"body", "text", "content", "secret", "token", "password", "value", "note", "query"}
)


# -- settings ------------------------------------------------------------------------------


def ledger_enabled() -> bool:
    return bool(getattr(settings, "IRIS_SIDE_EFFECT_LEDGER", True))


def ledger_all() -> bool:
    return bool(getattr(settings, "IRIS_SIDE_EFFECT_LEDGER_ALL", False))


# -- what a call is ------------------------------------------------------------------------


class ArgumentsNotStorable(ValueError):
    """The call's arguments hold something that looks like content, not ids."""


def _check_value(key: str, value: Any) -> None:
    if value is None or isinstance(value, bool | int | float):
        return
    if isinstance(value, str):
        if len(value) > MAX_ARGUMENT_STRING:
            raise ArgumentsNotStorable(f"arguments.{key}: strings are ids or codes, not text")
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_value(key, item)
        return
    raise ArgumentsNotStorable(f"arguments.{key}: only ids, codes, numbers and lists of them")


def storable_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` as a JSON-ready dict, or ArgumentsNotStorable.

    Ledger rows and approvals store a call's arguments so that it can be issued again. They
    may hold ids (memory, entry, request), enum values (a category, a scope kind), an actor
    handle (an HMAC, not a name) and small numbers: never a memory body, a query or a name.
    """
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if not isinstance(key, str) or key.lower() in _CONTENT_KEYS:
            raise ArgumentsNotStorable(f"arguments.{key}: arguments carry ids, not content")
        _check_value(key, value)
        out[key] = list(value) if isinstance(value, tuple) else value
    if len(canonical_json(out)) > MAX_ARGUMENTS_BYTES:
        raise ArgumentsNotStorable("arguments are too large to be ids")
    return out


def operation_arguments(op: Operation) -> dict[str, Any]:
    """The call's resumable arguments: `attributes["arguments"]`, else its subject ids."""
    arguments = op.attributes.get("arguments")
    if arguments is None:
        return {"subjectIds": [str(s) for s in op.subject_ids]}
    if not isinstance(arguments, Mapping):
        raise ArgumentsNotStorable("arguments must be a mapping")
    return storable_arguments(arguments)


def operation_fingerprint(op: Operation) -> str:
    """Same operation, same member, same arguments: same fingerprint (SHA-256, hex)."""
    return sha256_hex(
        canonical_json(
            {
                "operation": op.name,
                "member": str(op.member_id) if op.member_id else None,
                "subjectIds": [str(s) for s in op.subject_ids],
                "arguments": operation_arguments(op),
            }
        )
    )


def attribute_uuid(op: Operation, name: str) -> uuid.UUID | None:
    """`op.attributes[name]` as a UUID; None when absent; ValueError when malformed."""
    raw = op.attributes.get(name)
    if raw is None or raw == "":
        return None
    return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))


# -- the ledger ----------------------------------------------------------------------------


@dataclass
class LedgerEntry:
    """The row a running call reports to. `row` is None when nothing is being recorded."""

    row: SideEffect | None
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, **counts: int) -> None:
        for name, n in counts.items():
            self.counts[name] = self.counts.get(name, 0) + int(n)

    def add_result(self, result: Any) -> None:
        counts = getattr(result, "counts", result)
        if isinstance(counts, Mapping) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in counts.items()
        ):
            self.add(**counts)


def _needs_row(op: Operation) -> bool:
    # Destructive calls need a row even when the ledger is off: `_begin` then refuses them.
    if op.effect == Effect.DESTRUCTIVE:
        return True
    return op.effect == Effect.WRITE and ledger_enabled() and ledger_all()


def _refuse(op: Operation, reason_code: str, detail: str) -> Denied:
    """Record the ledger's refusal as a governance decision (best effort) and return it."""
    from governance.audit import audit_record

    try:
        with transaction.atomic():
            audit_record(
                actor=op.principal.actor,
                action=AuditAction.GOVERNANCE_DECISION_DENY,
                tenant_id=op.tenant_id,
                policy_id=POLICY_ID,
                severity="warning",
                reason_code=reason_code,
                subject_ids=[str(op.member_id), *op.subject_ids]
                if op.member_id
                else op.subject_ids,
                payload={
                    "hook": Hook.PRE_DESTRUCTIVE.value
                    if op.effect == Effect.DESTRUCTIVE
                    else Hook.PRE_WRITE.value,
                    "operation": op.name,
                    "effect": op.effect.value,
                    "decisions": [{"check": CHECK_NAME, "verdict": "deny", "reason": reason_code}],
                },
            )
    except Exception:  # the database may be what failed; the refusal stands regardless
        log.error("could not audit a side-effect ledger refusal (%s, %s)", op.name, reason_code)
    return Denied(detail, code=reason_code)


def _begin(op: Operation, decided: list[dict[str, Any]] | None = None) -> SideEffect:
    """Write (or reuse) the pending row and commit it, with the allow decisions in `decided`
    in the same transaction. Raises Denied if it cannot."""
    if not ledger_enabled():
        raise _refuse(op, "side-effect-ledger-off", "The side-effect ledger is off.")
    try:
        arguments = operation_arguments(op)
        fingerprint = operation_fingerprint(op)
        side_effect_id = attribute_uuid(op, "side_effect_id")
        approval_id = attribute_uuid(op, "approval_id")
        run_id = attribute_uuid(op, "run_id")
    except (ArgumentsNotStorable, ValueError):
        raise _refuse(
            op, "side-effect-arguments-invalid", "The call's arguments cannot be recorded."
        ) from None
    try:
        tenant_id = op.tenant_id
        if tenant_id is None:
            # What the row's NOT NULL tenant would raise, without the round trip.
            raise IntegrityError("a side-effect row needs a tenant")
        # durable: the row must be committed before the call runs, so it may not ride in a
        # caller's transaction that could still roll back with the call.
        with transaction.atomic(durable=True):
            if decided:
                record_pending(decided)
            if side_effect_id is not None:
                row = (
                    SideEffect.objects.select_for_update()
                    .filter(
                        tenant_id=tenant_id,
                        id=side_effect_id,
                        fingerprint=fingerprint,
                        status=SideEffect.Status.PENDING,
                    )
                    .first()
                )
                if row is not None:
                    SideEffect.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1)
                    return row
            return SideEffect.objects.create(
                tenant_id=tenant_id,
                member_public_id=op.member_id,
                operation=op.name,
                effect=op.effect.value,
                arguments=arguments,
                fingerprint=fingerprint,
                approval_id=approval_id,
                run_id=run_id,
                requested_by_kind=op.principal.kind,
                requested_by_id=str(op.principal.id),
                started_at=timezone.now(),
            )
    except (DatabaseError, RuntimeError):
        # RuntimeError: called inside a transaction, where the row could not be committed.
        log.error("side-effect ledger row could not be written for %s", op.name)
        raise _refuse(
            op,
            "side-effect-ledger-unavailable",
            "The side-effect ledger could not record this call, so it did not run.",
        ) from None


def _finish(row: SideEffect, status: str, counts: Mapping[str, int], error_code: str = "") -> None:
    try:
        SideEffect.objects.filter(pk=row.pk, status=SideEffect.Status.PENDING).update(
            status=status, finished_at=timezone.now(), counts=dict(counts), error_code=error_code
        )
    except DatabaseError:
        # The call itself is over; the row stays pending and resume_operations settles it.
        log.error("side-effect ledger row %s could not be closed", row.pk)


@contextlib.contextmanager
def side_effect(
    op: Operation, decided: list[dict[str, Any]] | None = None
) -> Iterator[LedgerEntry]:
    """Record the governed call `op` in the ledger around the block.

    Destructive calls always get a committed `pending` row before the block runs (or the
    block never runs); writes get one only with `IRIS_SIDE_EFFECT_LEDGER_ALL`; reads never.
    The row ends `done` with the counts the block reported, or `failed` with the error code.
    """
    if not _needs_row(op):
        yield LedgerEntry(row=None)
        return
    row = _begin(op, decided)
    entry = LedgerEntry(row=row)
    try:
        yield entry
    except IrisError as exc:
        _finish(row, SideEffect.Status.FAILED, entry.counts, exc.code)
        raise
    except Exception as exc:
        _finish(row, SideEffect.Status.FAILED, entry.counts, type(exc).__name__[:64])
        raise
    _finish(row, SideEffect.Status.DONE, entry.counts)


def run_destructive(op: Operation, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Ask the kernel at PRE_DESTRUCTIVE, then run `func(*args, **kwargs)` as the
    destructive call `op`, ledger row first.

    Call it outside any transaction; `func` opens its own. The allow commits with the
    ledger row. Raises what `govern` raises, or Denied (and `func` never runs) when the
    ledger is off or its row cannot be committed.
    """
    if op.effect != Effect.DESTRUCTIVE:
        raise ValueError("run_destructive runs destructive operations only")
    decided: list[dict[str, Any]] = []
    govern(Hook.PRE_DESTRUCTIVE, op, pending=decided)
    with side_effect(op, decided) as entry:
        result = func(*args, **kwargs)
        entry.add_result(result)
    return result


def run_write(op: Operation, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a governed write; recorded in the ledger only with IRIS_SIDE_EFFECT_LEDGER_ALL."""
    with side_effect(op) as entry:
        result = func(*args, **kwargs)
        entry.add_result(result)
    return result


def pending_side_effects(
    *, older_than: Any, tenant_id: uuid.UUID | None = None, batch: int = 100
) -> list[SideEffect]:
    """Pending rows started before `older_than` (a datetime), oldest first."""
    qs = SideEffect.objects.filter(status=SideEffect.Status.PENDING, started_at__lt=older_than)
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    return list(qs.order_by("started_at")[:batch])


def side_effect_fail(row: SideEffect, *, error_code: str) -> bool:
    """Mark a pending row failed (it will not be completed). False if it was settled."""
    return bool(
        SideEffect.objects.filter(pk=row.pk, status=SideEffect.Status.PENDING).update(
            status=SideEffect.Status.FAILED, finished_at=timezone.now(), error_code=error_code
        )
    )


MAX_RESUME_ATTEMPTS = 3


@dataclass(frozen=True)
class ResumeReport:
    completed: int = 0
    failed: int = 0
    skipped: int = 0


def side_effects_resume(
    *,
    older_than_minutes: int = 10,
    tenant_id: uuid.UUID | None = None,
    batch: int = 100,
    now: Any = None,
) -> ResumeReport:
    """Settle calls that crashed mid-way: their ledger rows are still `pending`.

    Each row older than the cut-off is claimed (its `started_at` moves to now, so a second
    runner leaves it alone), then completed through the resumable registry as Iris itself
    — the member approved it before it first ran — or marked `failed` when nothing can
    complete it. Resumable services must be safe to run twice: the crash may have come
    after their transaction committed and before the row was closed.
    """
    from governance.audit import audit_record
    from governance.operations import Resume, resumable
    from governance.principal import Principal

    now = now or timezone.now()
    cutoff = now - timedelta(minutes=older_than_minutes)
    completed = failed = skipped = 0
    for row in pending_side_effects(older_than=cutoff, tenant_id=tenant_id, batch=batch):
        claimed = SideEffect.objects.filter(
            pk=row.pk, status=SideEffect.Status.PENDING, started_at=row.started_at
        ).update(started_at=now)
        if not claimed:
            skipped += 1
            continue
        func = resumable(row.operation)
        code = ""
        if row.attempts >= MAX_RESUME_ATTEMPTS:
            code = "too-many-attempts"
        elif func is None:
            code = "not-resumable"
        elif row.member_public_id is None:
            code = "no-member"
        else:
            call = Resume(
                principal=Principal.system("resume_operations", row.tenant_id),
                member_id=row.member_public_id,
                arguments=dict(row.arguments),
                approval_id=row.approval_id,
                run_id=None,  # the call was authorised before it first ran
                side_effect_id=row.id,
            )
            try:
                func(call)
            except IrisError as exc:
                code = exc.code
            except Exception as exc:
                log.error("resuming side effect %s failed: %s", row.pk, type(exc).__name__)
                code = "resume-failed"
        if code:
            side_effect_fail(row, error_code=code[:64])
            failed += 1
        else:
            # The service closed the row itself when it reused it; close it if it did not.
            SideEffect.objects.filter(pk=row.pk, status=SideEffect.Status.PENDING).update(
                status=SideEffect.Status.DONE, finished_at=timezone.now()
            )
            completed += 1
        with transaction.atomic():
            audit_record(
                actor=Principal.system("resume_operations").actor,
                action=AuditAction.GOVERNANCE_SIDE_EFFECT_FAILED
                if code
                else AuditAction.GOVERNANCE_SIDE_EFFECT_COMPLETED,
                tenant_id=row.tenant_id,
                policy_id=POLICY_ID,
                severity="warning" if code else "info",
                reason_code=code or "resumed",
                subject_ids=[row.id],
                payload={"operation": row.operation},
            )
    return ResumeReport(completed, failed, skipped)


# -- the check -----------------------------------------------------------------------------


class SideEffectLedgerCheck(Check):
    """Destructive calls refuse at governance time when the ledger is off or their
    arguments could not be recorded, so the refusal is a recorded decision and nothing
    is queued for an approval that could never run."""

    name = CHECK_NAME
    priority = 35
    hooks = frozenset({Hook.PRE_DESTRUCTIVE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if not ledger_enabled():
            return Decision(
                self.name, Verdict.DENY, "side-effect-ledger-off", "The side-effect ledger is off."
            )
        try:
            operation_arguments(op)
        except ArgumentsNotStorable:
            return Decision(
                self.name,
                Verdict.DENY,
                "side-effect-arguments-invalid",
                "The call's arguments must be ids and codes only.",
            )
        return None


def register_checks() -> None:
    from governance.pipeline import register, registered_checks

    if not any(c.name == SideEffectLedgerCheck.name for c in registered_checks()):
        register(SideEffectLedgerCheck())
