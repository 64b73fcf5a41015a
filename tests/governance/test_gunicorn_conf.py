"""gunicorn.conf.py: read by gunicorn from the working directory; its hooks freeze what was
loaded before the first request and collect the youngest generation less often."""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _conf():
    spec = importlib.util.spec_from_file_location("iris_gunicorn_conf", ROOT / "gunicorn.conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The worker hook connects the connection renewal under this id (gunicorn.conf.py).
RENEW_UID = "iris-renew-connection"


def _no_renewal() -> None:
    # Outside gunicorn no connection is renewed after a request (tests/test_warm.py).
    from django.core.signals import request_finished

    request_finished.disconnect(dispatch_uid=RENEW_UID)


def test_gunicorn_reads_it_from_the_working_directory() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "gunicorn"), "--print-config", "iris_site.wsgi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "config                             = ./gunicorn.conf.py" in done.stdout, done.stderr


class _Booting:
    """What the hooks read of gunicorn's worker and arbiter."""

    def __init__(self, wsgi: object = None, num_workers: int = 1) -> None:
        self.wsgi = wsgi
        self.num_workers = num_workers


def test_the_worker_hook_reads_ahead_freezes_and_raises_the_young_threshold(monkeypatch) -> None:
    from iris_site import warm

    readied: list[object] = []
    monkeypatch.setattr(warm, "worker_ready", readied.append)
    conf = _conf()
    app = object()
    before = gc.get_threshold()
    try:
        gc.unfreeze()
        assert gc.get_freeze_count() == 0
        conf.post_worker_init(_Booting(app))
        assert readied == [app]  # the worker's own app; iris_site/warm.py, tests/test_warm.py
        assert gc.get_freeze_count() > 1000  # the modules, settings and the rest
        assert gc.get_threshold() == (conf.YOUNG_THRESHOLD, before[1], before[2])
        conf.when_ready(_Booting())  # the master's hook does the same before forking
        assert gc.get_threshold()[0] == conf.YOUNG_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        _no_renewal()


def test_the_worker_hook_renews_the_connection_after_requests(monkeypatch) -> None:
    from django.core.signals import request_finished

    from iris_site import warm

    monkeypatch.setattr(warm, "worker_ready", lambda app: None)
    conf = _conf()
    before = gc.get_threshold()
    try:
        assert RENEW_UID not in {key[0] for key, *_ in request_finished.receivers}
        conf.post_worker_init(_Booting())
        renewing = [r for key, r, *_ in request_finished.receivers if key[0] == RENEW_UID]
        assert [r() for r in renewing] == [warm.renew_connection]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        _no_renewal()


def test_workers_take_requests_once_all_have_warmed_up(monkeypatch) -> None:
    from iris_site import warm

    monkeypatch.setattr(warm, "worker_ready", lambda app: None)
    conf = _conf()
    before = gc.get_threshold()
    arrived: list[float] = []
    try:
        conf.post_worker_init(_Booting())  # no master hook ran: nothing to wait for
        conf.when_ready(_Booting(num_workers=4))  # the master, before forking
        assert isinstance(conf._together, warm.StartTogether)
        assert conf._together.workers == 4
        monkeypatch.setattr(conf._together, "arrive", arrived.append)
        conf.post_worker_init(_Booting())
        assert arrived == [conf.START_TOGETHER_SECONDS]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        _no_renewal()


class _Worker:
    def __init__(self, pid: int) -> None:
        self.pid = pid


class _Exited(Exception):
    pass


@pytest.fixture
def exits(monkeypatch):
    codes: list[int] = []

    def fake_exit(code: int) -> None:
        codes.append(code)
        raise _Exited

    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setitem(sys.modules, "onnxruntime", sys.modules.get("onnxruntime", object()))
    return codes


@pytest.mark.parametrize(
    ("raised", "code"),
    [(SystemExit(0), 0), (SystemExit(None), 0), (SystemExit(3), 3), (SystemExit("boom"), 1)],
)
def test_a_worker_leaves_with_the_code_gunicorn_chose(exits, raised, code) -> None:
    conf = _conf()
    with pytest.raises(_Exited):
        try:
            raise raised
        finally:
            conf.worker_exit(None, _Worker(os.getpid()))
    assert exits == [code]


def test_the_master_and_a_process_without_the_runtime_go_on(exits, monkeypatch) -> None:
    conf = _conf()
    conf.worker_exit(None, _Worker(os.getpid() + 1))  # the master, reaping a dead worker
    monkeypatch.delitem(sys.modules, "onnxruntime")
    conf.worker_exit(None, _Worker(os.getpid()))
    assert exits == []


def test_gunicorn_stops_with_the_model_preloaded(tmp_path) -> None:
    """The hang itself: hybrid ranker, ONNX Runtime loaded in the master, SIGTERM."""
    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.onnx_available(), "onnxruntime is not installed")
    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    from cryptography.fernet import Fernet

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "iris_site.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DEBUG": "0",
        "SECRET_KEY": "gunicorn-exit-" + "x" * 50,
        "IRIS_MASTER_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "127.0.0.1",
        "IRIS_RECALL_SEMANTIC": "hybrid",
        "IRIS_EMBEDDING_BACKEND": "onnx",
        "IRIS_VAR_DIR": str(tmp_path),
    }
    log = tmp_path / "gunicorn.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "iris_site.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--preload",
                "--log-level",
                "info",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while log.read_text().count("Booting worker") < 2:
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=20) == 0, log.read_text()
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    assert log.read_text().count("Worker exiting") == 2


def test_a_worker_timeout_unwinds_the_request_into_a_problem_503() -> None:
    from governance.errors import ServiceUnavailable, problem_exception_handler

    with pytest.raises(ServiceUnavailable) as raised:
        _conf().worker_abort(object())
    response = problem_exception_handler(raised.value, {})
    assert response is not None
    assert response.status_code == 503
    assert response.content_type == "application/problem+json"
    body = response.data
    assert body["code"] == "worker-timeout" and body["status"] == 503
