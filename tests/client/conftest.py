"""The Python client against a live Iris: pytest-django's live server (a real HTTP server
in a thread, on this run's database, PostgreSQL when DATABASE_URL is set) and a surface
client registered the way `manage.py create_surface_client` registers one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from iris_client import IrisClient


@dataclass
class Recorder:
    """What went over the wire, and every wait the client took between tries."""

    responses: list[httpx.Response] = field(default_factory=list)
    sent_keys: list[str | None] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    def on_request(self, request: httpx.Request) -> None:
        self.sent_keys.append(request.headers.get("Idempotency-Key"))

    def on_response(self, response: httpx.Response) -> None:
        self.responses.append(response)

    def statuses(self) -> list[int]:
        return [r.status_code for r in self.responses]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def user_id(member) -> str:
    return str(member.public_id)


@pytest.fixture
def iris(live_server, surface_token, recorder) -> Iterator[IrisClient]:
    import time

    def sleep(seconds: float) -> None:
        recorder.waits.append(seconds)
        time.sleep(seconds)

    http = httpx.Client(
        timeout=30.0,
        event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]},
    )
    with IrisClient(live_server.url, surface_token, http=http, sleep=sleep) as client:
        yield client
