"""Live recall: what a new user measures against the production server, nothing reset.

    .venv/bin/python bench/recall_live.py                       # 1k and 10k, both modes
    .venv/bin/python bench/recall_live.py --ranker hybrid --sizes 1000
    .venv/bin/python bench/recall_live.py --quick               # a small smoke run

`recall.py` puts the seeded usage back before each run and `recall_quality.py` makes
recency and usage equal for every memory: both measure recall in conditions that flatter
it. This one runs it as deployed and as used, for each size and mode:

1. (re)creates the PostgreSQL database (`--database-url`, dropped again at exit) and
   migrates it; creates one tenant, one member (processing and storage consent granted,
   which is all the non-sensitive `preference` category needs) and a surface client;
2. starts the README's server, `gunicorn iris_site.wsgi --preload --workers 4` with
   DEBUG=0 and Redis (`--redis-url`), the ranker in `IRIS_RECALL_SEMANTIC`, and waits;
3. writes N memories of the labelled set (`recall_quality.build_memories`) through
   `POST /api/v1/memories`, 8 threads each with its own connection and its own `subject`
   values; write throughput and p50/p95;
4. asks a stream of distinct paraphrase questions (`recall_quality.build_queries`) one
   after another through `POST /api/v1/recall`, so each recall bumps the usage of what it
   returns, as live use does. `static` asks only; `conversation` writes one new memory
   before every fifth question. After every question the same client sends a recall that
   fails validation (`limit` over its maximum: 400), so the stack's floor (authentication,
   the member's lookup, the throttle, the error shape) is measured under the same load;
5. then writes `--bursts` bursts of `--burst-size` memories (8 threads) and times the first
   recall after each;
6. stops the server and starts it again on the same database, as a deploy does, and asks
   `--restart-questions` questions: the first recall each new worker serves is timed
   (`restart_first_*`), against the stream's floor;
7. stops the server and prints a table and one JSON line per (size, mode).

Questions are answered by memory id: each question's relevant memories are labelled by
index in the set, and the write API's answer gives each index its id. Memories written
during the run (conversation and bursts) come from the same generator, after the first N;
only questions none of them answers are asked, so the labels stay exact while the new
memories compete as near-duplicates (and with fresher timestamps).

Beside each live figure, a control: the same questions through the pure `resolve`
in-process over the same memories, recency, usage and origin equal and nothing bumped
(`recall_quality`'s recall pass; `--no-control` skips it). The gap between the two is
what live use costs. `last_less_first_quarter` is the stream's last quarter's hit@12 less
its first's; the control's own figure is what the questions' difficulty alone does, and
`drift_from_usage`, the difference, is what the usage bumps do.

Which worker answered: the app sends no such header, so gunicorn's access log (a server
flag, not app code) records each request's `X-Bench-Request` tag and the worker's pid. The
first recall each pid served in the stream is that worker's first recall: it builds the
worker's snapshot of the member (docs/decisions/recall.md). A worker that served none is
reported as missing.

A recall that times out (`--timeout`, per request), fails to connect or answers 5xx is an
error: it counts as a miss in hit@12 and nDCG@12 and is left out of the latency figures,
and the run goes on. `--trace PREFIX` also writes each stream's requests (seconds and
worker, in order) to a JSON file, to see where in the stream the slow ones fall. Not part
of `make test`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_quality as labelled  # noqa: E402  the labelled set, its questions and metrics
from serve import (  # noqa: E402
    WORKERS,
    cpu_seconds,
    drop_database,
    gunicorn,
    gunicorn_master,
    percentile,
    postmaster_pid,
    production_env,
    recreate_database,
    tree_cpu_seconds,
)

PY = ROOT / ".venv" / "bin" / "python"
WRITERS = 8
K = 12  # the assistant surface's recall budget
CONVERSATION_EVERY = 5
# The settings' name for BM25 is `lexical`; the flag uses the usual name.
RANKERS = {"jaccard": "jaccard", "bm25": "lexical", "hybrid": "hybrid"}
TAG_HEADER = "X-Bench-Request"
ACCESS_FORMAT = "%({x-bench-request}i)s %(p)s %(s)s"
QUERY_SEED = 20261202  # not recall_quality's: these questions are asked over HTTP, not tuned on

SETUP = """
import json
import django
django.setup()
from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.services import consent_record
from governance.audit import Actor
from governance.principal import Principal
from governance.services import surface_client_create, tenant_create, user_create
actor = Actor("system", "bench-live")
tenant = tenant_create(actor=actor, slug="live", name="Live bench")
user = user_create(actor=actor, tenant=tenant, username="live-member").user
principal = Principal(kind="member", id=user.public_id, tenant_id=tenant.id)
for consent_type in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE):
    consent_record(principal=principal, member=user, consent_type=consent_type,
                   status="granted", legal_basis=LegalBasis.CONSENT,
                   capture_method=CaptureMethod.SETTINGS_TOGGLE)
# An assistant whose model runs locally: its recalls may carry the member's own memories
# (a cloud client gets none of them, `egress-personal-to-cloud`). Requests name no tier.
token = surface_client_create(
    actor=actor, tenant=tenant, surface="assistant", destination_tier="local"
).token
print(json.dumps({"token": token, "member": str(user.public_id)}))
"""


# --------------------------------------------------------------------------------------
# Pure helpers


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)


def quality(
    answers: Sequence[Sequence[str] | None],
    relevant: Sequence[frozenset[str]],
    k: int = K,
) -> dict[str, float | None]:
    """hit@k and nDCG@k over questions answered by memory ids; an unanswered question (None:
    a timeout or an error), or one whose relevant memories were not written, is a miss."""
    if not answers:
        return {f"hit@{k}": None, f"ndcg@{k}": None}
    hits = ndcg = 0.0
    for ids, wanted in zip(answers, relevant, strict=True):
        if ids is None or not wanted:
            continue
        # metrics() ranks integers: give each returned id its place in `wanted`, or a
        # number no relevant memory has.
        index = {entry_id: i for i, entry_id in enumerate(sorted(wanted))}
        ranked = [index.get(entry_id, -1 - n) for n, entry_id in enumerate(ids[:k])]
        hit, _, gain = labelled.metrics(ranked, frozenset(index.values()), k)
        hits += hit
        ndcg += gain
    return {f"hit@{k}": round(hits / len(answers), 4), f"ndcg@{k}": round(ndcg / len(answers), 4)}


def missed(
    answers: Sequence[Sequence[str] | None], relevant: Sequence[frozenset[str]], k: int = K
) -> list[int]:
    """The places in the stream of the questions whose first k entries hold nothing
    relevant."""
    return [
        i
        for i, (ids, wanted) in enumerate(zip(answers, relevant, strict=True))
        if ids is None or wanted.isdisjoint(ids[:k])
    ]


def quarters(n: int) -> list[range]:
    """The stream's four quarters (the last takes the remainder)."""
    step = n // 4
    return [range(i * step, n if i == 3 else (i + 1) * step) for i in range(4)]


def first_per_worker(
    order: Sequence[str], pid_of: dict[str, str], latency_of: dict[str, float]
) -> dict[str, float]:
    """The latency of the first request, in stream order, that each worker pid answered."""
    out: dict[str, float] = {}
    for tag in order:
        pid = pid_of.get(tag)
        if pid is not None and pid not in out and tag in latency_of:
            out[pid] = latency_of[tag]
    return out


# --------------------------------------------------------------------------------------
# The set: memories, the questions asked, the memories written during the run


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    relevant: frozenset[int]  # memory indices


def plan(size: int, questions: int, extra: int) -> tuple[list[labelled.Memory], list[Question]]:
    """`size + extra` memories and `questions` distinct questions that none of the `extra`
    memories answers (those are written during the run)."""
    memories = labelled.build_memories(size + extra)
    wanted = questions
    ask = min(size, questions * 3)
    while True:
        try:
            pool = labelled.build_queries(memories, ask, QUERY_SEED + size)
            break
        except RuntimeError:
            # Fewer questions can single their target out than asked for: ask for fewer.
            ask = ask * 3 // 4
            if ask < wanted:
                raise
    seen: set[str] = set()
    out: list[Question] = []
    for q in pool:
        if q.text in seen or max(q.relevant) >= size:
            continue
        seen.add(q.text)
        out.append(Question(q.text, q.relevant))
        if len(out) == wanted:
            return memories, out
    raise SystemExit(f"only {len(out)} usable questions at {size}; ask for fewer")


def control(
    memories: Sequence[labelled.Memory], asked: Sequence[Question], ranker: str
) -> list[list[str]]:
    """The same questions through the pure `resolve` in-process, every memory's recency,
    usage and origin equal and nothing bumped (`recall_quality`'s recall pass), with the
    ranker's relevance floor as the server applies it: the flattering figure, beside which
    the live one is read. Answers are entry ids."""
    from memory.recall.ranking import embedding, semantic

    candidates = labelled.candidates_of(memories)
    name = RANKERS[ranker]
    corpus = labelled.Bm25Index((m.entry_id, m.text) for m in memories)
    prepare = semantic.semantic_for(name)
    vectors = None
    if name == "hybrid":
        encoder = embedding.default_encoder()
        matrix, _ = labelled.set_embeddings(encoder, [m.text for m in memories])
        vectors = semantic.VectorIndex([m.entry_id for m in memories], matrix)
        prepare = partial(semantic.hybrid, encoder=encoder)
    out = []
    for q in asked:
        fn = prepare(q.text, candidates, corpus=corpus, vectors=vectors)
        result = labelled.resolve(
            candidates,
            labelled.recall_request(q.text),
            semantic=fn,
            relevance_floor=semantic.relevance_floor(name),
        )
        out.append([e.candidate.entry_id for e in result.entries])
    return out


# --------------------------------------------------------------------------------------
# Database and server


def vacuum_analyze(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def server_env(args: argparse.Namespace, var_dir: Path) -> dict[str, str]:
    env = production_env(
        args.database_url,
        var_dir,
        REDIS_URL=args.redis_url,
        IRIS_RECALL_SEMANTIC=RANKERS[args.ranker],
    )
    env.pop("IRIS_EAGER_TASKS", None)
    return env


def server(
    env: dict[str, str], access_log: Path, server_log: Path, start_timeout: float
) -> AbstractContextManager[str]:
    """The README's server with gunicorn's access log (each 400 of the floor is a warning
    in `server_log`)."""
    return gunicorn(
        env,
        server_log,
        start_timeout,
        ["--access-logfile", str(access_log), "--access-logformat", ACCESS_FORMAT],
    )


def worker_of(access_log: Path) -> dict[str, str]:
    """Request tag → pid of the worker that answered it, from gunicorn's access log."""
    out: dict[str, str] = {}
    if not access_log.exists():
        return out
    for line in access_log.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] != "-":
            out[parts[0]] = parts[1].strip("<>")
    return out


# --------------------------------------------------------------------------------------
# Clients


@dataclass(slots=True)
class Call:
    seconds: float
    status: int | None  # None: timed out or the connection failed
    body: dict[str, Any] | None


class Client:
    """A surface's HTTP client: `requests` (what the issue measured with and what most
    surfaces use), or with `--client light` the standard library's `http.client`, a fresh
    connection per request as gunicorn's sync workers close theirs. Either runs on the
    server's own cores; what it spends is reported beside the server's CPU
    (`write_cpu_client_ms`), and it is part of every latency, the floor's included."""

    def __init__(self, base: str, token: str, member: str, timeout: float, kind: str) -> None:
        self.base = base
        self.member = member
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.session = requests.Session() if kind == "requests" else None
        if self.session is not None:
            self.session.headers.update(self.headers)

    def post(self, path: str, payload: dict[str, Any], tag: str) -> Call:
        start = time.perf_counter()
        sent = self._send if self.session is not None else self._send_light
        try:
            status, raw = sent(path, json.dumps(payload), tag)
        except (OSError, http.client.HTTPException, requests.RequestException):
            if self.session is not None:
                # The session's connection may be the one that broke: start a clean one.
                self.session.close()
            return Call(time.perf_counter() - start, None, None)
        seconds = time.perf_counter() - start
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        return Call(seconds, status, body)

    def _send(self, path: str, data: str, tag: str) -> tuple[int, bytes]:
        assert self.session is not None
        response = self.session.post(
            self.base + path, data=data, headers={TAG_HEADER: tag}, timeout=self.timeout
        )
        return response.status_code, response.content

    def _send_light(self, path: str, data: str, tag: str) -> tuple[int, bytes]:
        address = urlsplit(self.base)
        conn = http.client.HTTPConnection(address.hostname, address.port, timeout=self.timeout)
        try:
            conn.request("POST", path, body=data, headers={**self.headers, TAG_HEADER: tag})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def write(self, memory: labelled.Memory, subject: str, tag: str) -> Call:
        return self.post(
            "/api/v1/memories",
            {
                "userId": self.member,
                "scope": {"kind": "profile", "userId": self.member},
                "category": "preference",
                "body": memory.text,
                "subject": subject,
                "origin": "user-stated",
            },
            tag,
        )

    def recall(self, query: str, tag: str, **extra: Any) -> Call:
        return self.post(
            "/api/v1/recall",
            {
                "userId": self.member,
                "scope": {"kind": "profile"},
                "query": query,
                "surface": "assistant",
                "context": "general",
                **extra,
            },
            tag,
        )


def written_id(call: Call) -> str | None:
    """The id a write gave its memory (201), or the one it matched (200 with an entry)."""
    if call.body is None or call.status not in (200, 201):
        return None
    if call.status == 201:
        return str(call.body.get("id"))
    entry = call.body.get("entry")
    return str(entry["id"]) if isinstance(entry, dict) and entry.get("id") else None


def answered_ids(call: Call) -> list[str] | None:
    if call.status != 200 or call.body is None:
        return None
    # Each entry comes with why it was recalled: {"entry": {...}, ...}, in rank order.
    return [str(e["entry"]["id"]) for e in call.body.get("entries", [])]


@dataclass(slots=True)
class Writes:
    ids: dict[int, str] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0


def write_all(
    base: str,
    token: str,
    member: str,
    memories: Sequence[labelled.Memory],
    timeout: float,
    label: str,
    kind: str,
) -> Writes:
    """Write these memories with `WRITERS` threads, memory i on thread i mod WRITERS; every
    subject is its writer's own, so no two writes meet in the conflict ladder."""
    out = Writes()
    lock = threading.Lock()

    def work(writer: int) -> None:
        client = Client(base, token, member, timeout, kind)
        for memory in memories[writer::WRITERS]:
            call = client.write(memory, f"live-w{writer}-{memory.index}", f"{label}{memory.index}")
            entry_id = written_id(call)
            with lock:
                if call.status is not None and call.status < 500:
                    out.seconds.append(call.seconds)
                if entry_id is not None:
                    out.ids[memory.index] = entry_id
                else:
                    key = str(call.status or "timeout")
                    out.errors[key] = out.errors.get(key, 0) + 1

    threads = [threading.Thread(target=work, args=(w,)) for w in range(WRITERS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.wall = time.perf_counter() - start
    return out


# --------------------------------------------------------------------------------------
# One run: one size, one mode


def run(args: argparse.Namespace, size: int, mode: str, var_dir: Path) -> dict[str, Any]:
    extra = args.questions // CONVERSATION_EVERY + args.bursts * args.burst_size + 1
    memories, questions = plan(size, args.questions + args.bursts, extra)
    asked, after_burst = questions[: args.questions], questions[args.questions :]
    fresh = iter(memories[size:])
    control_answers: list[list[str]] | None = None
    if not args.no_control:
        control_answers = control(memories[:size], asked, args.ranker)

    env = server_env(args, var_dir)
    recreate_database(args.database_url)
    subprocess.run(
        [str(PY), "manage.py", "migrate", "--skip-checks", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    setup = subprocess.run(
        [str(PY), "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    seeded = json.loads(setup.stdout.strip().splitlines()[-1])
    token, member = seeded["token"], seeded["member"]
    access_log = var_dir / f"access-{size}-{mode}.log"
    access_log.unlink(missing_ok=True)

    server_log = var_dir / f"server-{size}-{mode}.log"
    with server(env, access_log, server_log, args.start_timeout) as base:
        # CPU spent per write by the app, PostgreSQL and this client: what bounds writes/s
        # on a small host, and unlike wall-clock throughput barely moved by a neighbour.
        cpu_of = {
            "app": partial(tree_cpu_seconds, gunicorn_master(base)),
            "db": partial(tree_cpu_seconds, postmaster_pid(args.database_url)),
            "client": partial(cpu_seconds, [os.getpid()]),
        }
        cpu_before = {k: f() for k, f in cpu_of.items()}
        writes = write_all(base, token, member, memories[:size], args.timeout, "w", args.client)
        write_cpu_ms = {
            f"write_cpu_{k}_ms": round(
                1000 * (f() - cpu_before[k]) / max(len(writes.seconds), 1), 2
            )
            for k, f in cpu_of.items()
        }
        # This machine's PostgreSQL runs without autovacuum; after a bulk load autovacuum
        # would have analysed the table, so the planner would not be guessing.
        vacuum_analyze(args.database_url)

        client = Client(base, token, member, args.timeout, args.client)
        ids = dict(writes.ids)
        recall_s: dict[str, float] = {}
        floor_s: list[float] = []
        answers: list[list[str] | None] = []
        errors: dict[str, int] = {}
        conversation_s: list[float] = []
        order: list[str] = []

        def count(kind: str, call: Call) -> None:
            key = f"{kind}:{call.status or 'timeout'}"
            errors[key] = errors.get(key, 0) + 1

        started = time.perf_counter()
        for i, question in enumerate(asked):
            if mode == "conversation" and i and i % CONVERSATION_EVERY == 0:
                memory = next(fresh)
                call = client.write(memory, f"live-c-{memory.index}", f"c{i}")
                if written_id(call) is None:
                    count("conversation-write", call)
                else:
                    conversation_s.append(call.seconds)
            tag = f"r{i}"
            order.append(tag)
            call = client.recall(question.text, tag)
            got = answered_ids(call)
            answers.append(got)
            if got is None:
                count("recall", call)
            else:
                recall_s[tag] = call.seconds
            # The floor: the same client and path, a field out of range, so it stops at
            # validation after authentication and the member's lookup.
            floor = client.recall(question.text, f"f{i}", limit=999)
            if floor.status == 400:
                floor_s.append(floor.seconds)
            else:
                count("floor", floor)
        stream_wall = time.perf_counter() - started

        burst_first: list[float | None] = []
        burst_answers: list[list[str] | None] = []
        for b, question in enumerate(after_burst):
            burst = [next(fresh) for _ in range(args.burst_size)]
            done = write_all(base, token, member, burst, args.timeout, f"b{b}-", args.client)
            for key, n in done.errors.items():
                errors[f"burst-write:{key}"] = errors.get(f"burst-write:{key}", 0) + n
            call = client.recall(question.text, f"a{b}")
            got = answered_ids(call)
            burst_answers.append(got)
            burst_first.append(call.seconds if got is not None else None)
            if got is None:
                count("after-burst-recall", call)

        stream_floor = percentile(floor_s, 95)
        pids = worker_of(access_log)

    # A restart (a deploy): the same database, a new server. Its master builds the
    # snapshots of the members active lately before forking; each worker's first recall is
    # timed, as in the stream.
    restart_log = var_dir / f"access-{size}-{mode}-restart.log"
    restart_log.unlink(missing_ok=True)
    restart_order: list[str] = []
    restart_s: dict[str, float] = {}
    started = time.perf_counter()
    restart_server_log = var_dir / f"server-{size}-{mode}-restart.log"
    with server(env, restart_log, restart_server_log, args.start_timeout) as base:
        restart_ready = time.perf_counter() - started
        client = Client(base, token, member, args.timeout, args.client)
        for i, question in enumerate(asked[: args.restart_questions]):
            tag = f"s{i}"
            restart_order.append(tag)
            call = client.recall(question.text, tag)
            if answered_ids(call) is None:
                count("restart-recall", call)
            else:
                restart_s[tag] = call.seconds
    restart_first = first_per_worker(restart_order, worker_of(restart_log), restart_s)
    restart_worst = max(restart_first.values()) if restart_first else None

    first = first_per_worker(order, pids, recall_s)
    stream_pids = {pids[t] for t in order if t in pids}
    wanted = [frozenset(ids[m] for m in q.relevant if m in ids) for q in asked]
    latencies = list(recall_s.values())
    none = sum(a is None for a in answers)
    floor_p95 = percentile(floor_s, 95)
    first_worst = max(first.values()) if first else None
    burst_done = [s for s in burst_first if s is not None]
    record: dict[str, Any] = {
        "bench": "recall_live",
        "ranker": args.ranker,
        "client": args.client,
        "size": size,
        "mode": mode,
        "questions": len(asked),
        "written": len(writes.ids),
        "write_errors": writes.errors,
        "writes_per_second": round(len(writes.seconds) / writes.wall, 1) if writes.wall else None,
        "write_p50_ms": ms(percentile(writes.seconds, 50)),
        "write_p95_ms": ms(percentile(writes.seconds, 95)),
        **write_cpu_ms,
        **quality(answers, wanted),
        "quarters": [
            quality([answers[i] for i in r], [wanted[i] for i in r]) for r in quarters(len(asked))
        ],
        # Which questions missed (their place in the stream), to compare with the control.
        "missed": missed(answers, wanted),
        "answered_entries_mean": round(
            sum(len(a) for a in answers if a is not None) / max(1, len(answers) - none), 2
        ),
        **control_figures(control_answers, asked, memories),
        **drift(answers, wanted, control_answers, asked, memories),
        "recall_p50_ms": ms(percentile(latencies, 50)),
        "recall_p95_ms": ms(percentile(latencies, 95)),
        "recall_p99_ms": ms(percentile(latencies, 99)),
        "recall_max_ms": ms(max(latencies) if latencies else None),
        "floor_p50_ms": ms(percentile(floor_s, 50)),
        "floor_p95_ms": ms(floor_p95),
        "p95_over_floor_p95": ratio(percentile(latencies, 95), floor_p95),
        "first_recall_per_worker_ms": {pid: ms(s) for pid, s in first.items()},
        "workers_seen": len(stream_pids),
        "first_recall_worst_ms": ms(first_worst),
        "first_over_floor_p95": ratio(first_worst, floor_p95),
        "conversation_write_p50_ms": ms(percentile(conversation_s, 50)),
        "burst_size": args.burst_size,
        "after_burst_first_recall_ms": [ms(s) for s in burst_first],
        "after_burst_over_floor_p95": ratio(max(burst_done) if burst_done else None, floor_p95),
        "after_burst_hit@12": quality(
            burst_answers,
            [frozenset(ids[m] for m in q.relevant if m in ids) for q in after_burst],
        )[f"hit@{K}"],
        "restart_ready_s": round(restart_ready, 2),
        "restart_first_recall_per_worker_ms": {pid: ms(v) for pid, v in restart_first.items()},
        "restart_first_over_floor_p95": ratio(restart_worst, stream_floor),
        "errors": errors,
        "stream_seconds": round(stream_wall, 1),
        "timeout_s": args.timeout,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.trace:
        # Each stream recall in order with its seconds and the worker that answered, and
        # the floor's seconds: where in the stream the slow ones fall.
        trace = {"order": order, "recall": recall_s, "floor": floor_s, "pids": pids}
        Path(f"{args.trace}-{size}-{mode}.json").write_text(json.dumps(trace))
    return record


def control_figures(
    answers: list[list[str]] | None, asked: Sequence[Question], memories: Sequence[labelled.Memory]
) -> dict[str, Any]:
    if answers is None:
        return {}
    wanted = [frozenset(memories[i].entry_id for i in q.relevant) for q in asked]
    overall = quality(answers, wanted)
    return {
        f"control_hit@{K}": overall[f"hit@{K}"],
        f"control_ndcg@{K}": overall[f"ndcg@{K}"],
        "control_quarters": [
            quality([answers[i] for i in r], [wanted[i] for i in r]) for r in quarters(len(asked))
        ],
        "control_missed": missed(answers, wanted),
    }


def drift(
    answers: Sequence[list[str] | None],
    wanted: Sequence[frozenset[str]],
    control_answers: list[list[str]] | None,
    asked: Sequence[Question],
    memories: Sequence[labelled.Memory],
) -> dict[str, Any]:
    """hit@12 of the last quarter less the first, live and in the control. The questions
    of two quarters differ, and so does how hard they are: the control, where nothing is
    bumped, shows that part, and what live use adds to it is the drift usage causes."""
    first, *_, last = quarters(len(asked))

    def change(got: Sequence[list[str] | None], want: Sequence[frozenset[str]]) -> float:
        def hit(r: range) -> float:
            return quality([got[i] for i in r], [want[i] for i in r])[f"hit@{K}"] or 0.0

        return round(hit(last) - hit(first), 4)

    out: dict[str, Any] = {"last_less_first_quarter": change(answers, wanted)}
    if control_answers is not None:
        control_wanted = [frozenset(memories[i].entry_id for i in q.relevant) for q in asked]
        control = change(control_answers, control_wanted)
        out["control_last_less_first_quarter"] = control
        out["drift_from_usage"] = round(out["last_less_first_quarter"] - control, 4)
    return out


def table(records: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'size':>6} {'mode':<12} {'w/s':>6} {'w p50/p95':>12} {'hit@12':>6} {'nDCG':>6} "
        f"{'control':>7} "
        f"{'hit@12 by quarter':<24} {'p50/p95/p99 ms':>20} {'floor p95':>9} {'p95/fl':>6} "
        f"{'1st/worker ms':<28} {'after burst':<18} {'after restart':<24} errors"
    )
    lines = [head, "-" * len(head)]

    def f(v: Any) -> str:
        return "-" if v is None else f"{v}"

    for r in records:
        by_quarter = " ".join(f(q[f"hit@{K}"]) for q in r["quarters"])
        firsts = " ".join(f(v) for v in r["first_recall_per_worker_ms"].values())
        firsts += f" ({r['workers_seen']}/{WORKERS})"
        lines.append(
            f"{r['size']:>6} {r['mode']:<12} {f(r['writes_per_second']):>6} "
            f"{f(r['write_p50_ms']) + '/' + f(r['write_p95_ms']):>12} "
            f"{f(r[f'hit@{K}']):>6} {f(r[f'ndcg@{K}']):>6} {f(r.get(f'control_hit@{K}')):>7} "
            f"{by_quarter:<24} "
            f"{'/'.join(f(r[k]) for k in ('recall_p50_ms', 'recall_p95_ms', 'recall_p99_ms')):>20} "
            f"{f(r['floor_p95_ms']):>9} {f(r['p95_over_floor_p95']):>6} {firsts:<28} "
            f"{' '.join(f(v) for v in r['after_burst_first_recall_ms']):<18} "
            f"{' '.join(f(v) for v in r['restart_first_recall_per_worker_ms'].values()):<24} "
            f"{sum(r['errors'].values()) + sum(r['write_errors'].values())}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default="postgres://root@127.0.0.1:5432/iris_bench")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    )
    parser.add_argument("--ranker", choices=sorted(RANKERS), default="jaccard")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--mode", choices=["static", "conversation", "both"], default="both")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--burst-size", type=int, default=40)
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument(
        "--restart-questions", type=int, default=16, help="recalls after restarting the server"
    )
    parser.add_argument("--keep-database", action="store_true")
    parser.add_argument(
        "--client",
        choices=["requests", "light"],
        default="requests",
        help="the HTTP client: requests (default) or http.client, lighter on the shared CPU",
    )
    parser.add_argument(
        "--no-control", action="store_true", help="skip the in-process equal-usage control"
    )
    parser.add_argument(
        "--trace", metavar="PREFIX", help="write each stream's requests to PREFIX-SIZE-MODE.json"
    )
    parser.add_argument("--quick", action="store_true", help="300 memories, 40 questions")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.questions, args.bursts, args.burst_size = "300", 40, 1, 16
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = ["static", "conversation"] if args.mode == "both" else [args.mode]
    var_dir = Path(os.environ.get("IRIS_VAR_DIR") or ROOT / "var" / "bench-live")
    var_dir.mkdir(parents=True, exist_ok=True)

    # SIGTERM as Ctrl-C: the `finally` blocks stop the server and drop the database.
    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    print(
        f"recall_live: ranker {args.ranker}, sizes {sizes}, modes {modes}, "
        f"{args.questions} questions, timeout {args.timeout}s",
        flush=True,
    )
    records: list[dict[str, Any]] = []
    try:
        for size in sizes:
            for mode in modes:
                record = run(args, size, mode, var_dir)
                records.append(record)
                print(json.dumps(record), flush=True)
    finally:
        if not args.keep_database:
            drop_database(args.database_url)
        if records:
            print(table(records), flush=True)


if __name__ == "__main__":
    main()
