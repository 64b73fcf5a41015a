"""Continuity settings. Each reads a Django setting of the same name when the deployment
sets one, else the environment (`iris_site.env` helpers), else the default."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from iris_site.env import env_int


def _int(name: str, default: int) -> int:
    value = getattr(settings, name, None)
    return int(value) if value is not None else env_int(name, default)


def conflict_window() -> timedelta:
    """Two devices writing one slot within this window conflict (a notice is given)."""
    return timedelta(seconds=_int("IRIS_CONTINUITY_CONFLICT_WINDOW_SECONDS", 10))


def token_ttl() -> timedelta:
    """A token not written for this long expires (the beat job deletes it)."""
    return timedelta(days=_int("IRIS_CONTINUITY_TOKEN_TTL_DAYS", 30))


def expiry_batch() -> int:
    return _int("IRIS_CONTINUITY_EXPIRY_BATCH", 1000)


def read_limit_max() -> int:
    return _int("IRIS_CONTINUITY_READ_LIMIT_MAX", 50)
