"""Export bundle build time and peak memory for a member with 10,000 memories, PostgreSQL.

    .venv/bin/python bench/export.py                         # 10,000 memories, 3 rounds
    .venv/bin/python bench/export.py --memories 2000 --rounds 1
    .venv/bin/python bench/export.py --encrypted             # sealed under a passphrase
    .venv/bin/python bench/export.py --keep-database         # reuse: --no-seed next time

What it does, end to end and for real:
1. (re)creates the PostgreSQL database `iris_bench_export` (--database-url) and migrates
   it, with the production settings (DEBUG off, fresh secrets; jobs run in-process);
2. in a child process, seeds a tenant and one member with storage consent, then writes
   --memories memories through `memory.services.memory_write` and corrects every fifth
   through `memory_correct` (a second revision): 10,000 memories, 12,000 revisions. The
   seed runs with the BM25 ranker (`IRIS_RECALL_SEMANTIC=lexical`) so it does not embed
   every body: the export reads no embedding, and seeding is minutes instead of tens;
3. per round, a fresh child process files an export request as the member (verified by
   the session, so the work runs at once, in-process) and times `data_rights_open` until
   the request is completed: collect, write, sign, zip (and seal), audit. The parent reads
   that child's own resource usage (`os.wait4`): its peak RSS is the export's;
4. the floor, beside it: another fresh child does the same set-up (Django, the member, the
   request's rows) and only streams the member's revisions out of PostgreSQL with
   `.iterator()`, the least any export must do; its time and peak RSS are the floor;
5. checks the last bundle with `manage.py verify_bundle`, prints a table and one JSON line.

Target (issue 22): under 5 s and under 200 MB. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import drop_database, production_env, recreate_database  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
if not PY.exists():  # a git worktree shares the main checkout's venv
    PY = Path(sys.executable)
DEFAULT_DB = "postgres://root@127.0.0.1:5432/iris_bench_export"
PASSPHRASE = "bench passphrase, long enough"


# ------------------------------------------------------------------------- children


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def child_seed(memories: int) -> dict:
    _setup()
    from consent.enums import CaptureMethod, ConsentType, LegalBasis
    from consent.services import consent_record
    from governance.audit import Actor
    from governance.principal import Principal
    from governance.services import tenant_create, user_create
    from memory.services import Correction, MemoryDraft, memory_correct, memory_write

    system = Actor("system", "bench")
    tenant = tenant_create(actor=system, slug="bench", name="Bench")
    member = user_create(
        actor=system, tenant=tenant, username="exporter", role="member", password="pw-bench"
    ).user
    me = Principal(kind="member", id=member.public_id, tenant_id=tenant.id)
    for consent_type in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE):
        consent_record(
            principal=me,
            member=member,
            consent_type=consent_type,
            status="granted",
            legal_basis=LegalBasis.CONSENT,
            capture_method=CaptureMethod.SETTINGS_TOGGLE,
        )
    categories = ["preference", "fact", "goal", "work", "commitment"]
    started = time.perf_counter()
    corrected = 0
    for i in range(memories):
        outcome = memory_write(
            principal=me,
            member=member,
            draft=MemoryDraft(
                scope_kind="profile",
                scope_identifiers={"userId": str(member.public_id)},
                category=categories[i % len(categories)],
                subject=f"item {i}",
                body=(
                    f"Item {i}: I keep the blue notebook number {i} in the second drawer "
                    f"of the desk by the window, next to the stamps from trip {i % 97}."
                ),
                origin="user-stated",
            ),
        )
        assert outcome.written, outcome.reason
        if i % 5 == 0:
            assert outcome.entry is not None
            again = memory_correct(
                principal=me,
                member=member,
                entry_id=outcome.entry.entry_id,
                correction=Correction(
                    body=f"Item {i}: the blue notebook number {i} moved to the top shelf."
                ),
            )
            assert again.written, again.reason
            corrected += 1
        if (i + 1) % 1000 == 0:
            print(f"  seeded {i + 1} memories ({time.perf_counter() - started:.0f} s)", flush=True)
    return {"member": str(member.public_id), "memories": memories, "corrected": corrected}


def _member():
    from governance.models import User

    return User.objects.select_related("tenant").get(username="exporter")


def child_export(encrypted: bool) -> dict:
    _setup()
    from dsar.models import DataRightsRequest, ExportBundle
    from dsar.services import data_rights_open
    from governance.principal import Principal
    from memory.models import MemoryEntry

    member = _member()
    me = Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)
    revisions = MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member).count()
    payload: dict = {"includeConsents": True, "includeOptOuts": True}
    if encrypted:
        payload.update(encrypted=True, passphrase=PASSPHRASE)
    started = time.perf_counter()
    cpu_started = time.process_time()
    # Filed by the member's session: verified at once, and with jobs in-process the export
    # runs inside this call (after its commit).
    request = data_rights_open(principal=me, member=member, kind="export", payload=payload)
    seconds = time.perf_counter() - started
    spent = time.process_time() - cpu_started
    request = DataRightsRequest.objects.get(id=request.id)
    assert request.state == "completed", request.state
    bundle = ExportBundle.objects.get(request=request)
    from dsar.export import staging_dir

    return {
        "seconds": seconds,
        "export_cpu": spent,
        "revisions": revisions,
        "bytes": bundle.size_bytes,
        "path": str(staging_dir() / bundle.file_name),
    }


def child_floor() -> dict:
    _setup()
    from memory.models import MemoryEntry

    member = _member()
    started = time.perf_counter()
    cpu_started = time.process_time()
    rows = 0
    for _ in (
        MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member)
        .defer("recall_terms")
        .order_by("entry_id", "revision")
        .iterator(chunk_size=1000)
    ):
        rows += 1
    return {
        "seconds": time.perf_counter() - started,
        "export_cpu": time.process_time() - cpu_started,
        "revisions": rows,
    }


# ------------------------------------------------------------------------- parent


def run_child(env: dict[str, str], *args: str) -> tuple[dict, int]:
    """Run this script as a child; its JSON answer and its own peak RSS in KiB."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        proc = subprocess.Popen(
            [str(PY), __file__, "--child", *args, "--out", out.name], cwd=ROOT, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"child {args[0]} failed ({proc.returncode})")
        return json.loads(Path(out.name).read_text()), usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--encrypted", action="store_true")
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--keep-database", action="store_true")
    parser.add_argument("--no-seed", action="store_true", help="reuse a kept database")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    o = parser.parse_args()

    if o.child:
        if o.child == "seed":
            answer = child_seed(o.memories)
        elif o.child == "export":
            answer = child_export(o.encrypted)
        else:
            answer = child_floor()
        Path(o.out).write_text(json.dumps(answer))
        return

    var_dir = ROOT / "var" / "bench-export"
    var_dir.mkdir(parents=True, exist_ok=True)
    env = production_env(o.database_url, var_dir, IRIS_EAGER_TASKS="1")
    env.pop("REDIS_URL", None)
    env["IRIS_EXPORT_DIR"] = str(var_dir / "exports")
    env["IRIS_MASTER_KEY"] = env.get("IRIS_BENCH_MASTER_KEY") or env["IRIS_MASTER_KEY"]
    env["IRIS_RECALL_SEMANTIC"] = "lexical"
    if o.keep_database and "IRIS_BENCH_MASTER_KEY" not in os.environ:
        print("note: set IRIS_BENCH_MASTER_KEY to reuse the kept database with --no-seed")
    if not o.no_seed:
        recreate_database(o.database_url)
        subprocess.run(
            [str(PY), "manage.py", "migrate", "-v", "0", "--skip-checks"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        print(f"seeding {o.memories} memories through the services ...", flush=True)
        started = time.perf_counter()
        seeded, _ = run_child(env, "seed", "--memories", str(o.memories))
        print(f"seeded in {time.perf_counter() - started:.0f} s: {seeded}")
        import psycopg

        with psycopg.connect(o.database_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    try:
        floor, floor_rss = run_child(env, "floor")
        rounds = []
        for n in range(o.rounds):
            args = ["export", *(["--encrypted"] if o.encrypted else [])]
            result, rss = run_child(env, *args)
            rounds.append((result, rss))
            print(
                f"round {n + 1}: {result['seconds']:.2f} s ({result['export_cpu']:.2f} s CPU), "
                f"peak RSS {rss / 1024:.0f} MB, "
                f"{result['revisions']} revisions, bundle {result['bytes'] / 1e6:.1f} MB"
            )
        last = rounds[-1][0]
        verify = ["manage.py", "verify_bundle", last["path"]]
        if o.encrypted:
            verify += ["--passphrase", PASSPHRASE]
        checked = subprocess.run(
            [str(PY), *verify], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        print((checked.stdout or checked.stderr).strip())
    finally:
        if not o.keep_database:
            drop_database(o.database_url)

    seconds = [r["seconds"] for r, _ in rounds]
    peak = max(rss for _, rss in rounds) / 1024
    figure = {
        "bench": "export",
        "memories": o.memories,
        "revisions": last["revisions"],
        "encrypted": o.encrypted,
        "rounds": len(rounds),
        "seconds_median": round(statistics.median(seconds), 3),
        "seconds_max": round(max(seconds), 3),
        "cpu_seconds_median": round(statistics.median(r["export_cpu"] for r, _ in rounds), 3),
        "peak_rss_mb": round(peak, 1),
        "bundle_mb": round(last["bytes"] / 1e6, 2),
        "floor_seconds": round(floor["seconds"], 3),
        "floor_cpu_seconds": round(floor["export_cpu"], 3),
        "floor_rss_mb": round(floor_rss / 1024, 1),
        "verified": checked.returncode == 0,
        "target_seconds": 5,
        "target_rss_mb": 200,
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    print()
    print(f"{'':24}{'export':>12}{'floor':>12}{'target':>10}")
    print(
        f"{'wall time (s)':24}{figure['seconds_median']:>12}{figure['floor_seconds']:>12}"
        f"{'< 5':>10}"
    )
    print(
        f"{'CPU time (s)':24}{figure['cpu_seconds_median']:>12}"
        f"{figure['floor_cpu_seconds']:>12}{'':>10}"
    )
    print(
        f"{'peak RSS (MB)':24}{figure['peak_rss_mb']:>12}{figure['floor_rss_mb']:>12}{'< 200':>10}"
    )
    print(json.dumps(figure))


if __name__ == "__main__":
    main()
