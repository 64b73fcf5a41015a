"""The thin hand-written part: one httpx client, the bearer token, an Idempotency-Key on
every mutating call, retries with backoff on 429 and 503, and problem+json as exceptions.
The generated operations (`_generated.py`) call `_call` and nothing else."""

from __future__ import annotations

import email.utils
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from iris_client._model import DecodeError, Model, encode
from iris_client.errors import TransportError, problem_from

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RETRY_STATUSES = frozenset({429, 503})
# A replay of a key whose first request is still running answers 409 with Retry-After.
RETRY_CODES = frozenset({"idempotency-in-progress"})


@dataclass(frozen=True)
class HeldForApproval:
    """202: the operation waits for the member's approval (Iris's Approvals page); it runs
    when they approve. `approval_id` names the approval."""

    detail: str
    approval_id: str | None = None
    body: dict[str, Any] = field(default_factory=dict)


def retry_after_seconds(value: str | None, *, now: Callable[[], datetime]) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now()).total_seconds(), 0.0)


class Transport:
    """Connection, authentication and the retry policy shared by every operation."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_wait: float = 60.0,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        idempotency_keys: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        headers = {"Accept": "application/json, application/problem+json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._http.headers.update(headers)
        if http is not None:
            self._http.base_url = httpx.URL(base_url)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_wait = max_wait
        self._sleep = sleep
        self._new_key = idempotency_keys

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, attempt: int, response: httpx.Response | None) -> float:
        server = None
        if response is not None:
            server = retry_after_seconds(
                response.headers.get("Retry-After"), now=lambda: datetime.now(UTC)
            )
        if server is not None:
            return min(server, self.max_wait)
        # Exponential backoff with full jitter, so clients refused together spread out.
        return random.uniform(0, min(self.backoff * 2**attempt, self.max_wait))  # nosec B311 - backoff jitter

    def _send(
        self, method: str, path: str, *, params: dict[str, Any], json: Any, key: str | None
    ) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    method, path, params=params, json=json, headers=headers
                )
            except httpx.TransportError as exc:
                # Only a request that never reached Iris is retried here: one that did may
                # have run, and a retry without a key would run it again.
                if not isinstance(exc, httpx.ConnectError) or attempt >= self.max_retries:
                    raise TransportError(f"{method} {path}: {exc}") from exc
            else:
                if not self._retryable(response) or attempt >= self.max_retries:
                    return response
            self._sleep(self._wait(attempt, response))
            attempt += 1

    @staticmethod
    def _retryable(response: httpx.Response) -> bool:
        if response.status_code in RETRY_STATUSES:
            return True
        if response.status_code == 409 and "problem" in response.headers.get("content-type", ""):
            body = _json(response)
            return isinstance(body, dict) and body.get("code") in RETRY_CODES
        return False

    def _call(
        self,
        method: str,
        path: str,
        *,
        path_params: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Model | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        responses: Mapping[int, type[Model] | type[bytes] | None],
    ) -> Any:
        if path_params:
            path = path.format(**{k: quote(str(v), safe="") for k, v in path_params.items()})
        params = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        key = None
        if method in MUTATING:
            key = idempotency_key or self._new_key()
        json = encode(body) if body is not None else None
        response = self._send(method, path, params=params, json=json, key=key)
        status = response.status_code
        if status >= 400:
            raise problem_from(
                status,
                _json(response),
                retry_after=retry_after_seconds(
                    response.headers.get("Retry-After"), now=lambda: datetime.now(UTC)
                ),
            )
        expected = responses.get(status)
        if expected is bytes:
            return response.content
        data = _json(response) if response.content else None
        if isinstance(expected, type) and issubclass(expected, Model):
            return expected.from_dict(data if isinstance(data, dict) else {})
        if status == 202 and isinstance(data, dict) and data.get("code") == "held-for-approval":
            return HeldForApproval(
                detail=str(data.get("detail", "")),
                approval_id=data.get("approvalId"),
                body=data,
            )
        if status not in responses:
            raise DecodeError(f"{method} {path}: unexpected status {status}")
        return data


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}
