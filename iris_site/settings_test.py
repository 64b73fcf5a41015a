"""Test settings: production settings with test secrets and plain-HTTP cookies."""

from __future__ import annotations

import os

# Tests see the process environment only, never a checkout's development `.env`.
os.environ.setdefault("IRIS_ENV_FILE", os.devnull)
# Jobs run in-process unless a test starts the real worker (which switches eager mode off).
os.environ.setdefault("IRIS_EAGER_TASKS", "1")
os.environ.setdefault("SECRET_KEY", "iris-test-secret-key-not-for-production-0123456789")
# A fixed, public test key (Fernet format); production reads IRIS_MASTER_KEY.
os.environ.setdefault("IRIS_MASTER_KEY", "qDyBtHbH3rYqZfHqWvKp0hJ8p6hVqCk7m1sVx2rF8uA=")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")

from iris_site.settings import *  # noqa: E402,F403

SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"principal": "100000/min"}}  # noqa: F405
# Tasks run in-process so a test sees their effect; the test that covers the real Celery
# worker on Redis switches eager mode off for its own duration.
CELERY_TASK_ALWAYS_EAGER = True
# Each test sees the statistics of its own data (the snapshot's tests turn it on).
IRIS_RECALL_STATS_SECONDS = 0.0
