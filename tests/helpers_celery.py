"""A real Celery worker for the tests that cover the broker path (Redis)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def celery_worker(
    env: Mapping[str, str], log: Path, *, queue: str = "celery"
) -> Iterator[subprocess.Popen]:
    """One solo worker of `iris_site` on `queue`, its output in `log`, stopped when the
    block ends. Tests running side by side on one broker each take their own queue."""
    with log.open("w") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "iris_site",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
                "--queues",
                queue,
            ],
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield worker
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
