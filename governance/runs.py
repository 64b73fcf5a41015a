"""Runs: taint and run limits (spec 003, "A write after outside text" and "Run limits").

A surface reports each tool step of its run (`POST /api/v1/runs/{runId}/steps`). A run is
tainted once one of its steps read external content: a web page, an e-mail, a document a
third party wrote. In a tainted run, a call of an operation listed in
`config/governance/taint-policy.yaml` (`approval_when_tainted`; by default
`memory_correct`, `memory_forget`, `memory_restore`) is held for the owner's approval with
a card that says why, or refused when the lane cannot pause (`can_pause=False`). The same
call in a clean run is unchanged. Taint is derived from the run's recorded steps on every
call, never cached, so a call resumed after an approval is still in a tainted run, and one
approval is not consent to the next write. The next user message starts a new run id.

Limits of the design, as in the spec: taint is set only by a reported step. Text that
reaches the model without a step (recalled memory, retrieval context injected by the
surface) does not taint the run.

Run limits: per run, at most IRIS_RUN_MAX_WRITES governed writes and IRIS_RUN_MAX_RECALLS
recalls; the same write (operation, subjects, arguments, new text) a third time
(IRIS_RUN_LOOP_REPEATS) or a correction that flips back to text it replaced in this run
(A→B→A) is a loop. Each is refused (`run-write-limit`, `run-recall-limit`,
`run-loop-detected`) and the decision audited by `govern`. Counters live on the `Run` row,
updated with F() under `select_for_update`.

Attributes read (`Operation.attributes`): ``run_id`` (UUID string), ``can_pause``,
``approval_id`` (see `governance.approvals`), ``previous_fingerprint`` (optional content
fingerprint of the revision a correction replaces).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import yaml
from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from governance.actions import AuditAction
from governance.approvals import ask_owner, consume, matching_approval, taint_card
from governance.audit import audit_record, canonical_json, sha256_hex
from governance.checks import secret_denial
from governance.effects import ArgumentsNotStorable, operation_fingerprint
from governance.errors import Forbidden, ValidationFailed
from governance.kernel_models import Run, RunStep
from governance.keys import text_fingerprint
from governance.pipeline import Check, Decision, Denied, Effect, Hook, Operation, Verdict
from governance.principal import Principal
from governance.secrets_screen import screen_fields

log = logging.getLogger(__name__)

POLICY_ID = "iris-governance-runs-v1"
DEFAULT_TAINT_OPERATIONS = frozenset({"memory_correct", "memory_forget", "memory_restore"})
TAINT_POLICY_KEY = "approval_when_tainted"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,95}$")
TOOL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}$")
MAX_SOURCE = 200


# -- the taint policy file -------------------------------------------------------------------


@dataclass(frozen=True)
class TaintPolicy:
    operations: frozenset[str]
    from_file: bool
    problem: str = ""


def short_name(operation: str) -> str:
    """The policy name of an operation: "memory.correct" → "memory_correct"."""
    return operation.replace(".", "_")


def taint_policy_path() -> Path:
    configured = getattr(settings, "IRIS_TAINT_POLICY_PATH", None)
    if configured:
        return Path(configured)
    return Path(settings.BASE_DIR) / "config" / "governance" / "taint-policy.yaml"


def parse_taint_policy(raw: str) -> frozenset[str]:
    """The operation names of a policy file's text; ValueError (no content) if malformed.

    Names only: lower-case letters, digits and underscores. A wildcard, a pattern, a
    non-string or an empty list makes the whole file malformed, so it cannot widen or
    silently narrow what is held.
    """
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ValueError("not valid YAML") from None
    if not isinstance(data, dict) or TAINT_POLICY_KEY not in data:
        raise ValueError(f"no {TAINT_POLICY_KEY} key")
    names = data[TAINT_POLICY_KEY]
    if not isinstance(names, list) or not names:
        raise ValueError(f"{TAINT_POLICY_KEY} is not a non-empty list")
    out = set()
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{TAINT_POLICY_KEY} holds something that is not a plain name")
        out.add(name)
    return frozenset(out)


_cache: dict[tuple[str, float], TaintPolicy] = {}


def load_taint_policy(path: Path | None = None) -> TaintPolicy:
    """The operations held in a tainted run. A missing or malformed file falls back to the
    three memory writes, and says so in the log (without the file's content)."""
    path = path or taint_policy_path()
    try:
        mtime = path.stat().st_mtime
    except OSError:
        log.warning("taint policy %s is missing; holding the default operations", path)
        return TaintPolicy(DEFAULT_TAINT_OPERATIONS, False, "missing")
    key = (str(path), mtime)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        policy = TaintPolicy(parse_taint_policy(path.read_text(encoding="utf-8")), True)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        reason = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
        log.warning(
            "taint policy %s is malformed (%s); holding the default operations", path, reason
        )
        policy = TaintPolicy(DEFAULT_TAINT_OPERATIONS, False, "malformed")
    _cache.clear()
    _cache[key] = policy
    return policy


# -- runs and steps ----------------------------------------------------------------------------


def parse_run_id(raw: object) -> uuid.UUID:
    try:
        return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    except ValueError:
        raise ValidationFailed("runId must be a UUID.", field="runId", rule="format") from None


def _run_for_update(*, tenant_id: uuid.UUID, run_id: uuid.UUID, surface: str) -> Run:
    """The run, locked for this transaction; created on first sight.

    A run belongs to one surface of the tenant: another surface that sends the same run id
    names a run of its own, so it can neither taint nor use up this one.
    """
    mine = Run.objects.select_for_update().filter(
        tenant_id=tenant_id, surface=surface, run_id=run_id
    )
    run = mine.first()
    if run is not None:
        return run
    try:
        with transaction.atomic():
            Run.objects.create(
                tenant_id=tenant_id, run_id=run_id, surface=surface, created_at=timezone.now()
            )
    except IntegrityError:
        pass  # another request created it first
    return mine.get()


def _surface_of(principal: Principal) -> str:
    return principal.surface or "" if principal.kind == "surface" else ""


def run_step_record(
    *,
    principal: Principal,
    run_id: uuid.UUID | str,
    tool: str,
    read_external_content: bool,
    source: str = "",
) -> RunStep:
    """Record one tool step a surface ran. Only surfaces report steps."""
    if principal.kind != "surface":
        raise Forbidden("Only a surface reports the steps of its runs.")
    # A surface client belongs to one tenant (the column is not null).
    tenant_id = principal.tenant_id
    assert tenant_id is not None
    key = parse_run_id(run_id)
    if not isinstance(tool, str) or not TOOL_PATTERN.match(tool):
        raise ValidationFailed(
            "tool must be a tool name (letters, digits, _ . : -; at most 64).",
            field="tool",
            rule="format",
        )
    if not isinstance(read_external_content, bool):
        raise ValidationFailed(
            "readExternalContent must be true or false.",
            field="readExternalContent",
            rule="type",
        )
    source = source or ""
    if len(source) > MAX_SOURCE or not source.isprintable():
        raise ValidationFailed(
            f"source must be at most {MAX_SOURCE} printable characters.",
            field="source",
            rule="format",
        )
    # A step's names are stored: they pass the same secret screen as a memory body.
    found = screen_fields({"tool": tool, "source": source})
    if found is not None:
        refusal = secret_denial("secret-screen", found)
        raise Denied(refusal.detail, code=refusal.reason_code, extra=refusal.extra)
    with transaction.atomic(durable=True):
        run = _run_for_update(tenant_id=tenant_id, run_id=key, surface=_surface_of(principal))
        Run.objects.filter(pk=run.pk).update(step_count=F("step_count") + 1)
        run.refresh_from_db(fields=["step_count"])
        step = RunStep.objects.create(
            tenant_id=tenant_id,
            run=run,
            seq=run.step_count,
            tool=tool,
            read_external_content=read_external_content,
            source=source,
            reported_at=timezone.now(),
        )
        audit_record(
            actor=principal.actor,
            action=AuditAction.GOVERNANCE_RUN_STEP_RECORDED,
            tenant_id=principal.tenant_id,
            policy_id=POLICY_ID,
            reason_code="external-content" if read_external_content else "",
            subject_ids=[key],
            payload={"tool": tool, "seq": step.seq, "readExternalContent": read_external_content},
        )
    return step


def run_is_tainted(*, tenant_id: uuid.UUID | None, surface: str, run_id: uuid.UUID) -> bool:
    """Did any recorded step of this surface's run read external content? Worked out from
    the steps."""
    if tenant_id is None:
        return False  # every step has a tenant, so none would match
    return RunStep.objects.filter(
        tenant_id=tenant_id,
        run__surface=surface,
        run__run_id=run_id,
        read_external_content=True,
    ).exists()


def _run_id_of(op: Operation) -> uuid.UUID | None:
    raw = op.attributes.get("run_id")
    if raw is None or raw == "":
        return None
    return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))


# -- taint ---------------------------------------------------------------------------------


class TaintHold(Check):
    """In a tainted run, a listed write waits for the owner (or is refused if it cannot)."""

    name = "taint-hold"
    priority = 40
    hooks = frozenset({Hook.PRE_WRITE, Hook.PRE_DESTRUCTIVE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if short_name(op.name) not in load_taint_policy().operations:
            return None
        try:
            run_id = _run_id_of(op)
        except ValueError:
            return Decision(self.name, Verdict.DENY, "run-id-invalid", "run_id is not a UUID.")
        if run_id is None or not run_is_tainted(
            tenant_id=op.tenant_id, surface=_surface_of(op.principal), run_id=run_id
        ):
            return None
        try:
            fingerprint = operation_fingerprint(op)
        except ArgumentsNotStorable:
            return Decision(
                self.name, Verdict.DENY, "approval-arguments-invalid", "The call cannot be held."
            )
        approval = matching_approval(op, fingerprint)
        if approval is not None:
            # A destructive call's approval is spent by owner-approval, later in this pass.
            if op.effect == Effect.DESTRUCTIVE and hook == Hook.PRE_DESTRUCTIVE:
                return Decision(self.name, Verdict.ALLOW, "owner-approved")
            if consume(approval):
                return Decision(self.name, Verdict.ALLOW, "owner-approved")
        return ask_owner(self.name, op, reason_code="tainted-run", card=taint_card)


# -- run limits ----------------------------------------------------------------------------


def max_writes() -> int:
    return int(getattr(settings, "IRIS_RUN_MAX_WRITES", 50))


def max_recalls() -> int:
    return int(getattr(settings, "IRIS_RUN_MAX_RECALLS", 200))


def loop_repeats() -> int:
    return int(getattr(settings, "IRIS_RUN_LOOP_REPEATS", 3))


def content_fingerprint(text: str | None) -> str:
    """The keyed fingerprint of a write's text (the memory's `body_fingerprint` for a
    body): a run's history must not let anyone confirm a guessed text offline."""
    return text_fingerprint(text) if text else ""


@dataclass(frozen=True)
class WriteRecord:
    """One write of a run, as hashes: the whole call, its subject, its new and old text."""

    write: str
    subject: str
    content: str
    previous: str = ""

    def as_json(self) -> dict[str, str]:
        return {"w": self.write, "s": self.subject, "c": self.content, "p": self.previous}

    @classmethod
    def from_json(cls, raw: dict[str, str]) -> WriteRecord:
        return cls(raw.get("w", ""), raw.get("s", ""), raw.get("c", ""), raw.get("p", ""))


def write_record(op: Operation) -> WriteRecord:
    subject = sha256_hex(
        canonical_json({"operation": op.name, "subjectIds": [str(s) for s in op.subject_ids]})
    )
    content = content_fingerprint(op.text)
    write = sha256_hex(f"{operation_fingerprint(op)}:{content}".encode())
    previous = op.attributes.get("previous_fingerprint") or ""
    return WriteRecord(write, subject, content, previous if isinstance(previous, str) else "")


def detect_loop(history: list[WriteRecord], new: WriteRecord, *, repeats: int) -> bool:
    """Pure rule: is `new` the same write for the `repeats`-th time, or a flip A→B→A?"""
    if sum(1 for r in history if r.write == new.write) + 1 >= repeats:
        return True
    if not new.content:
        return False
    # The subject's text over this run: what each write replaced (when known) and set.
    versions: list[str] = []
    for record in (r for r in history if r.subject == new.subject):
        if record.previous and (not versions or versions[-1] != record.previous):
            versions.append(record.previous)
        if record.content:
            versions.append(record.content)
    if new.previous and (not versions or versions[-1] != new.previous):
        versions.append(new.previous)
    if not versions or versions[-1] == new.content:
        return False
    return new.content in versions[:-1]


class RunLimits(Check):
    """Caps on a run's writes and recalls, and loop detection. Runs after the approval
    checks, so only calls that would really run count against the run."""

    name = "run-limits"
    priority = 60
    hooks = frozenset({Hook.PRE_WRITE, Hook.PRE_DESTRUCTIVE, Hook.PRE_RECALL})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        try:
            run_id = _run_id_of(op)
        except ValueError:
            return Decision(self.name, Verdict.DENY, "run-id-invalid", "run_id is not a UUID.")
        if run_id is None or op.tenant_id is None:
            return None
        if hook == Hook.PRE_RECALL:
            return self._recall(op, run_id)
        try:
            record = write_record(op)
        except ArgumentsNotStorable:
            return None  # the ledger and approval checks refuse such calls
        return self._write(op, run_id, record)

    def _recall(self, op: Operation, run_id: uuid.UUID) -> Decision | None:
        assert op.tenant_id is not None  # evaluate() returns early without a tenant
        with transaction.atomic():
            run = _run_for_update(
                tenant_id=op.tenant_id, run_id=run_id, surface=_surface_of(op.principal)
            )
            if run.recall_count >= max_recalls():
                return Decision(
                    self.name, Verdict.DENY, "run-recall-limit", "This run recalled too often."
                )
            Run.objects.filter(pk=run.pk).update(recall_count=F("recall_count") + 1)
        return None

    def _write(self, op: Operation, run_id: uuid.UUID, record: WriteRecord) -> Decision | None:
        assert op.tenant_id is not None  # evaluate() returns early without a tenant
        limit = max_writes()
        with transaction.atomic():
            run = _run_for_update(
                tenant_id=op.tenant_id, run_id=run_id, surface=_surface_of(op.principal)
            )
            if run.write_count >= limit:
                return Decision(
                    self.name, Verdict.DENY, "run-write-limit", "This run wrote too often."
                )
            history = [WriteRecord.from_json(r) for r in run.recent_writes]
            if detect_loop(history, record, repeats=loop_repeats()):
                return Decision(
                    self.name,
                    Verdict.DENY,
                    "run-loop-detected",
                    "This run keeps making the same change; it was stopped.",
                )
            recent = [*run.recent_writes, record.as_json()][-limit:]
            Run.objects.filter(pk=run.pk).update(
                write_count=F("write_count") + 1, recent_writes=recent
            )
        return None


def runs_forget_content(*, tenant_id: uuid.UUID, fingerprints: Iterable[str]) -> int:
    """Drop from the tenant's runs every write record that names one of these content
    fingerprints (new or replaced text); returns how many runs changed. Called in the
    forget and hard-delete transactions, so a forgotten text leaves no trace in a run.

    Runs are not tied to a member, so this reads the tenant's runs that hold writes (at
    most IRIS_RUN_RETENTION_DAYS of them) and matches the fingerprint in the stored JSON's
    text, which works the same on PostgreSQL and SQLite.
    """
    wanted = {fp for fp in fingerprints if fp}
    if not wanted:
        return 0
    matches = Q()
    for fp in sorted(wanted):
        matches |= Q(history__contains=fp)
    runs = (
        Run.objects.filter(tenant_id=tenant_id, write_count__gt=0)
        .annotate(history=Cast("recent_writes", TextField()))
        .filter(matches)
        .select_for_update(of=("self",))
    )
    changed = 0
    for run in runs:
        kept = [
            r for r in run.recent_writes if r.get("c") not in wanted and r.get("p") not in wanted
        ]
        if len(kept) != len(run.recent_writes):
            Run.objects.filter(pk=run.pk).update(recent_writes=kept)
            changed += 1
    return changed


def run_retention() -> timedelta:
    return timedelta(days=int(getattr(settings, "IRIS_RUN_RETENTION_DAYS", 7)))


def runs_expire(*, now: datetime | None = None, batch: int = 1000) -> int:
    """Delete runs (and their steps) older than IRIS_RUN_RETENTION_DAYS, a batch at a time.

    A run lives for one turn; it is kept a while longer so that an approval answered the
    next day still resumes in a run that knows its taint. Runs are not tied to a member,
    so they must not outlive that purpose: a step's `source` may name where text came from.
    """
    cutoff = (now or timezone.now()) - run_retention()
    ids = list(
        Run.objects.filter(created_at__lt=cutoff)
        .order_by("created_at")
        .values_list("pk", flat=True)[:batch]
    )
    if not ids:
        return 0
    with transaction.atomic():
        RunStep.objects.filter(run_id__in=ids).delete()
        Run.objects.filter(pk__in=ids).delete()
    return len(ids)


@shared_task(name="governance.runs.expire")
def runs_expire_task() -> int:
    return runs_expire()


def register_checks() -> None:
    from governance.pipeline import register, registered_checks

    names = {c.name for c in registered_checks()}
    for check in (TaintHold(), RunLimits()):
        if check.name not in names:
            register(check)
