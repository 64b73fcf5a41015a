"""Django's Redis cache, with one client per connection pool instead of one per call.

Django's `RedisCacheClient.get_client` builds a new `redis.Redis` for every cache call,
and building one fills its table of reply callbacks: work repeated by every throttled API
request (docs/performance.md, "The cache client"). A `redis.Redis` is safe to share
between threads, and its pool reconnects in a forked worker, so each pool keeps one.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient


class RedisCacheClient(DjangoRedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        django: Any = self  # the parent's private helpers, which the type stubs omit
        pool = django._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = django._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
