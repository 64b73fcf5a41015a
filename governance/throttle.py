"""A rate limit whose cost does not grow with the rate: a sliding window estimated from two
fixed-window counters (this window's and the last one's).

DRF's SimpleRateThrottle keeps a list of every request's time in the cache and reads,
trims and writes it back on each request: its cost grows with the limit (a list of
thousands of times pickled twice a request at API rates), and two processes reading and
writing the same list lose each other's requests. Counters are incremented atomically
(INCR on Redis), so every process counts against one limit, and a request costs one round
trip to Redis whatever the rate.

The estimate weighs the last window's count by how much of it still lies inside the
sliding window: `last * (1 - elapsed / window) + this`. It assumes the last window's
requests were spread evenly, so a burst late in that window is undercounted by at most
that window's count; it never lets more than twice the limit through in any window.

When the cache (Redis) cannot be reached the limit is not applied and the request goes on:
a Redis outage must not take the API down with it (docs/assurance.md, "Faults"). The log
says so at most once a minute per process, and `/api/v1/health` reports Redis unreachable.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis.exceptions
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:  # rest_framework.views loads the auth classes, which load this module
    from rest_framework.request import Request
    from rest_framework.views import APIView


log = logging.getLogger(__name__)
CACHE_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
_WARN_EVERY = 60.0
_warned_at: list[float] = []  # when this process last said the limit is off


def _limit_off(exc: BaseException) -> None:
    now = time.monotonic()
    if not _warned_at or now - _warned_at[0] >= _WARN_EVERY:
        _warned_at[:] = [now]
        log.warning("rate limit not applied: the cache is unreachable (%s)", type(exc).__name__)


@dataclass(frozen=True)
class Window:
    index: int  # which fixed window `now` falls in
    elapsed: float  # seconds since it started


def window_at(now: float, duration: int) -> Window:
    index = math.floor(now / duration)
    return Window(index=index, elapsed=now - index * duration)


def estimate(current: int, previous: int, elapsed: float, duration: int) -> float:
    """Requests in the sliding window ending now, this one included."""
    return previous * (1.0 - elapsed / duration) + current


def retry_after(current: int, previous: int, elapsed: float, duration: int, limit: int) -> float:
    """Seconds until the estimate falls to the limit again (the refused request uncounted)."""
    left = duration - elapsed
    if current - 1 >= limit or previous <= 0:
        # This window alone is full (or the last one is not what holds it): the next one.
        return left
    # previous * (1 - (elapsed + t) / duration) + current - 1 < limit
    wait = duration * (1.0 - (limit - current + 1) / previous) - elapsed
    return min(max(wait, 0.0), left)


def _count(key: str, last_key: str, duration: int) -> tuple[int, int]:
    """Add one to `key`'s counter; (its count, `last_key`'s count)."""
    backend = caches[DEFAULT_CACHE_ALIAS]
    if isinstance(backend, RedisCache):
        key = backend.make_and_validate_key(key)
        last_key = backend.make_and_validate_key(last_key)
        client = backend._cache.get_client(key, write=True)  # noqa: SLF001
        # One round trip: the increment, its expiry (kept through the next window, where it
        # is the last one) and the last window's count.
        pipe = client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, 2 * duration)
        pipe.get(last_key)
        current, _, last = pipe.execute()
        return int(current), int(last or 0)
    backend.add(key, 0, 2 * duration)
    current = backend.incr(key)
    return int(current), int(backend.get(last_key) or 0)


def _uncount(key: str) -> None:
    try:
        caches[DEFAULT_CACHE_ALIAS].decr(key)
    except (ValueError, *CACHE_DOWN):  # expired meanwhile, or the cache went: nothing to undo
        pass


class WindowRateThrottle(SimpleRateThrottle):
    """SimpleRateThrottle's rates and keys, counted by `_count` instead of a history list."""

    clock = staticmethod(time.time)
    # Set by SimpleRateThrottle.__init__ from the rate (both None when there is no rate);
    # the stubs do not declare them.
    num_requests: int | None
    duration: int | None
    # The refused request's (current, previous, elapsed, duration, limit), for `wait`.
    _refused: tuple[int, int, float, int, int] | None = None

    def allow_request(self, request: Request, view: APIView) -> bool:
        limit, duration = self.num_requests, self.duration
        if self.rate is None or limit is None or duration is None:
            return True
        base = self.get_cache_key(request, view)
        if base is None:
            return True
        duration = int(duration)
        at = window_at(self.clock(), duration)
        key = f"{base}:w{at.index}"
        try:
            current, previous = _count(key, f"{base}:w{at.index - 1}", duration)
        except CACHE_DOWN as exc:
            _limit_off(exc)
            return True
        if estimate(current, previous, at.elapsed, duration) <= limit:
            self._refused = None
            return True
        # A refused request does not count: a client that keeps retrying is let in as soon
        # as the window allows, as with the history list.
        _uncount(key)
        self._refused = (current, previous, at.elapsed, duration, limit)
        return False

    def wait(self) -> float | None:
        if self._refused is None:
            return None
        current, previous, elapsed, duration, limit = self._refused
        return retry_after(current, previous, elapsed, duration, limit=limit)
