"""Webhook rules in plain Python: which URLs an endpoint may have, how a delivery is
signed, and when a failed one is tried again (docs/decisions/events.md).

No Django here: the settings arrive as arguments, so every rule is tested on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from governance.rules import RuleError

SIGNATURE_VERSION = "v1"
MAX_URL_LENGTH = 500
LOOPBACK_NAMES = frozenset({"localhost"})


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Is `host` on the allow-list? An entry is a host name (exact) or `.example.com`
    (that domain and every name under it), as Django's ALLOWED_HOSTS reads them."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        entry = entry.strip().lower().rstrip(".")
        if not entry:
            continue
        if entry.startswith("."):
            if host == entry[1:] or host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str


def check_url(url: object, *, allowed_hosts: Iterable[str], http_loopback: bool) -> Target:
    """The endpoint URL, if Iris may post to it; RuleError (field `url`) otherwise.

    https only; plain http only to a loopback host and only when the deployment says so
    (tests, development). No user name or password in the URL (a secret in a column that
    is not encrypted), no fragment. The host must be on the allow-list.
    """
    if not isinstance(url, str) or not url.strip():
        raise RuleError("url", "required", "A webhook needs a URL.")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise RuleError("url", "max_length", f"A webhook URL is at most {MAX_URL_LENGTH} long.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise RuleError("url", "invalid", "Not a URL.") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in {"https", "http"} or not host:
        raise RuleError("url", "invalid", "Not an http(s) URL.", allowed=("https",))
    if parts.username or parts.password:
        raise RuleError("url", "no-credentials", "Put no user name or password in the URL.")
    if parts.fragment:
        raise RuleError("url", "no-fragment", "A webhook URL has no fragment.")
    if parts.scheme == "http" and not (http_loopback and _is_loopback(host)):
        raise RuleError(
            "url", "https-required", "A webhook URL must use https.", allowed=("https",)
        )
    if port is not None and not 0 < port < 65536:
        raise RuleError("url", "invalid", "Not a valid port.")
    if not host_allowed(host, allowed_hosts):
        raise RuleError(
            "url",
            "host-not-allowed",
            "This host is not on the webhook allow-list (IRIS_WEBHOOK_ALLOWED_HOSTS).",
        )
    return Target(url=url, scheme=parts.scheme, host=host)


def check_event_types(values: object, known: Iterable[str]) -> tuple[str, ...]:
    """The event types an endpoint subscribes to: known names, at least one, no repeats."""
    known = tuple(known)
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    if not isinstance(values, list | tuple) or not values:
        raise RuleError("eventTypes", "required", "Name at least one event type.", known)
    out: list[str] = []
    for value in values:
        name = str(value).strip()
        if name not in known:
            raise RuleError("eventTypes", "choice", "Not an event type Iris sends.", known)
        if name not in out:
            out.append(name)
    return tuple(out)


# -- signing -------------------------------------------------------------------------------


def signed_message(timestamp: int, body: bytes) -> bytes:
    """What the signature covers: the Unix timestamp, a full stop, the exact body bytes."""
    return str(timestamp).encode("ascii") + b"." + body


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The `Iris-Signature` header value: `v1=` and the hex HMAC-SHA256."""
    mac = hmac.new(secret.encode("utf-8"), signed_message(timestamp, body), hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def verify(
    secret: str, *, timestamp: str, header: str, body: bytes, now: int, tolerance: int = 300
) -> bool:
    """What a consumer does (docs/decisions/events.md): recompute, compare in constant
    time, refuse a timestamp more than `tolerance` seconds away from its clock."""
    try:
        sent_at = int(timestamp)
    except ValueError:
        return False
    if abs(now - sent_at) > tolerance:
        return False
    expected = signature(secret, sent_at, body)
    return any(hmac.compare_digest(expected, part.strip()) for part in header.split(","))


# -- retries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    first_delay: float = 30.0
    factor: float = 2.0
    max_delay: float = 3600.0

    def delay_after(self, attempt: int) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based); None: give up."""
        if attempt < 1:
            raise ValueError("attempts count from 1")
        if attempt >= self.max_attempts:
            return None
        return min(self.first_delay * self.factor ** (attempt - 1), self.max_delay)

    def schedule(self) -> tuple[float, ...]:
        """Every wait between attempts, in order (for the docs and the tests)."""
        out = []
        attempt = 1
        while (delay := self.delay_after(attempt)) is not None:
            out.append(delay)
            attempt += 1
        return tuple(out)
