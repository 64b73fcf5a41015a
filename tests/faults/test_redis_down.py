"""Redis goes down under a running Iris (a redis-server of the test's own, killed with
SIGKILL; the shared Redis is never touched): the API still serves reads and writes,
`/api/v1/health` says degraded, and a job that cannot be queued is not lost: it runs in
the request's process and the log says so, naming it."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator

import pytest
import redis

from consent.enums import Category, category_consent_type
from memory.models import MemoryEntry
from tests.conftest import need_service
from tests.factories import grant, written
from tests.faults.conftest import stop_group, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def own_redis(require_redis, tmp_path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    binary = shutil.which("redis-server")
    need_service(binary is not None, "redis-server is not installed")
    assert binary is not None
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=(tmp_path / "redis.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False

    wait_for(answers, "the test's own redis-server answered")
    yield url, proc
    stop_group(proc)


@pytest.fixture
def on_own_redis(own_redis, settings, monkeypatch) -> tuple[str, subprocess.Popen[bytes]]:
    """The cache (the rate limit) and the broker on the test's own Redis."""
    from iris_site.celery import app

    url, _ = own_redis
    settings.REDIS_URL = url
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    }
    monkeypatch.setitem(app.conf, "broker_url", url)
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    monkeypatch.setitem(app.conf, "task_default_queue", f"iris-faults-{uuid.uuid4().hex[:12]}")
    # The producer pools hold connections to the broker they first met.
    monkeypatch.setattr(app, "_pool", None)
    monkeypatch.setattr(app.amqp, "_producer_pool", None)
    return own_redis


def memory_body(member, body: str, category: str = "preference") -> dict:
    return {
        "userId": str(member.public_id),
        "scope": {"kind": "profile", "userId": str(member.public_id)},
        "category": category,
        "body": body,
        "subject": body,
        "origin": "user-stated",
    }


def test_with_redis_down_the_api_serves_reads_and_writes_and_health_says_degraded(
    on_own_redis, surface_api, ready
):
    url, proc = on_own_redis
    up = surface_api.post("/api/v1/memories", memory_body(ready, "I like rowing"), format="json")
    assert up.status_code == 201
    assert redis.Redis.from_url(url).dbsize() > 0  # the rate limit counted on this Redis
    assert surface_api.get("/api/v1/health").json()["checks"]["redis"] == "ok"

    proc.send_signal(signal.SIGKILL)
    proc.wait()

    health = surface_api.get("/api/v1/health")
    assert health.status_code == 200  # up: the node still serves
    assert health.json()["status"] == "degraded"
    assert health.json()["checks"] == {"database": "ok", "redis": "unreachable"}

    wrote = surface_api.post("/api/v1/memories", memory_body(ready, "I like kayaks"), format="json")
    assert wrote.status_code == 201, wrote.content
    entry = wrote.json()["id"]
    read = surface_api.get(f"/api/v1/memories/{entry}", {"userId": str(ready.public_id)})
    assert read.status_code == 200 and read.json()["body"] == "I like kayaks"
    recalled = surface_api.post(
        "/api/v1/recall",
        {
            "userId": str(ready.public_id),
            "scope": {"kind": "profile"},
            "query": "kayaks",
            "surface": "assistant",
            "context": "general",
            "destinationTier": "local",
        },
        format="json",
    )
    assert recalled.status_code == 200
    assert entry in {item["entry"]["id"] for item in recalled.json()["entries"]}


def test_with_redis_down_a_revocations_cascade_runs_in_process_and_is_logged(
    on_own_redis, surface_api, ready, caplog
):
    _, proc = on_own_redis
    consent_type = category_consent_type(Category.MEDICAL)
    grant(ready, consent_type)
    medical = written(ready, "zq-fault physio on tuesdays", category="medical", subject="physio")
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    with caplog.at_level(logging.ERROR, logger="iris.jobs"):
        revoked = surface_api.post(
            "/api/v1/consents",
            {
                "userId": str(ready.public_id),
                "type": consent_type,
                "status": "revoked",
                "legalBasis": "explicit_consent",
                "captureMethod": "inline-prompt",
            },
            format="json",
        )
    assert revoked.status_code in (200, 201), revoked.content
    # The job could not be queued, so it ran here: the memory is gone, and the log says why.
    assert not MemoryEntry.objects.filter(entry_id=medical.entry_id).exists()
    not_queued = [r.getMessage() for r in caplog.records if "not queued" in r.getMessage()]
    assert any("memory.tasks.cascade_consent_revocation" in m for m in not_queued), not_queued
    assert "physio" not in caplog.text
