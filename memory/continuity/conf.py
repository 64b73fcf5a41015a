"""Continuity settings, read from Django settings (iris_site/settings.py reads them from the
environment)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings


def _int(name: str) -> int:
    return int(getattr(settings, name))


def conflict_window() -> timedelta:
    """Two devices writing one slot within this window conflict (a notice is given)."""
    return timedelta(seconds=_int("IRIS_CONTINUITY_CONFLICT_WINDOW_SECONDS"))


def token_ttl() -> timedelta:
    """A token not written for this long expires (the beat job deletes it)."""
    return timedelta(days=_int("IRIS_CONTINUITY_TOKEN_TTL_DAYS"))


def expiry_batch() -> int:
    return _int("IRIS_CONTINUITY_EXPIRY_BATCH")


def read_limit_max() -> int:
    return _int("IRIS_CONTINUITY_READ_LIMIT_MAX")
