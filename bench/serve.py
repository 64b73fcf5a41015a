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


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def server_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [master, *map(int, children)]


def database_pids(db_url: str) -> list[int]:
    import psycopg

    name = urlparse(db_url).path.lstrip("/")
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchall()
    return [r[0] for r in rows]


def server_pids_on(base: str) -> list[int]:
    """The gunicorn master and workers serving `base` (each has the bind address in its
    command line)."""
    bind = base.removeprefix("http://")
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if bind.encode() in argv and any(b"gunicorn" in a for a in argv[:2]):
            out.append(int(entry.name))
    return out


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
