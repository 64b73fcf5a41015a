"""The audit chain: one function records an event; a sealer chains events per tenant in
commit order; signed checkpoints outside the database catch a rewrite of every hash.

Writers never wait on one another: an event is inserted with its own content hash inside
the caller's transaction, and its chain position is appended later by the sealer, which
runs after commit (and on the beat schedule) under a try-lock, so at most one seals at once
and nobody queues behind it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from governance import after_response, keys, plainsql
from governance.actions import AuditAction
from governance.after_commit import after_commit
from governance.models import AuditEvent, AuditSeal

log = logging.getLogger(__name__)

GENESIS = "0" * 64
SYSTEM_CHAIN = "system"
CHECKPOINT_PURPOSE = "iris-audit-checkpoint-v1"
# Keys an audit payload may never carry: the audit records that something happened, not what.
FORBIDDEN_PAYLOAD_KEYS = frozenset(
    {"body", "text", "content", "secret", "token", "password", "value", "note", "query"}
)
MAX_PAYLOAD_STRING = 200
# How far behind the newest sealed event the sealer looks for late commits.
SEAL_LOOKBACK = 2_000
REQUEST_SEAL_LOOKBACK = 100
SEAL_INSERT_ROWS = 1_000


class AuditPayloadError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Actor:
    kind: str  # member | operator | surface | system | job
    id: str

    @classmethod
    def system(cls, name: str = "iris") -> Actor:
        return cls("system", name)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def event_canonical(event: AuditEvent) -> bytes:
    return canonical_json(
        {
            "id": str(event.id),
            "occurredAt": _iso(event.occurred_at),
            "tenantId": str(event.tenant_id) if event.tenant_id else None,
            "actorKind": event.actor_kind,
            "actorId": event.actor_id,
            "action": event.action,
            "policyId": event.policy_id,
            "severity": event.severity,
            "reasonCode": event.reason_code,
            "subjectIds": list(event.subject_ids),
            "payload": event.payload,
        }
    )


def chain_link(prev_hash: str, content_hash: str) -> str:
    return sha256_hex(f"{prev_hash}:{content_hash}".encode())


def _check_payload(payload: Mapping[str, Any], path: str = "payload") -> None:
    for key, value in payload.items():
        if key.lower() in FORBIDDEN_PAYLOAD_KEYS:
            raise AuditPayloadError(f"{path}.{key}: audit payloads carry no content")
        if isinstance(value, Mapping):
            _check_payload(value, f"{path}.{key}")
        elif isinstance(value, str) and len(value) > MAX_PAYLOAD_STRING:
            raise AuditPayloadError(f"{path}.{key}: audit strings are codes or ids, not text")
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, str) and len(item) > MAX_PAYLOAD_STRING:
                    raise AuditPayloadError(f"{path}.{key}: audit strings are codes or ids")
                if isinstance(item, Mapping):
                    _check_payload(item, f"{path}.{key}[]")


def audit_record(
    *,
    actor: Actor,
    action: AuditAction,
    tenant_id: uuid.UUID | str | None,
    policy_id: str = "",
    severity: str = AuditEvent.Severity.INFO,
    reason_code: str = "",
    subject_ids: Iterable[uuid.UUID | str] = (),
    payload: Mapping[str, Any] | None = None,
    occurred_at: datetime | None = None,
) -> AuditEvent:
    """Record one audit event inside the caller's transaction.

    If the insert fails the exception propagates and the caller's transaction (the operation
    being recorded) rolls back: an operation that cannot be audited does not happen.
    """
    event = _event(
        actor=actor,
        action=action,
        tenant_id=tenant_id,
        policy_id=policy_id,
        severity=severity,
        reason_code=reason_code,
        subject_ids=subject_ids,
        payload=payload,
        occurred_at=occurred_at,
    )
    _write([event])
    return event


def audit_record_many(
    records: Iterable[Mapping[str, Any]],
    *,
    riders: Sequence[tuple[str, Sequence[Any]]] = (),
) -> list[AuditEvent]:
    """Record several events (keyword sets of `audit_record`) in one INSERT. `riders`:
    the caller's own data-modifying statements (SQL, parameters), written by that same
    statement on PostgreSQL (`plainsql.insert`), so they and the events commit together
    even outside a transaction; not inside a `one_insert` block."""
    events = [_event(**fields) for fields in records]
    _write(events, riders)
    return events


_batch = threading.local()


@contextmanager
def one_insert() -> Iterator[None]:
    """Inside the caller's transaction: events recorded in the block are written together
    by one INSERT when it ends, and not at all if it raises (so the transaction, which the
    exception rolls back, loses nothing it would have kept). A nested block joins the
    outer one. An event recorded inside a savepoint opened in the block is written at once,
    so that rolling the savepoint back still takes the event with it."""
    if getattr(_batch, "events", None) is not None:
        yield
        return
    if not connection.in_atomic_block:
        raise RuntimeError("one_insert belongs inside the operation's transaction")
    _batch.events = []
    _batch.depth = len(connection.savepoint_ids)
    try:
        yield
        events = _batch.events
    finally:
        _batch.events = None
    _write(events)


def _write(events: list[AuditEvent], riders: Sequence[tuple[str, Sequence[Any]]] = ()) -> None:
    if not events:
        return
    queued = getattr(_batch, "events", None)
    if queued is not None and len(connection.savepoint_ids) == _batch.depth:
        if riders:
            raise RuntimeError("riders cannot wait for a one_insert block's INSERT")
        queued.extend(events)
        return
    along = [row for listener in _listeners for row in listener(events)]
    plainsql.insert(AuditEvent, events, along=along, riders=riders)
    _request_seal_after_commit()


# Called with each batch of events before it is inserted; the rows a listener returns are
# written by the events' own statement, so they commit or roll back with them. Apps
# register here: governance knows none of them. `events.outbox` derives the events other
# systems receive.
Listener = Callable[[list[AuditEvent]], Sequence[models.Model]]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def _event(
    *,
    actor: Actor,
    action: AuditAction,
    tenant_id: uuid.UUID | str | None,
    policy_id: str = "",
    severity: str = AuditEvent.Severity.INFO,
    reason_code: str = "",
    subject_ids: Iterable[uuid.UUID | str] = (),
    payload: Mapping[str, Any] | None = None,
    occurred_at: datetime | None = None,
) -> AuditEvent:
    payload = dict(payload or {})
    _check_payload(payload)
    event = AuditEvent(
        id=uuid.uuid4(),
        occurred_at=occurred_at or timezone.now(),
        tenant_id=uuid.UUID(str(tenant_id)) if tenant_id else None,
        actor_kind=actor.kind,
        actor_id=str(actor.id),
        action=action,
        policy_id=policy_id,
        severity=severity,
        reason_code=reason_code,
        subject_ids=[str(s) for s in subject_ids],
        payload=payload,
    )
    event.content_hash = sha256_hex(event_canonical(event))
    return event


_last_seal = 0.0


def _seal_after_commit() -> None:
    # Within a request the seal waits until the answer has gone out: a seal of a busy
    # chain sat inside whichever request committed at that moment. One per request.
    after_response.defer(_seal_now, once=True)


def _seal_now() -> None:
    # Sealing is cheap but not free; under load one seal per interval per process chains
    # everyone's events in a batch, and the beat task sweeps up whatever is left.
    global _last_seal
    now = time.monotonic()
    if now - _last_seal < settings.IRIS_AUDIT_SEAL_INTERVAL:
        return
    _last_seal = now
    try:
        # A short look back: an event that commits later than that is sealed by the beat
        # task's full sweep (a seal's order is commit order, so late is still in order).
        seal_pending(blocking=False, lookback=REQUEST_SEAL_LOOKBACK)
    except Exception:  # the beat task seals later; never fail a committed request for it
        log.exception("audit seal after commit failed")


def _request_seal_after_commit() -> None:
    # One seal per transaction, however many events it records.
    after_commit(_seal_after_commit, once=True)


def _chain_of(event: AuditEvent) -> str:
    return _chain_of_tenant(event.tenant_id)


def _chain_of_tenant(tenant_id: uuid.UUID | None) -> str:
    return str(tenant_id) if tenant_id else SYSTEM_CHAIN


def _try_lock(blocking: bool) -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite serialises writers itself
    with connection.cursor() as cursor:
        fn = "pg_advisory_xact_lock" if blocking else "pg_try_advisory_xact_lock"
        cursor.execute(f"SELECT {fn}(hashtext('iris-audit-seal'))")
        row = cursor.fetchone()
        return True if blocking else bool(row[0])


def seal_pending(
    *, blocking: bool = False, full: bool = False, batch: int = 5000, lookback: int = SEAL_LOOKBACK
) -> int:
    """Give every committed, unsealed event its chain position. Returns how many."""
    sealed = 0
    try:
        with transaction.atomic():
            if not _try_lock(blocking):
                return 0
            events = _unsealed(full=full, batch=batch, lookback=lookback)
            if not events:
                return 0
            chains = {_chain_of_tenant(tenant) for _, tenant, _ in events}
            heads = {seal.chain: (seal.position, seal.chain_hash) for seal in _chain_heads(chains)}
            rows = []
            for seq, tenant, content_hash in events:
                chain = _chain_of_tenant(tenant)
                position, prev = heads.get(chain, (0, GENESIS))
                link = chain_link(prev, content_hash)
                rows.append((chain, position + 1, seq, prev, link))
                heads[chain] = (position + 1, link)
            _insert_seals(rows, timezone.now())
            sealed = len(rows)
    except IntegrityError:
        # Another sealer won the race (SQLite has no advisory lock); it sealed these.
        return 0
    if sealed == batch:
        sealed += seal_pending(blocking=blocking, full=full, batch=batch, lookback=lookback)
    return sealed


_SEAL_COLUMNS = "chain, position, event_id, event_seq, prev_hash, chain_hash, sealed_at"


def _insert_seals(rows: list[tuple[str, int, int, str, str]], sealed_at: datetime) -> None:
    """(chain, position, event seq, previous hash, chain hash) rows, in one statement.

    A seal runs after most requests: on PostgreSQL five arrays make one fixed statement,
    whatever the count, with no model instance per row.
    """
    if connection.vendor == "postgresql":
        chains, positions, seqs, prevs, links = (list(c) for c in zip(*rows, strict=True))
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {AuditSeal._meta.db_table} ({_SEAL_COLUMNS}) "  # noqa: S608
                "SELECT c, p, s, s, h0, h1, %s FROM unnest("
                "%s::varchar[], %s::bigint[], %s::bigint[], %s::varchar[], %s::varchar[]"
                ") AS t(c, p, s, h0, h1)",
                [sealed_at, chains, positions, seqs, prevs, links],
            )
        return
    seals = [
        AuditSeal(
            chain=chain,
            position=position,
            event_id=seq,
            event_seq=seq,
            prev_hash=prev,
            chain_hash=link,
            sealed_at=sealed_at,
        )
        for chain, position, seq, prev, link in rows
    ]
    # Chunks keep under SQLite's limit on bound parameters.
    for start in range(0, len(seals), SEAL_INSERT_ROWS):
        plainsql.insert(AuditSeal, seals[start : start + SEAL_INSERT_ROWS])


def _unsealed(*, full: bool, batch: int, lookback: int) -> list[tuple[int, Any, str]]:
    """(seq, tenant_id, content_hash) of committed events without a seal, oldest first.

    Only what a seal needs: reading whole rows (payloads) cost more than the sealing. Short
    of a full sweep, only events after the newest sealed one, or at most `lookback` before
    it, are considered; both reads are index range scans.
    """
    columns = ("seq", "tenant_id", "content_hash")
    if full:
        unsealed = AuditEvent.objects.filter(
            ~Exists(AuditSeal.objects.filter(event=OuterRef("pk")))
        )
        return list(unsealed.order_by("seq").values_list(*columns)[:batch])
    # The newest `lookback` seals hold every sealed seq above newest - lookback.
    recent = list(
        AuditSeal.objects.order_by("-event_seq").values_list("event_seq", flat=True)[:lookback]
    )
    floor = (recent[0] if recent else 0) - lookback
    sealed = {seq for seq in recent if seq > floor}
    # Nothing after `newest` is sealed, so at most len(sealed) rows of the window are skipped.
    window = AuditEvent.objects.filter(seq__gt=floor).order_by("seq").values_list(*columns)
    return [row for row in window[: batch + len(sealed)] if row[0] not in sealed][:batch]


def _chain_heads(chains: set[str]) -> list[AuditSeal]:
    # One indexed lookup per chain (a sealing batch touches a few tenants).
    heads = []
    for chain in sorted(chains):
        head = AuditSeal.objects.filter(chain=chain).order_by("-position").first()
        if head is not None:
            heads.append(head)
    return heads


# -- checkpoints -------------------------------------------------------------------------


def _checkpoint_message(chain: str, position: int, chain_hash: str, signed_at: str) -> bytes:
    return canonical_json(
        {"chain": chain, "position": position, "chainHash": chain_hash, "signedAt": signed_at}
    )


def checkpoint_path() -> Path:
    return Path(settings.IRIS_AUDIT_CHECKPOINT_PATH)


def read_checkpoints(path: Path | None = None) -> list[dict[str, Any]]:
    path = path or checkpoint_path()
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def write_checkpoint(path: Path | None = None) -> int:
    """Sign every chain head that moved since its last checkpoint and append it to the file
    (kept outside the database, so rewriting rows and hashes together is still caught)."""
    path = path or checkpoint_path()
    seal_pending(blocking=True)
    last: dict[str, int] = {}
    for cp in read_checkpoints(path):
        last[cp["chain"]] = max(last.get(cp["chain"], 0), cp["position"])
    heads = {
        row["chain"]: row["top"]
        for row in AuditSeal.objects.values("chain").annotate(top=Max("position"))
    }
    lines = []
    for chain, top in sorted(heads.items()):
        if last.get(chain) == top:
            continue
        seal = AuditSeal.objects.get(chain=chain, position=top)
        signed_at = _iso(timezone.now())
        key_id, mac = keys.sign(
            CHECKPOINT_PURPOSE, _checkpoint_message(chain, top, seal.chain_hash, signed_at)
        )
        lines.append(
            json.dumps(
                {
                    "chain": chain,
                    "position": top,
                    "chainHash": seal.chain_hash,
                    "signedAt": signed_at,
                    "keyId": key_id,
                    "mac": mac,
                },
                sort_keys=True,
            )
        )
    if lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write("\n".join(lines) + "\n")
    return len(lines)


# -- verification ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChainBreak:
    event_id: str
    chain: str
    position: int | None
    reason: str

    def __str__(self) -> str:
        where = f"chain {self.chain} position {self.position}" if self.position else "unsealed"
        return f"event {self.event_id} ({where}): {self.reason}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    events: int
    chains: int
    checkpoints: int
    first_break: ChainBreak | None

    @property
    def ok(self) -> bool:
        return self.first_break is None


def verify_chain(*, checkpoints_file: Path | None = None, chunk: int = 2000) -> VerifyReport:
    """Walk every chain from its genesis, recompute every hash, and compare with the signed
    checkpoints. Names the first event that breaks."""
    seal_pending(blocking=True, full=True)
    checkpoints: dict[str, dict[int, dict[str, Any]]] = {}
    for signed in read_checkpoints(checkpoints_file):
        checkpoints.setdefault(signed["chain"], {})[signed["position"]] = signed
    chains = list(AuditSeal.objects.values_list("chain", flat=True).distinct().order_by("chain"))
    total = 0
    first_break: ChainBreak | None = None
    for chain in chains:
        prev = GENESIS
        expected_position = 1
        cps = checkpoints.get(chain, {})
        last_good_checkpoint = 0
        seals = (
            AuditSeal.objects.filter(chain=chain)
            .select_related("event")
            .order_by("position")
            .iterator(chunk_size=chunk)
        )
        for seal in seals:
            event = seal.event
            total += 1
            brk = None
            if seal.position != expected_position:
                brk = f"position {expected_position} is missing"
            elif sha256_hex(event_canonical(event)) != event.content_hash:
                brk = "content does not match its hash (the event was changed)"
            elif _chain_of(event) != chain:
                brk = "event sits in another tenant's chain"
            elif seal.prev_hash != prev or chain_link(prev, event.content_hash) != seal.chain_hash:
                brk = "chain link does not match its predecessor"
            else:
                cp = cps.get(seal.position)
                if cp is not None:
                    message = _checkpoint_message(
                        chain, cp["position"], cp["chainHash"], cp["signedAt"]
                    )
                    if not keys.verify_signature(
                        CHECKPOINT_PURPOSE, message, cp["keyId"], cp["mac"]
                    ):
                        brk = "signed checkpoint has a bad signature"
                    elif cp["chainHash"] != seal.chain_hash:
                        brk = (
                            "chain differs from the signed checkpoint at position "
                            f"{seal.position} (rewritten after position {last_good_checkpoint})"
                        )
                    else:
                        last_good_checkpoint = seal.position
            if brk:
                if "signed checkpoint at" in brk:
                    # Name the first event after the last checkpoint that still matched.
                    bad = AuditSeal.objects.select_related("event").get(
                        chain=chain, position=last_good_checkpoint + 1
                    )
                    first_break = ChainBreak(str(bad.event.id), chain, bad.position, brk)
                else:
                    first_break = ChainBreak(str(event.id), chain, seal.position, brk)
                break
            prev = seal.chain_hash
            expected_position += 1
        if first_break:
            break
        beyond = [p for p in cps if p >= expected_position]
        if beyond:
            first_break = ChainBreak(
                "-", chain, min(beyond), "a signed checkpoint names events that are gone"
            )
            break
    if first_break is None:
        for cp_chain in checkpoints:
            if cp_chain not in chains:
                first_break = ChainBreak("-", cp_chain, None, "a checkpointed chain is gone")
                break
    if first_break is None:
        unsealed = AuditEvent.objects.filter(seal__isnull=True).count()
        if unsealed:
            first_break = ChainBreak("-", "-", None, f"{unsealed} events could not be sealed")
    return VerifyReport(
        events=total,
        chains=len(chains),
        checkpoints=sum(len(v) for v in checkpoints.values()),
        first_break=first_break,
    )
