"""What the benches that run the README's production server share: a free port, a fresh
PostgreSQL database, the production environment on the loopback, the server itself, and
the percentile they report."""

from __future__ import annotations

import math
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
WORKERS = 4  # the README's `--workers 4`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admin(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    return parsed._replace(path="/postgres").geturl(), parsed.path.lstrip("/")


def recreate_database(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def production_env(db_url: str, var_dir: Path, **overrides: str) -> dict[str, str]:
    """The environment of `DEBUG=0` Iris on plain HTTP on the loopback (no TLS proxy in
    front), with fresh secrets, its files under `var_dir`, and the per-principal API
    throttle lifted: one client writes a whole set."""
    from cryptography.fernet import Fernet

    env = dict(os.environ)
    env.update(
        DATABASE_URL=db_url,
        DJANGO_SETTINGS_MODULE="iris_site.settings",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        IRIS_MASTER_KEY=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="0",
        IRIS_VAR_DIR=str(var_dir),
        IRIS_AUDIT_CHECKPOINT_PATH=str(var_dir / "checkpoints.jsonl"),
        IRIS_API_RATE="100000000/min",
        LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_ticks(pids: list[int], fields: slice) -> int:
    total = 0
    for pid in pids:
        try:
            stat = _stat(pid)
        except OSError:  # gone since it was listed
            continue
        total += sum(int(f) for f in stat[fields])
    return total


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc)."""
    return _cpu_ticks(pids, slice(11, 13)) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU so far of a server: its main process, its live children and the children it
    has reaped (a database backend that closed, a recycled worker), each with its own."""
    children = Path(f"/proc/{root}/task/{root}/children").read_text().split()
    pids = [root, *map(int, children)]
    return _cpu_ticks(pids, slice(11, 15)) / os.sysconf("SC_CLK_TCK")


def postmaster_pid(db_url: str) -> int:
    """The PostgreSQL server's main process (the parent of every backend)."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        # Read while the backend is alive: it leaves when the connection closes.
        return int(_stat(int(row[0]))[1])


def gunicorn_master(base: str) -> int:
    """The gunicorn master serving `base` (every process of it has the bind address in
    its command line; the master's parent is not one of them)."""
    bind = base.removeprefix("http://").encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if bind in argv and any(b"gunicorn" in a for a in argv[:2]):
            pids.append(int(entry.name))
    [master] = [p for p in pids if int(_stat(p)[1]) not in pids]
    return master


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


@contextmanager
def gunicorn(
    env: dict[str, str],
    server_log: Path,
    start_timeout: float,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """The README's production server (`gunicorn iris_site.wsgi --preload --workers 4`) on
    a free loopback port, in its own process group, stopped on the way out whatever
    happens (an error, Ctrl-C, SIGTERM). Yields its base URL once it answers."""
    import requests

    port = free_port()
    log = server_log.open("wb")
    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "iris_site.wsgi",
            "--preload",
            "--workers",
            str(WORKERS),
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            *extra_args,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"gunicorn exited during start-up; see {server_log}")
            try:
                requests.get(f"{base}/api/schema/", timeout=5)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise SystemExit("gunicorn did not answer in time") from None
                time.sleep(0.2)
        yield base
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process started with `start_new_session=True`, and its children."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
