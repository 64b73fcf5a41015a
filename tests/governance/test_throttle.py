"""The per-principal rate limit: sliding-window counters, on a fixed clock."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.cache import caches
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from governance.throttle import WindowRateThrottle, estimate, retry_after, window_at

MINUTE = 60


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def throttle_class(rate: str, clock: Clock, key: str) -> type[WindowRateThrottle]:
    class Throttle(WindowRateThrottle):
        def get_cache_key(self, request, view):
            return key

    Throttle.rate = rate
    Throttle.clock = staticmethod(clock)
    return Throttle


def ask(cls: type[WindowRateThrottle]) -> tuple[bool, float | None]:
    throttle = cls()
    allowed = throttle.allow_request(None, None)
    return allowed, throttle.wait()


@pytest.fixture
def key() -> str:
    return f"throttle-test-{uuid.uuid4().hex}"


@pytest.mark.parametrize(
    ("current", "previous", "elapsed", "expected"),
    [
        (1, 0, 0.0, 1.0),  # first request of a quiet minute
        (1, 10, 0.0, 11.0),  # the whole last window still counts at its start
        (1, 10, 30.0, 6.0),  # half of it at mid-window
        (4, 10, 54.0, 5.0),  # a tenth of it near the end
        (7, 0, 59.0, 7.0),
    ],
)
def test_estimate_weighs_the_last_window_by_its_overlap(current, previous, elapsed, expected):
    assert estimate(current, previous, elapsed, MINUTE) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("current", "previous", "elapsed", "limit", "expected"),
    [
        (4, 0, 10.0, 3, 50.0),  # this window is full: wait for the next
        (4, 6, 0.0, 3, 60.0),  # this window alone is at the limit: the next one
        (2, 4, 0.0, 3, 30.0),  # 4*(1-t/60)+1 <= 3 from t=30
        (2, 4, 45.0, 3, 0.0),  # already under it again
    ],
)
def test_retry_after_is_when_the_estimate_falls_to_the_limit(
    current, previous, elapsed, limit, expected
):
    assert retry_after(current, previous, elapsed, MINUTE, limit) == pytest.approx(expected)


def test_window_at_splits_time_into_fixed_windows() -> None:
    assert window_at(600.0, MINUTE) == window_at(600.0, MINUTE)
    at = window_at(61.5, MINUTE)
    assert (at.index, at.elapsed) == (1, pytest.approx(1.5))


def test_refuses_over_the_limit_and_does_not_count_refusals(key) -> None:
    clock = Clock(6000.0)  # the start of a window
    cls = throttle_class("3/min", clock, key)
    assert [ask(cls)[0] for _ in range(3)] == [True, True, True]
    allowed, wait = ask(cls)
    assert not allowed
    assert wait == pytest.approx(60.0)
    # Half a window later the last window's three count as 1.5: one more fits (2.5),
    # a second does not (3.5), however often the refused one is retried.
    clock.at += 90.0
    assert ask(cls)[0] is True
    assert [ask(cls)[0] for _ in range(5)] == [False] * 5
    clock.at += 30.0  # a window on: only the one allowed request of the last counts
    assert [ask(cls)[0] for _ in range(2)] == [True, True]


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.floats(min_value=0.0, max_value=40.0), min_size=1, max_size=60))
def test_never_more_than_the_limit_in_a_fixed_window(gaps) -> None:
    """The estimate is at least this window's count, so no fixed window lets more than the
    limit through, and no sliding window more than twice the limit."""
    clock = Clock(1200.0)
    cls = throttle_class("5/min", clock, f"prop-{uuid.uuid4().hex}")
    allowed_at: list[float] = []
    for gap in gaps:
        clock.at += gap
        if ask(cls)[0]:
            allowed_at.append(clock.at)
    per_window: dict[int, int] = {}
    for t in allowed_at:
        per_window[window_at(t, MINUTE).index] = per_window.get(window_at(t, MINUTE).index, 0) + 1
    assert all(n <= 5 for n in per_window.values())
    for start in allowed_at:
        assert sum(1 for t in allowed_at if start <= t < start + MINUTE) <= 10


def _redis_cache(url: str, prefix: str) -> dict[str, Any]:
    """The project's Redis cache (settings.CACHES), its keys under a prefix of their own."""
    return {
        "default": {
            "BACKEND": "iris_site.cache.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": f"{prefix}-{uuid.uuid4().hex[:8]}",
        }
    }


def test_processes_share_one_count_on_redis(require_redis, key) -> None:
    """Every gunicorn worker counts against one limit: the counter lives in Redis and is
    incremented atomically, and it expires after the window after next."""
    with override_settings(CACHES=_redis_cache(require_redis, "throttle")):
        clock = Clock(6000.0)
        cls = throttle_class("4/min", clock, key)
        first, second = cls(), cls()  # two workers' throttles
        assert first.allow_request(None, None)
        assert second.allow_request(None, None)
        assert [ask(cls)[0] for _ in range(3)] == [True, True, False]
        backend = caches["default"]
        assert backend.get(f"{key}:w100") == 4
        client = backend._cache.get_client(None, write=True)  # noqa: SLF001
        ttl = client.ttl(backend.make_and_validate_key(f"{key}:w100"))
        assert 0 < ttl <= 2 * MINUTE
        backend.delete(f"{key}:w100")


def test_the_cache_keeps_one_redis_client(require_redis) -> None:
    """Each cache call used to build a new `redis.Redis`; the project's backend keeps one
    per connection pool, and it still reads and writes."""
    with override_settings(CACHES=_redis_cache(require_redis, "client")):
        backend = caches["default"]
        first = backend._cache.get_client(None, write=True)  # noqa: SLF001
        assert backend._cache.get_client("k", write=True) is first  # noqa: SLF001
        backend.set("k", 1)
        assert backend.incr("k") == 2
        assert backend.get("k") == 2
        backend.delete("k")
