"""Fixtures for events: a real HTTP receiver on 127.0.0.1, in a thread, and webhook
settings that allow it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)
    # Status codes to answer with, in order; 200 once the list is used up.
    statuses: list[int] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state.requests.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/iris"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def webhook_settings(settings):
    settings.IRIS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1", ".example.com"]
    settings.IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    settings.IRIS_WEBHOOK_TIMEOUT_SECONDS = 5.0
    settings.IRIS_WEBHOOK_MAX_ATTEMPTS = 3
    settings.IRIS_WEBHOOK_RETRY_SECONDS = 30.0
    return settings
