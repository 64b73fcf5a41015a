"""The fault tests' real processes: a Celery worker on Redis that the test kills, a Redis
of the test's own that it stops, and the README's gunicorn.

Every process here is started by the test, in its own process group, and ended by the
test through that group; the shared Redis and PostgreSQL are never stopped. The database
is the test database (transactional tests, so the processes see committed rows), and
each test's jobs go to a queue of their own, so no other worker on the same Redis takes
them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# How long a fault test waits for a process to reach a state before it fails (a generous
# bound for a busy shared machine; the tests assert states, never durations).
PATIENCE = 120.0
# Seconds before Redis gives an unacknowledged job back to a restarted worker.
VISIBILITY = 4


def wait_for(condition: Callable[[], Any], what: str, patience: float = PATIENCE) -> Any:
    """Poll `condition` until it returns something true; fail naming `what` if it never
    does."""
    deadline = time.monotonic() + patience
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.2)


def database_url() -> str:
    s = connection.settings_dict
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    at = f"{user}{password}@" if user else ""
    return f"postgres://{at}{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def process_env(**overrides: str) -> dict[str, str]:
    """The test's own settings for a child process, on the test database."""
    from django.conf import settings

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="iris_site.settings_test",
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        IRIS_EXPORT_DIR=str(settings.IRIS_EXPORT_DIR),
        IRIS_AUDIT_CHECKPOINT_PATH=str(settings.IRIS_AUDIT_CHECKPOINT_PATH),
    )
    env.update(overrides)
    return env


def stop_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


class Worker:
    """A real `celery worker` (prefork, one child) on the test's queue."""

    def __init__(self, tmp_path: Path, queue: str) -> None:
        self.tmp_path = tmp_path
        self.queue = queue
        self.marker = tmp_path / "worker-stopped-mid-job"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, hang: str | None = None) -> subprocess.Popen[bytes]:
        """Start a worker; with `hang` (`module:function:n`) it stops for good right after
        the n-th call of that function returned, having written `self.marker`."""
        env = process_env(IRIS_FAULT_VISIBILITY=str(VISIBILITY), IRIS_FAULT_MARKER=str(self.marker))
        env.pop("IRIS_FAULT_HANG", None)
        if hang:
            env["IRIS_FAULT_HANG"] = hang
        log = (self.tmp_path / f"worker-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.faults.worker_app",
                "worker",
                "--concurrency=1",
                "-Q",
                self.queue,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker and its pool child at once: no warm shutdown, no ack."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs:
            stop_group(proc)

    def log(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.tmp_path.glob("worker-*.log"))
        )


@pytest.fixture
def broker_queue(require_redis, monkeypatch) -> str:
    """Jobs leave this process for the broker, on a queue of this test's own."""
    from iris_site.celery import app

    queue = f"iris-faults-{uuid.uuid4().hex[:12]}"
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    monkeypatch.setitem(app.conf, "task_default_queue", queue)
    yield queue
    import redis

    redis.Redis.from_url(require_redis).delete(queue)


@pytest.fixture
def worker(broker_queue, tmp_path) -> Iterator[Worker]:
    w = Worker(tmp_path, broker_queue)
    yield w
    w.stop_all()
