"""A gunicorn worker killed after it sent its answer and before its after-response work
(`governance.after_response`): nothing is lost for good.

The README's server (`gunicorn iris_site.wsgi --preload`, one worker here) runs with the
project's gunicorn settings plus a hook that SIGKILLs the worker as the chosen request
finishes, ahead of the after-response queue (`gunicorn_fault.py`). Records (the memory,
its audit row, recall's usage bump and history) commit with the answer, so they are all
there; what the queue held, the audit seal, is done by the beat task's sweep
(`governance.tasks.audit_seal`), after which the chain verifies.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.db.models import Exists, OuterRef

from governance import audit
from governance.models import AuditEvent, AuditSeal
from memory.models import MemoryEntry
from memory.recall.models import RecallEvent
from tests.faults.conftest import ROOT, process_env, stop_group, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Server:
    base: str
    kill_file: Path
    killed_file: Path
    log: Path

    def killed_pid(self) -> int:
        """Wait until the worker killed itself, then until it is gone; its pid."""
        wait_for(self.killed_file.exists, "the worker killed itself after its answer")
        pid = int(self.killed_file.read_text())
        self.killed_file.unlink()
        wait_for(lambda: not _alive(pid), f"worker {pid} is gone")
        return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(require_postgres, tmp_path) -> Iterator[Server]:
    port = _free_port()
    kill_file, killed_file = tmp_path / "kill-next", tmp_path / "killed"
    log = tmp_path / "gunicorn.log"
    env = process_env(IRIS_FAULT_KILL_FILE=str(kill_file), IRIS_FAULT_KILLED_FILE=str(killed_file))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "iris_site.wsgi",
            "--preload",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            "-c",
            str(ROOT / "tests" / "faults" / "gunicorn_fault.py"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            return requests.get(f"{base}/api/v1/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    wait_for(answers, "gunicorn answered")
    yield Server(base, kill_file, killed_file, log)
    stop_group(proc)


def unsealed() -> set[int]:
    return set(
        AuditEvent.objects.filter(~Exists(AuditSeal.objects.filter(event=OuterRef("pk"))))
        .order_by()
        .values_list("seq", flat=True)
    )


def test_a_worker_killed_after_its_answer_loses_no_record_and_its_seal_is_swept(
    server, surface_token, ready
):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {surface_token}"
    member = str(ready.public_id)
    audit.seal_pending(blocking=True, full=True)  # what the fixtures wrote, sealed
    before = set(AuditEvent.objects.values_list("seq", flat=True))

    server.kill_file.touch()
    wrote = session.post(
        f"{server.base}/api/v1/memories",
        json={
            "userId": member,
            "scope": {"kind": "profile", "userId": member},
            "category": "preference",
            "body": "I keep bees on the roof",
            "subject": "bees",
            "origin": "user-stated",
        },
        timeout=60,
    )
    assert wrote.status_code == 201  # the whole answer arrived
    first = server.killed_pid()
    entry = wrote.json()["id"]
    assert MemoryEntry.objects.filter(entry_id=entry, is_current=True).exists()
    written = set(AuditEvent.objects.values_list("seq", flat=True)) - before
    assert written  # the write's audit rows committed with the answer
    assert written <= unsealed()  # the seal was in the lost queue

    server.kill_file.touch()
    recalled = session.post(
        f"{server.base}/api/v1/recall",
        json={
            "userId": member,
            "scope": {"kind": "profile"},
            "query": "bees roof",
            "surface": "assistant",
            "context": "general",
            "destinationTier": "local",
        },
        timeout=60,
    )
    assert recalled.status_code == 200
    assert entry in {item["entry"]["id"] for item in recalled.json()["entries"]}
    assert server.killed_pid() != first  # a new worker answered, and was killed too
    # Recall's usage bump and its history committed with the answer.
    assert MemoryEntry.objects.get(entry_id=entry, is_current=True).reference_count == 1
    assert RecallEvent.objects.filter(entry_id=entry).count() == 1

    # The beat task's sweep seals what the lost queue would have, and the chain verifies.
    assert audit.seal_pending(blocking=True, full=True) >= len(written)
    assert unsealed() == set()
    report = audit.verify_chain()
    assert report.ok, report.first_break
    # The server goes on with a fresh worker.
    assert session.get(f"{server.base}/api/v1/health", timeout=30).status_code == 200
