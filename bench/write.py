"""Memory write throughput through the HTTP API, 8 concurrent clients, PostgreSQL.

    .venv/bin/python bench/write.py                 # 2000 writes, 8 clients
    .venv/bin/python bench/write.py --writes 4000 --clients 8 --workers 4
    .venv/bin/python bench/write.py --profile       # also cProfile one write in-process

What it does, end to end and for real:
1. (re)creates the PostgreSQL database `iris_bench` (--db) and migrates it;
2. seeds a tenant, one member per client (storage consent granted) and a surface client,
   all through the services (audit included);
3. starts gunicorn from .venv on a free port (DEBUG off, production settings), waits;
4. 8 threads each POST /api/v1/memories for their own member with a distinct body, through
   a keep-alive HTTP connection, and time each request;
5. stops the server, checks the rows landed and that the audit chain verifies;
6. prints writes/s, p50/p95 latency, and one JSON line.

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import (  # noqa: E402
    cpu_seconds,
    free_port,
    postmaster_pid,
    production_env,
    recreate_database,
    tree_cpu_seconds,
)

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"


def bench_env(db_url: str, var_dir: Path) -> dict[str, str]:
    # No Redis here: what a write queues runs in the process (production settings refuse
    # to start without one or the other).
    env = production_env(db_url, var_dir, IRIS_EAGER_TASKS="1")
    env.pop("REDIS_URL", None)
    return env


def analyze(db_url: str) -> None:
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE")


SEED = """
import json, sys
import django
django.setup()
from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.services import consent_record
from governance.audit import Actor
from governance.principal import Principal
from governance.services import surface_client_create, tenant_create, user_create
actor = Actor("system", "bench")
tenant = tenant_create(actor=actor, slug="bench", name="Bench")
members = []
for i in range(int(sys.argv[1])):
    user = user_create(actor=actor, tenant=tenant, username=f"bench{i}", password="pw-bench").user
    principal = Principal(kind="member", id=user.public_id, tenant_id=tenant.id)
    for ct in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE):
        consent_record(principal=principal, member=user, consent_type=ct, status="granted",
                       legal_basis=LegalBasis.CONSENT, capture_method=CaptureMethod.SETTINGS_TOGGLE)
    members.append(str(user.public_id))
token = surface_client_create(actor=actor, tenant=tenant, surface="assistant").token
print(json.dumps({"token": token, "members": members}))
"""

VERIFY = """
import json, django
django.setup()
from governance.audit import verify_chain
from memory.models import MemoryEntry
report = verify_chain()
print(json.dumps({"ok": report.ok, "events": report.events, "rows": MemoryEntry.objects.count()}))
"""

PROFILE = """
import cProfile, json, pstats, sys, io, django
django.setup()
from rest_framework.test import APIClient
seed = json.loads(sys.argv[1])
client = APIClient()
client.credentials(HTTP_AUTHORIZATION="Bearer " + seed["token"])
def one(i):
    user = seed["members"][0]
    body = {"userId": user, "scope": {"kind": "profile", "userId": user}, "category": "fact",
            "body": f"Profiled fact {i} about the weather", "origin": "user-stated"}
    return client.post("/api/v1/memories", body, format="json", HTTP_HOST="127.0.0.1")
for i in range(20):
    one(i)  # warm up
profiler = cProfile.Profile()
profiler.enable()
for i in range(20, 220):
    assert one(i).status_code == 201
profiler.disable()
out = io.StringIO()
stats = pstats.Stats(profiler, stream=out)
stats.sort_stats("cumulative").print_stats(60)
stats.sort_stats("tottime").print_stats(40)
print(out.getvalue())
"""


def run_python(code: str, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(PY), "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"helper failed ({done.returncode})")
    return done.stdout.strip().splitlines()[-1] if code is not PROFILE else done.stdout


def wait_for(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited during start-up")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/schema/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("server did not start")


def post(port: int, head: bytes, body: bytes) -> tuple[int, bytes]:
    """One POST on a fresh connection, the answer read to the server's close.

    The load runs on the same two cores as the server, so it is kept cheap: http.client
    parsed each answer's headers with the email parser, a third of the client's CPU. The
    sync workers close every connection after answering anyway (`Connection: close`).
    """
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + str(len(body)).encode() + b"\r\n\r\n" + body)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    answer = b"".join(chunks)
    return int(answer[9:12]), answer.partition(b"\r\n\r\n")[2]


def client_loop(
    port: int,
    token: str,
    member: str,
    n: int,
    offset: int,
    latencies: list[float],
    errors: list[str],
) -> None:
    head = (
        "POST /api/v1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: "
    ).encode()
    for i in range(n):
        body = json.dumps(
            {
                "userId": member,
                "scope": {"kind": "profile", "userId": member},
                "category": "fact",
                "body": f"Benchmark fact number {offset + i} about item {i}",
                "subject": f"bench fact {offset + i}",
                "origin": "user-stated",
            }
        ).encode()
        start = time.perf_counter()
        status, _ = post(port, head, body)
        latencies.append(time.perf_counter() - start)
        if status != 201:
            errors.append(f"{status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="postgres://root@127.0.0.1:5432/iris_bench")
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--ranker",
        choices=("hybrid", "lexical", "jaccard"),
        default=None,
        help="recall ranker the server runs with (IRIS_RECALL_SEMANTIC; default: the "
        "settings' default, hybrid, which embeds every revision on write)",
    )
    args = parser.parse_args()

    var_dir = ROOT / "var" / "bench"
    var_dir.mkdir(parents=True, exist_ok=True)
    env = bench_env(args.db, var_dir)
    if args.ranker:
        env["IRIS_RECALL_SEMANTIC"] = args.ranker
    recreate_database(args.db)
    # Without the system checks: the doctor checks (the recall change log's triggers) look
    # for what this very migration creates.
    subprocess.run(
        [str(PY), "manage.py", "migrate", "-v", "0", "--skip-checks"], cwd=ROOT, env=env, check=True
    )
    seed = json.loads(run_python(SEED, env, str(args.clients)))

    port = free_port()
    server_cmd = [
        str(GUNICORN),
        "iris_site.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(args.workers),
        "--threads",
        str(args.threads),
        "--preload",  # as deployed (README): the app, and any model, loaded once
        "--log-level",
        "warning",
    ]
    if not GUNICORN.exists():
        server_cmd = [str(PY), "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    server = subprocess.Popen(server_cmd, cwd=ROOT, env=env)
    try:
        wait_for(port, server)
        per_client = args.writes // args.clients
        # A short warm-up per client (imports, connections), not counted.
        warm: list[float] = []
        warm_errors: list[str] = []
        for c, member in enumerate(seed["members"]):
            client_loop(port, seed["token"], member, 3, 10_000_000 + c * 10, warm, warm_errors)
        # Statistics, as autovacuum would keep them in production (this machine's server
        # runs with autovacuum off): with none, the planner took the member's scope index
        # for the conflict lookup and filtered the member's every row (0.5 ms at 400 rows).
        analyze(args.db)
        latencies: list[float] = []
        errors: list[str] = []
        threads = [
            threading.Thread(
                target=client_loop,
                args=(port, seed["token"], member, per_client, c * per_client, latencies, errors),
            )
            for c, member in enumerate(seed["members"])
        ]
        # CPU actually spent per write, by the app and by PostgreSQL: a figure that, unlike
        # wall-clock throughput, a busy neighbour on this shared machine barely moves.
        postmaster = postmaster_pid(args.db)
        app_cpu, db_cpu = tree_cpu_seconds(server.pid), tree_cpu_seconds(postmaster)
        client_cpu = cpu_seconds([os.getpid()])
        load = os.getloadavg()[0]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        app_cpu = tree_cpu_seconds(server.pid) - app_cpu
        db_cpu = tree_cpu_seconds(postmaster) - db_cpu
        client_cpu = cpu_seconds([os.getpid()]) - client_cpu
    finally:
        server.terminate()
        server.wait(timeout=30)

    verify = json.loads(run_python(VERIFY, env))
    total = len(latencies)
    ordered = sorted(latencies)
    result = {
        "bench": "memory-write",
        "database": "postgresql",
        "ranker": env.get("IRIS_RECALL_SEMANTIC") or "hybrid",
        "server": Path(server_cmd[0]).name + f" workers={args.workers} threads={args.threads}",
        "clients": args.clients,
        "writes": total,
        "errors": len(errors) + len(warm_errors),
        "seconds": round(elapsed, 3),
        "writes_per_second": round(total / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (total - 1))] * 1000, 2),
        "app_cpu_ms_per_write": round(1000 * app_cpu / max(total, 1), 2),
        "db_cpu_ms_per_write": round(1000 * db_cpu / max(total, 1), 2),
        "client_cpu_ms_per_write": round(1000 * client_cpu / max(total, 1), 2),
        "load_average_1m_before": round(load, 2),
        "audit_chain_ok": verify["ok"],
        "audit_events": verify["events"],
        "memory_rows": verify["rows"],
    }
    print(
        f"{result['writes_per_second']} writes/s over {total} writes with {args.clients} "
        f"clients; p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms; errors "
        f"{result['errors']}; audit chain {'verifies' if verify['ok'] else 'BROKEN'}; CPU per "
        f"write: app {result['app_cpu_ms_per_write']} ms, PostgreSQL "
        f"{result['db_cpu_ms_per_write']} ms, load client "
        f"{result['client_cpu_ms_per_write']} ms; load average before "
        f"{result['load_average_1m_before']}"
    )
    print(json.dumps(result))
    if args.profile:
        print(run_python(PROFILE, env, json.dumps(seed)))


if __name__ == "__main__":
    main()
