"""Load: the REST API under a mixed workload at rising concurrency, and nothing lost.

    .venv/bin/python bench/load.py                          # 1, 8, 32, 64 clients, 20 s each
    .venv/bin/python bench/load.py --clients 1,8,32 --seconds 15
    .venv/bin/python bench/load.py --redis-url redis://127.0.0.1:6379/8

What it does:

1. recreates its own PostgreSQL database (`--database-url`, default `iris_bench_load`),
   migrates it with the production settings and creates one tenant, an assistant client
   on the local tier, and one member per client slot (processing and storage consent);
2. starts the README's production server (`gunicorn iris_site.wsgi --preload --workers 4`,
   DEBUG=0, PostgreSQL, Redis) and a real Celery worker on the same Redis
   (`celery -A iris_site worker --concurrency 1`), so every job a request queues (a
   revocation's cascade, continuity's purge) runs beside the load;
3. writes `--seed` memories per member through the API (acknowledged writes, checked at
   the end like every other);
4. for each step of `--clients`, N threads (each its own HTTP session and its own member)
   run for `--seconds` a mixed workload: 70% recall, 20% write, 10% other (a consent
   grant or revocation of a sensitive category, the forget of one of the member's own
   acknowledged writes, a continuity hand-off token, a data-rights export request); after
   its first operation and every tenth since, the same client also sends the floor, a
   recall with `limit: 999`, which the API refuses with 400 after authentication, the
   member's lookup and the throttle: the stack's cost without the work, under the same
   load;
5. prints per step and operation the throughput, p50/p95/p99 and errors (a timeout, a
   failed connection, a 5xx, or a status the operation never answers with), the floor's
   p95 and the load average, as a table and one JSON line per step;
6. waits for the worker's queue to drain, then checks that nothing was lost: every
   acknowledged write not since forgotten reads back (`GET /api/v1/memories/{id}`, 200
   and active) and every acknowledged forget is absent (404), and that `manage.py
   verify_audit` passes. Both checks are printed; the run exits 1 if either fails.

A data-rights export request is answered 201 the first time for a member and then 409
`open-request-exists` (a surface's request waits for the member's verification): both are
the API's answer, not errors. The throttle is lifted (one token drives every member).
Logs stay in `$IRIS_VAR_DIR` (default `var/bench-load/`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import (  # noqa: E402
    ROOT,
    drop_database,
    gunicorn,
    percentile,
    production_env,
    recreate_database,
    stop,
)

PY = ROOT / ".venv" / "bin" / "python"
# Out of 1000: 70% recall, 20% write, 10% the rest in equal parts.
MIX: tuple[tuple[str, int], ...] = (
    ("recall", 700),
    ("write", 200),
    ("consent", 25),
    ("forget", 25),
    ("continuity", 25),
    ("data-rights", 25),
)
FLOOR_EVERY = 10
# The statuses each operation answers with when it works as designed.
EXPECTED: dict[str, frozenset[int]] = {
    "recall": frozenset({200}),
    "write": frozenset({200, 201}),
    "consent": frozenset({200, 201}),
    "forget": frozenset({200}),
    "continuity": frozenset({200, 201}),
    "data-rights": frozenset({201, 409}),
    "floor": frozenset({400}),
    "seed": frozenset({201}),
}
WORDS = (
    "garden tea piano river cycling sourdough chess hiking violin pottery jazz lantern "
    "marathon origami tomato basil lemon harbour kayak novel poetry espresso granite "
    "sunrise winter autumn spring summer museum theatre ballet tennis rowing falcon "
    "maple cedar orchard meadow canyon glacier island village market bakery library"
).split()

SETUP = """
import json, sys
import django
django.setup()
from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.services import consent_record
from governance.audit import Actor
from governance.principal import Principal
from governance.services import surface_client_create, tenant_create, user_create
actor = Actor("system", "bench-load")
tenant = tenant_create(actor=actor, slug="load", name="Load bench")
members = []
for n in range(int(sys.argv[1])):
    user = user_create(actor=actor, tenant=tenant, username=f"load-{n}").user
    principal = Principal(kind="member", id=user.public_id, tenant_id=tenant.id)
    for consent_type in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE):
        consent_record(principal=principal, member=user, consent_type=consent_type,
                       status="granted", legal_basis=LegalBasis.CONSENT,
                       capture_method=CaptureMethod.SETTINGS_TOGGLE)
    members.append(str(user.public_id))
token = surface_client_create(
    actor=actor, tenant=tenant, surface="assistant", destination_tier="local"
).token
print(json.dumps({"token": token, "members": members}))
"""


# --------------------------------------------------------------------------------------
# Pure helpers


def pick(mix: Sequence[tuple[str, int]], u: float) -> str:
    """The operation a uniform draw `u` in [0, 1) falls on, by the mix's weights."""
    total = sum(weight for _, weight in mix)
    point = u * total
    for name, weight in mix:
        if point < weight:
            return name
        point -= weight
    return mix[-1][0]


@dataclass(frozen=True, slots=True)
class Sample:
    op: str
    seconds: float
    status: int | None  # None: timed out or the connection failed


def is_error(sample: Sample) -> bool:
    """A timeout, a failed connection, a 5xx or a status the operation never answers with."""
    return sample.status is None or sample.status not in EXPECTED[sample.op]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def summarise(samples: Iterable[Sample], seconds: float) -> dict[str, Any]:
    """Per operation: count, throughput, p50/p95/p99 (ms, answered calls only) and errors;
    overall: throughput and error rate of the mix (the floor is reported on its own)."""
    by_op: dict[str, list[Sample]] = {}
    for sample in samples:
        by_op.setdefault(sample.op, []).append(sample)
    ops: dict[str, dict[str, Any]] = {}
    for op, group in sorted(by_op.items()):
        answered = [s.seconds for s in group if s.status is not None]
        errors = sum(is_error(s) for s in group)
        ops[op] = {
            "count": len(group),
            "per_second": round(len(group) / seconds, 1) if seconds else None,
            "p50_ms": ms(percentile(answered, 50)),
            "p95_ms": ms(percentile(answered, 95)),
            "p99_ms": ms(percentile(answered, 99)),
            "errors": errors,
        }
    mixed = [s for s in (s for g in by_op.values() for s in g) if s.op != "floor"]
    total_errors = sum(is_error(s) for s in mixed)
    return {
        "ops": ops,
        "requests": len(mixed),
        "per_second": round(len(mixed) / seconds, 1) if seconds else None,
        "error_rate": round(total_errors / len(mixed), 4) if mixed else None,
        "errors": total_errors,
    }


def lost(
    written: Iterable[str], forgotten: Iterable[str], status_of: dict[str, int | None]
) -> dict[str, list[str]]:
    """Acknowledged writes that do not read back (200) and acknowledged forgets still
    there (anything but 404). `status_of` is each id's read-back status."""
    gone = set(forgotten)
    return {
        "writes_missing": sorted(i for i in written if i not in gone and status_of.get(i) != 200),
        "forgets_present": sorted(i for i in gone if status_of.get(i) != 404),
    }


# --------------------------------------------------------------------------------------
# Clients


@dataclass
class Member:
    """What the API acknowledged for one member: the bench's record to check at the end."""

    public_id: str
    written: list[str] = field(default_factory=list)
    forgotten: set[str] = field(default_factory=set)
    sensitive_granted: bool = False
    writes: int = 0


class Client:
    def __init__(self, base: str, token: str, member: Member, timeout: float, seed: int) -> None:
        self.base = base
        self.member = member
        self.timeout = timeout
        self.rng = random.Random(seed)
        self.session = requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        )

    def call(self, op: str, method: str, path: str, payload: Any = None) -> tuple[Sample, Any]:
        start = time.perf_counter()
        try:
            response = self.session.request(
                method,
                self.base + path,
                data=None if payload is None else json.dumps(payload),
                timeout=self.timeout,
            )
        except requests.RequestException:
            self.session.close()  # the broken connection may be the session's
            return Sample(op, time.perf_counter() - start, None), None
        seconds = time.perf_counter() - start
        try:
            body = response.json()
        except ValueError:
            body = None
        return Sample(op, seconds, response.status_code), body

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def write(self, op: str = "write") -> Sample:
        m = self.member
        m.writes += 1
        sample, body = self.call(
            op,
            "POST",
            "/api/v1/memories",
            {
                "userId": m.public_id,
                "scope": {"kind": "profile", "userId": m.public_id},
                "category": "preference",
                "body": f"Likes {self.words(6)} (note {m.writes} of {m.public_id[:8]})",
                "subject": f"load-{m.public_id[:8]}-{m.writes}",
                "origin": "user-stated",
            },
        )
        if sample.status == 201 and isinstance(body, dict) and body.get("id"):
            m.written.append(str(body["id"]))
        return sample

    def recall(self, op: str = "recall", **extra: Any) -> Sample:
        return self.call(
            op,
            "POST",
            "/api/v1/recall",
            {
                "userId": self.member.public_id,
                "scope": {"kind": "profile"},
                "query": self.words(3),
                "surface": "assistant",
                "context": "general",
                "destinationTier": "local",
                **extra,
            },
        )[0]

    def consent(self) -> Sample:
        m = self.member
        status = "revoked" if m.sensitive_granted else "granted"
        sample, _ = self.call(
            "consent",
            "POST",
            "/api/v1/consents",
            {
                "userId": m.public_id,
                "type": "category:medical",
                "status": status,
                "legalBasis": "explicit_consent",
                "captureMethod": "inline-prompt",
            },
        )
        if sample.status in (200, 201):
            m.sensitive_granted = not m.sensitive_granted
        return sample

    def forget(self) -> Sample:
        m = self.member
        live = [i for i in m.written if i not in m.forgotten]
        if not live:
            return self.write()
        entry = self.rng.choice(live)
        sample, _ = self.call(
            "forget", "POST", f"/api/v1/memories/{entry}/forget", {"userId": m.public_id}
        )
        if sample.status == 200:
            m.forgotten.add(entry)
        return sample

    def continuity(self) -> Sample:
        m = self.member
        return self.call(
            "continuity",
            "POST",
            "/api/v1/continuation-tokens",
            {
                "userId": m.public_id,
                "scopeKey": f"session:{m.public_id}:load",
                "surfaceContext": {"surface": "tara", "sessionId": "load", "itemId": "book-1"},
                "anchorRef": {
                    "surface": "tara",
                    "kind": "segment",
                    "ref": f"book-1/ch-1/seg-{self.rng.randrange(1000)}",
                    "offsetMs": self.rng.randrange(600_000),
                },
                "posture": "listening",
                "deviceId": f"device-{self.rng.randrange(3)}",
                "clientTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )[0]

    def data_rights(self) -> Sample:
        return self.call(
            "data-rights",
            "POST",
            "/api/v1/data-rights",
            {
                "kind": "export",
                "payload": {"includeConsents": True},
                "userId": self.member.public_id,
            },
        )[0]

    def run(self, op: str) -> Sample:
        if op == "recall":
            return self.recall()
        if op == "write":
            return self.write()
        if op == "consent":
            return self.consent()
        if op == "forget":
            return self.forget()
        if op == "continuity":
            return self.continuity()
        return self.data_rights()

    def read_back(self, entry: str) -> int | None:
        sample, _ = self.call(
            "read", "GET", f"/api/v1/memories/{entry}?userId={self.member.public_id}"
        )
        return sample.status


# --------------------------------------------------------------------------------------
# The run


def step(
    base: str, token: str, members: list[Member], clients: int, seconds: float, timeout: float
) -> tuple[list[Sample], float]:
    samples: list[Sample] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def work(n: int) -> None:
        client = Client(base, token, members[n], timeout, seed=clients * 1000 + n)
        mine: list[Sample] = []
        done = 0
        while time.monotonic() < stop_at:
            mine.append(client.run(pick(MIX, client.rng.random())))
            # After the first operation and every tenth since: a floor for every client,
            # even one that manages only a few operations in the step.
            if done % FLOOR_EVERY == 0:
                mine.append(client.recall("floor", limit=999))
            done += 1
        client.session.close()
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return samples, time.perf_counter() - started


def seed(base: str, token: str, members: list[Member], per_member: int, timeout: float) -> int:
    errors = 0
    lock = threading.Lock()
    queue = list(members)

    def work() -> None:
        nonlocal errors
        while True:
            with lock:
                if not queue:
                    return
                member = queue.pop()
            client = Client(base, token, member, timeout, seed=hash(member.public_id))
            for _ in range(per_member):
                if is_error(client.write("seed")):
                    with lock:
                        errors += 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def drain(redis_url: str, timeout: float) -> bool:
    """Wait until the worker's queue is empty (the jobs the load queued have been taken)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.llen("celery") == 0:
            time.sleep(2)  # a taken job finishing
            return True
        time.sleep(0.5)
    return False


def check_nothing_lost(base: str, token: str, members: list[Member], timeout: float) -> dict:
    status_of: dict[str, int | None] = {}
    lock = threading.Lock()
    queue = list(members)

    def work() -> None:
        while True:
            with lock:
                if not queue:
                    return
                member = queue.pop()
            client = Client(base, token, member, timeout, seed=0)
            for entry in member.written:
                status = client.read_back(entry)
                with lock:
                    status_of[entry] = status

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = [i for m in members for i in m.written]
    forgotten = [i for m in members for i in m.forgotten]
    missing = lost(written, forgotten, status_of)
    return {
        "acknowledged_writes": len(written),
        "acknowledged_forgets": len(forgotten),
        **{k: len(v) for k, v in missing.items()},
        "examples": {k: v[:5] for k, v in missing.items() if v},
    }


def jobs_run(url: str) -> dict[str, int]:
    """The jobs the worker ran during the load, by job and outcome (`governance.JobRun`)."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT job, status, count(*) FROM governance_jobrun GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    return {f"{job}:{status}": int(n) for job, status, n in rows}


def celery_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(PY),
            "-m",
            "celery",
            "-A",
            "iris_site",
            "worker",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def table(steps: list[dict[str, Any]]) -> str:
    lines = [
        f"{'clients':>7} {'op':<12} {'n':>6} {'/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'err':>4}"
    ]
    for record in steps:
        for op, f in record["ops"].items():
            lines.append(
                f"{record['clients']:>7} {op:<12} {f['count']:>6} {f['per_second']:>7} "
                f"{f['p50_ms']!s:>7} {f['p95_ms']!s:>7} {f['p99_ms']!s:>7} {f['errors']:>4}"
            )
        lines.append(
            f"{record['clients']:>7} {'= mix':<12} {record['requests']:>6} "
            f"{record['per_second']:>7}   error rate {record['error_rate']}, floor p95 "
            f"{record['floor_p95_ms']} ms, load {record['load_before']} -> {record['load_after']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default="postgres://root@127.0.0.1:5432/iris_bench_load")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    )
    parser.add_argument("--clients", default="1,8,32,64")
    parser.add_argument("--seconds", type=float, default=20.0, help="per step")
    parser.add_argument("--seed", type=int, default=10, help="memories written per member first")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument("--keep-database", action="store_true")
    args = parser.parse_args()
    steps = [int(c) for c in args.clients.split(",")]
    var_dir = Path(os.environ.get("IRIS_VAR_DIR") or ROOT / "var" / "bench-load")
    var_dir.mkdir(parents=True, exist_ok=True)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    env = production_env(args.database_url, var_dir, REDIS_URL=args.redis_url)
    env.pop("IRIS_EAGER_TASKS", None)
    print(f"load: steps {steps} clients, {args.seconds:g}s each, load {load()}", flush=True)
    recreate_database(args.database_url)
    worker: subprocess.Popen[bytes] | None = None
    ok = False
    try:
        manage = [str(PY), "manage.py"]
        subprocess.run(
            [*manage, "migrate", "--skip-checks", "-v", "0"], cwd=ROOT, env=env, check=True
        )
        setup = subprocess.run(
            [str(PY), "-c", SETUP, str(max(steps))],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        seeded = json.loads(setup.stdout.strip().splitlines()[-1])
        token = seeded["token"]
        members = [Member(public_id=m) for m in seeded["members"]]
        worker = celery_worker(env, var_dir / "worker.log")
        with gunicorn(env, var_dir / "server.log", args.start_timeout) as base:
            seed_errors = seed(base, token, members, args.seed, args.timeout)
            print(
                f"seeded {args.seed} memories for each of {len(members)} members "
                f"({seed_errors} errors)",
                flush=True,
            )
            records: list[dict[str, Any]] = []
            for clients in steps:
                before = load()
                samples, seconds = step(base, token, members, clients, args.seconds, args.timeout)
                summary = summarise(samples, seconds)
                floor = [s.seconds for s in samples if s.op == "floor" and s.status is not None]
                record = {
                    "bench": "load",
                    "clients": clients,
                    "seconds": round(seconds, 1),
                    **summary,
                    "floor_p95_ms": ms(percentile(floor, 95)),
                    "load_before": before,
                    "load_after": load(),
                }
                records.append(record)
                print(json.dumps(record), flush=True)
            print(table(records), flush=True)
            drained = drain(args.redis_url, timeout=120)
            nothing_lost = check_nothing_lost(base, token, members, args.timeout)
        audit = subprocess.run(
            [*manage, "verify_audit"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        lost_ok = nothing_lost["writes_missing"] == 0 and nothing_lost["forgets_present"] == 0
        print(
            f"nothing lost: {'yes' if lost_ok else 'NO'}: "
            f"{nothing_lost['acknowledged_writes']} acknowledged writes, "
            f"{nothing_lost['writes_missing']} not readable; "
            f"{nothing_lost['acknowledged_forgets']} acknowledged forgets, "
            f"{nothing_lost['forgets_present']} still present"
            + (f"; {nothing_lost['examples']}" if nothing_lost["examples"] else ""),
            flush=True,
        )
        ran = jobs_run(args.database_url)
        print(f"queue drained: {'yes' if drained else 'NO (120 s)'}; jobs run: {ran}", flush=True)
        print(
            f"verify_audit: {'passed' if audit.returncode == 0 else 'FAILED'}: "
            f"{(audit.stdout + audit.stderr).strip()}",
            flush=True,
        )
        ok = lost_ok and audit.returncode == 0
        print(
            json.dumps(
                {
                    "bench": "load-end",
                    **{k: v for k, v in nothing_lost.items() if k != "examples"},
                    "queue_drained": drained,
                    "jobs_run": ran,
                    "verify_audit": audit.returncode == 0,
                    "load": load(),
                }
            ),
            flush=True,
        )
    finally:
        if worker is not None:
            stop(worker)
        if not args.keep_database:
            drop_database(args.database_url)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
