"""Webhook settings, read from Django settings (iris_site/settings.py reads the environment)."""

from __future__ import annotations

from django.conf import settings

from events.rules import RetryPolicy


def allowed_hosts() -> tuple[str, ...]:
    return tuple(settings.IRIS_WEBHOOK_ALLOWED_HOSTS)


def http_loopback() -> bool:
    return bool(settings.IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK)


def timeout_seconds() -> float:
    return float(settings.IRIS_WEBHOOK_TIMEOUT_SECONDS)


def retry_policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max(1, int(settings.IRIS_WEBHOOK_MAX_ATTEMPTS)),
        first_delay=float(settings.IRIS_WEBHOOK_RETRY_SECONDS),
    )
