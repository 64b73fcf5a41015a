"""Recall latency at scale: the pure pipeline, the fast path in-process, and the HTTP endpoint.

Seeds a PostgreSQL database of its own (`iris_bench_recall`, created here) with `--rows`
memories (default 1,000,000) over many members through COPY, bypassing the write path (the
table and its shape are the real ones). Three members hold 1k, 10k and 50k active entries;
the rest are spread over filler members. Then, for each of the three, prints JSON lines:

- `pure`: `recall.resolve` over the member's candidates already in memory (no database);
- `fast`: `recall_db.fast_resolve` in-process (the database work plus the pipeline);
- `snapshot`: `recall_snapshot.resolve_cached` in-process, what the endpoint runs (the
  worker's snapshot of the member, caught up, ranked, the best rows read back), with what
  building the snapshot cost on the first recall;
- `http`: `POST /api/v1/recall` against a real gunicorn (sequential, then 8 clients).

Each line has p50/p95/p99 in milliseconds and peak RSS. Run:

    .venv/bin/python bench/recall.py [--rows 1000000] [--ranker lexical] [--requests 300]

A second run reuses the seeded database when it holds the requested number of rows.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG = "postgres://root@127.0.0.1:5432"
DB = "iris_bench_recall"
TARGETS = (1_000, 10_000, 50_000)
FILLER_SIZE = 10_000
# Bumped when the seeded shape changes, so a stale database is seeded again. 2: the bench
# rows' adapter scope is one the assistant surface consumes (v1's was not, so every HTTP
# recall it measured returned nothing). 3: rows carry their stored recall terms. 4: and
# their Jaccard tokens (migration 0006). 5: the measured members' usage columns are kept
# aside (`USAGE_TABLE`) and put back before each run. 6: pages keep room for HOT usage
# bumps (memory migration 0007 sets the fillfactor before the COPY fills them).
SEED_VERSION = 6
# Every recall bumps the reference count and time of what it returns, and the fast path's
# stopping bound falls with recency: after a few thousand recalls every row of the 1k
# member had been referenced within the hour and a hybrid recall took 65 ms instead of 25.
# Each run starts from the seeded usage, so runs measure the same state.
USAGE_TABLE = "bench_seeded_usage"

FOODS = "coffee tea espresso matcha pasta sushi ramen tacos curry pizza salad bread cheese".split()
PLACES = "berlin paris lisbon tokyo kyoto oslo madrid vienna prague boston denver austin".split()
PEOPLE = "sister brother mother father friend colleague neighbour partner cousin boss".split()
THINGS = "running yoga climbing chess piano guitar painting gardening cycling swimming".split()
TEMPLATES = [
    "I like {food} in {place} with my {person}",
    "My {person} and I go {thing} every weekend near {place}",
    "I am learning {thing} and drink {food} afterwards",
    "Trip to {place} planned; remember the {food} place my {person} loved",
    "Prefers {food} over {food2}; practises {thing} on Mondays",
]


def _env() -> dict[str, str]:
    from cryptography.fernet import Fernet

    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"{PG}/{DB}",
        DEBUG="0",
        SECRET_KEY=env.get("SECRET_KEY") or "bench-" + "x" * 50,
        IRIS_MASTER_KEY=env.get("IRIS_MASTER_KEY") or Fernet.generate_key().decode(),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        IRIS_API_RATE="100000000/min",
        SECURE_SSL_REDIRECT="0",
        DJANGO_SETTINGS_MODULE="iris_site.settings",
    )
    return env


def body_for(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(
        food=rng.choice(FOODS),
        food2=rng.choice(FOODS),
        place=rng.choice(PLACES),
        person=rng.choice(PEOPLE),
        thing=rng.choice(THINGS),
    )


def query_for(rng: random.Random) -> str:
    return rng.choice(
        [
            f"what {rng.choice(FOODS)} do I like",
            f"plans for {rng.choice(PLACES)}",
            f"my {rng.choice(PEOPLE)} and {rng.choice(THINGS)}",
            f"{rng.choice(THINGS)} with {rng.choice(FOODS)}",
        ]
    )


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def pct(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

    return {
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
        "mean": round(statistics.mean(values), 2),
    }


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# --------------------------------------------------------------------------------------
# Seeding


def ensure_database(env: dict[str, str]) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone():
            conn.execute(f'CREATE DATABASE "{DB}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def seed(rows: int) -> dict[str, object]:
    """Members and rows; returns the bench members' ids and a surface token."""
    import psycopg
    from django.conf import settings
    from django.db import connection

    from consent.enums import AdapterScope
    from governance.audit import Actor
    from governance.models import Tenant, User
    from governance.services import surface_client_create, tenant_create, user_create
    from memory.models import recall_term_keys

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    actor = Actor("system", "bench")
    state_file = ROOT / "var" / "bench-recall-state.json"
    count = connection.cursor()
    count.execute("SELECT count(*) FROM memory_memoryentry")
    have = count.fetchone()[0]
    if have == rows and state_file.exists():
        state = json.loads(state_file.read_text())
        if (
            state.get("seed_version") == SEED_VERSION
            and Tenant.objects.filter(id=state["tenant"]).exists()
        ):
            state["token"] = surface_client_create(
                actor=actor,
                tenant=Tenant.objects.get(id=state["tenant"]),
                surface="assistant",
                destination_tier="local",
            ).token
            return state
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("TRUNCATE memory_memoryentry CASCADE")
    slug = "bench-" + uuid.uuid4().hex[:8]
    tenant = tenant_create(actor=actor, slug=slug, name="Bench")
    sizes = list(TARGETS)
    left = rows - sum(sizes)
    while left > 0:
        sizes.append(min(FILLER_SIZE, left))
        left -= FILLER_SIZE
    members: list[User] = []
    for i, _ in enumerate(sizes):
        members.append(user_create(actor=actor, tenant=tenant, username=f"{slug}-m{i}").user)
    connection.close()

    rng = random.Random(7)
    now = datetime.now(UTC)
    cols = (
        "revision_id entry_id revision is_current tenant_id member_id scope_kind scope_key "
        "scope_identifiers adapter_scope category body body_fingerprint subject origin "
        "lifecycle suppression_notes relationship_note sensitive_interaction consents "
        "provenance_chain reference_count last_referenced_at created_at updated_at recall_terms"
    ).split()
    origins = ["user-stated", "user-confirmed", "summarized-from-session", "model-inferred"]
    dsn = f"{PG}/{DB}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        defs = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_memoryentry' "
            "AND indexname NOT IN (SELECT conname FROM pg_constraint)"
        ).fetchall()
        for name, _ in defs:
            conn.execute(f'DROP INDEX "{name}"')
        with conn.cursor() as cur:
            for member, size in zip(members, sizes, strict=True):
                uid = str(member.public_id)
                key = f"profile:{uid}"
                ids = json.dumps({"userId": uid})
                buf = io.StringIO()
                for _ in range(size):
                    body = body_for(rng)
                    updated = now - timedelta(seconds=rng.randrange(0, 400 * 86400))
                    referenced = (
                        updated + timedelta(seconds=rng.randrange(0, 86400))
                        if rng.random() < 0.3
                        else None
                    )
                    row = [
                        str(uuid.uuid4()),
                        str(uuid.uuid4()),
                        "1",
                        "t",
                        str(tenant.id),
                        str(member.pk),
                        "profile",
                        key,
                        ids,
                        # An adapter scope the assistant surface consumes: with any other
                        # value the endpoint would (rightly) recall nothing.
                        AdapterScope.ASSISTANT_PROFILE.value,
                        "preference",
                        body,
                        "0" * 64,
                        # Most memories carry no conflict subject; the rest a specific one.
                        ""
                        if rng.random() < 0.8
                        else f"{rng.choice(FOODS)}-{rng.choice(PLACES)}-{rng.randrange(50)}",
                        rng.choice(origins),
                        "active" if rng.random() < 0.95 else "paused",
                        "",
                        "",
                        "f",
                        "[]",
                        "[]",
                        str(rng.choice([0, 0, 0, 1, 2, 5, 12])),
                        referenced.isoformat() if referenced else "\\N",
                        updated.isoformat(),
                        updated.isoformat(),
                        recall_term_keys(member.pk, body),
                    ]
                    buf.write("\t".join(row) + "\n")
                with cur.copy(f"COPY memory_memoryentry ({', '.join(cols)}) FROM STDIN") as copy:
                    copy.write(buf.getvalue())
        copied = time.perf_counter()
        # Keep each member's rows together on disk (issue 6: clustering by member).
        conn.execute("SET maintenance_work_mem = '512MB'")
        for _, definition in defs:
            conn.execute(definition)
        conn.execute("CLUSTER memory_memoryentry USING memory_entry_lookup")
        # The COPY's rows went through the change log's trigger (memory migration 0008);
        # no snapshot has seen them, so a snapshot builds from the table itself.
        conn.execute("TRUNCATE memory_recallchange")
        conn.execute(f"DROP TABLE IF EXISTS {USAGE_TABLE}")
        conn.execute(
            f"CREATE TABLE {USAGE_TABLE} AS SELECT revision_id, reference_count, "  # noqa: S608
            "last_referenced_at FROM memory_memoryentry WHERE member_id = ANY(%s)",
            [[m.pk for m in members[: len(TARGETS)]]],
        )
        # VACUUM too: it sets the visibility map, so counting a member's gated rows can
        # read the index only (autovacuum does the same on a live table).
        conn.execute("VACUUM ANALYZE memory_memoryentry")
    state = {
        "seed_version": SEED_VERSION,
        "tenant": str(tenant.id),
        "members": {str(s): str(m.public_id) for m, s in zip(members, sizes, strict=False)},
        "seed_seconds": round(time.perf_counter() - started, 1),
        "copy_seconds": round(copied - started, 1),
    }
    state_file.parent.mkdir(exist_ok=True)
    state_file.write_text(json.dumps(state))
    state["token"] = surface_client_create(
        actor=actor, tenant=tenant, surface="assistant", destination_tier="local"
    ).token
    return state


def vacuum() -> float:
    """Put the measured members' usage columns back as seeded, then vacuum."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_memoryentry AS m SET reference_count = u.reference_count, "  # noqa: S608
            f"last_referenced_at = u.last_referenced_at FROM {USAGE_TABLE} AS u "
            "WHERE m.revision_id = u.revision_id AND (m.reference_count, m.last_referenced_at) "
            "IS DISTINCT FROM (u.reference_count, u.last_referenced_at)"
        )
        cursor.execute("VACUUM ANALYZE memory_memoryentry")
    return round(time.perf_counter() - started, 1)


def ensure_vectors(members: list[str]) -> dict[str, float]:
    """Store the embedding of every current revision of these members that has none, as the
    write path does with the hybrid ranker on (one text at a time, unpadded). Only the
    measured members get vectors: encoding all 1M rows would take hours, and no recall
    reads another member's rows. Returns seconds spent and texts encoded."""
    from django.db import connection

    from memory.models import MemoryEntry
    from memory.recall.models import MemoryEmbedding
    from memory.recall.ranking import embedding

    encoder = embedding.default_encoder()
    started = time.perf_counter()
    encoded = 0
    by_body: dict[str, bytes] = {}  # the bench's templates repeat bodies
    for uid in members:
        rows = list(
            MemoryEntry.objects.filter(member__public_id=uid, is_current=True)
            .exclude(revision_id__in=MemoryEmbedding.objects.values("revision_id"))
            .values_list("revision_id", "tenant_id", "body")
        )
        batch = []
        for revision_id, tenant_id, body in rows:
            if body not in by_body:
                by_body[body] = embedding.to_bytes(encoder.encode_one(body, cache=False))
                encoded += 1
            batch.append(
                MemoryEmbedding(
                    revision_id=revision_id,
                    tenant_id=tenant_id,
                    model=embedding.MODEL_NAME,
                    vector=by_body[body],
                    created_at=datetime.now(UTC),
                )
            )
        MemoryEmbedding.objects.bulk_create(batch, batch_size=2000, ignore_conflicts=True)
    connection.close()
    return {"vector_seconds": round(time.perf_counter() - started, 1), "encoded": encoded}


# --------------------------------------------------------------------------------------
# Measurements


def request_for(member_uid: str, query: str) -> object:
    from governance.models import User
    from memory.recall import pipeline as recall

    member = User.objects.get(public_id=member_uid)
    return member, recall.RecallRequest(
        tenant_id=str(member.tenant_id),
        user_id=member_uid,
        scope_kind="profile",
        scope_key=f"profile:{member_uid}",
        query=query,
        surface="assistant",
        context="general",
        crisis_frame=False,
        safety_critical_context=False,
        consented_categories=frozenset(),
        multi_actor_sensitive_consent=False,
        dsar_fulfillment=False,
        limit=None,
        now=datetime.now(UTC),
    )


def stored_vectors(member: object) -> dict[str, bytes]:
    """Each current revision's stored embedding, by entry id."""
    from memory.models import MemoryEntry
    from memory.recall.models import MemoryEmbedding

    entry_of = dict(
        MemoryEntry.objects.filter(member=member, is_current=True).values_list(
            "revision_id", "entry_id"
        )
    )
    return {
        str(entry_of[revision]): bytes(vector)
        for revision, vector in MemoryEmbedding.objects.filter(
            revision_id__in=list(entry_of)
        ).values_list("revision_id", "vector")
    }


def bench_in_process(size: int, member_uid: str, ranker: str, n: int) -> None:
    from memory.recall import db as recall_db
    from memory.recall import pipeline as recall
    from memory.recall import snapshot as recall_snapshot
    from memory.recall.ranking import semantic
    from memory.selectors import recall_candidates

    rng = random.Random(size)
    prepare = semantic.semantic_for(ranker)
    member, req = request_for(member_uid, "warm up")
    candidates = recall_candidates(
        tenant_id=member.tenant_id, member=member, scope_keys=[req.scope_key]
    )
    # The stored vectors, as the fast path reads them: without them the hybrid ranker would
    # embed every candidate on every query (minutes per query at 10k).
    extra = {"vectors": stored_vectors(member)} if ranker == "hybrid" else {}
    recall_snapshot.clear()
    t = time.perf_counter()
    recall_snapshot.resolve_cached(req, member=member, ranker_name=ranker, prepare=prepare)
    build_ms = (time.perf_counter() - t) * 1000
    pure, fast, examined, snap, snap_examined = [], [], [], [], []
    for _ in range(n):
        _, req = request_for(member_uid, query_for(rng))
        t = time.perf_counter()
        fn = (
            prepare(req.query, candidates, **extra)
            if ranker != "jaccard"
            else recall.jaccard_semantic
        )
        recall.resolve(candidates, req, semantic=fn)
        pure.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        out = recall_db.fast_resolve(req, member=member, ranker_name=ranker, prepare=prepare)
        fast.append((time.perf_counter() - t) * 1000)
        examined.append(out.examined)
        t = time.perf_counter()
        out = recall_snapshot.resolve_cached(
            req, member=member, ranker_name=ranker, prepare=prepare
        )
        snap.append((time.perf_counter() - t) * 1000)
        snap_examined.append(out.examined)
    emit(
        bench="recall",
        kind="pure",
        ranker=ranker,
        entries=size,
        candidates=len(candidates),
        n=n,
        **pct(pure),
        peak_rss_mb=peak_rss_mb(),
    )
    emit(
        bench="recall",
        kind="fast",
        ranker=ranker,
        entries=size,
        n=n,
        **pct(fast),
        examined_mean=round(statistics.mean(examined), 1),
        peak_rss_mb=peak_rss_mb(),
    )
    emit(
        bench="recall",
        kind="snapshot",
        ranker=ranker,
        entries=size,
        n=n,
        **pct(snap),
        build_ms=round(build_ms, 1),
        examined_mean=round(statistics.mean(snap_examined), 1),
        peak_rss_mb=peak_rss_mb(),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    env: dict[str, str], ranker: str, workers: int = 4, threads: int = 1
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    gunicorn = ROOT / ".venv" / "bin" / "gunicorn"
    env = {**env, "IRIS_RECALL_SEMANTIC": ranker}
    proc = subprocess.Popen(
        [
            str(gunicorn),
            "iris_site.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(workers),
            "--threads",
            str(threads),
            "--preload",  # as deployed (README): the app, and any model, loaded once
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("gunicorn did not start")


def server_peak_mb(proc: subprocess.Popen[bytes]) -> float:
    pids = [proc.pid]
    try:
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        pids += [int(p) for p in out.stdout.split()]
    except OSError:
        pass
    peak = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return round(peak / 1024, 1)


def http_clients(port: int, token: str, member_uid: str, n: int, clients: int) -> list[float]:
    times: list[float] = []
    lock = threading.Lock()

    def work(seed: int, count: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for _ in range(count):
            body = json.dumps(
                {
                    "userId": member_uid,
                    "scope": {"kind": "profile"},
                    "query": query_for(rng),
                    "surface": "assistant",
                    "context": "general",
                    "destinationTier": "local",
                }
            )
            t = time.perf_counter()
            conn.request(
                "POST",
                "/api/v1/recall",
                body=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            response = conn.getresponse()
            payload = response.read()
            elapsed = (time.perf_counter() - t) * 1000
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
            with lock:
                times.append(elapsed)
        conn.close()

    threads = [threading.Thread(target=work, args=(i, n // clients)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--ranker", default="lexical", choices=["jaccard", "lexical", "hybrid"])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--sizes", default=",".join(map(str, TARGETS)))
    parser.add_argument("--skip-pure", action="store_true")
    # The README's deployment: sync workers, one per core and a spare each.
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker")
    args = parser.parse_args()
    env = _env()
    os.environ.update(env)
    ensure_database(env)
    import django

    django.setup()
    state = seed(args.rows)
    emit(
        bench="recall",
        kind="seed",
        rows=args.rows,
        seed_seconds=state.get("seed_seconds"),
        copy_seconds=state.get("copy_seconds"),
    )
    sizes = [int(s) for s in args.sizes.split(",")]
    # Each recall bumps the rows it returns, leaving dead row versions behind. In
    # production autovacuum clears them; this machine's server runs with autovacuum off,
    # so a reused bench database carries every earlier run's (the term index handed over
    # 3,243 versions for 190 live rows). Clear them, as autovacuum would have, after
    # putting the seeded usage back.
    emit(bench="recall", kind="vacuum", seconds=vacuum())
    if args.ranker == "hybrid":
        spent = ensure_vectors([state["members"][str(size)] for size in sizes])
        emit(bench="recall", kind="vectors", entries=sizes, **spent)
    if not args.skip_pure:
        for size in sizes:
            bench_in_process(
                size, state["members"][str(size)], args.ranker, min(args.requests, 100)
            )
    proc, port = start_server(env, args.ranker, args.workers, args.threads)
    try:
        for size in sizes:
            uid = state["members"][str(size)]
            # Warm every worker: each builds its own snapshot of the member on its first
            # recall of them (memory.recall.snapshot; `snapshot` above says what it costs).
            http_clients(port, state["token"], uid, 64, 8)
            seq = http_clients(port, state["token"], uid, args.requests, 1)
            emit(
                bench="recall",
                kind="http",
                ranker=args.ranker,
                entries=size,
                clients=1,
                n=len(seq),
                **pct(seq),
                server_peak_rss_mb=server_peak_mb(proc),
            )
            t = time.perf_counter()
            par = http_clients(port, state["token"], uid, args.requests, 8)
            wall = time.perf_counter() - t
            emit(
                bench="recall",
                kind="http",
                ranker=args.ranker,
                entries=size,
                clients=8,
                n=len(par),
                **pct(par),
                throughput_rps=round(len(par) / wall, 1),
                server_peak_rss_mb=server_peak_mb(proc),
            )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
