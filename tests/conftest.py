"""Shared fixtures: personas, API clients, and the rules for real services in tests."""

from __future__ import annotations

import os
import shutil

import pytest
from django.conf import settings
from django.db import connection
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from governance import append_only
from governance.audit import Actor

# The evaluation suites' session summary (tests/evals/metrics.py): hooks this file carries
# because every run, and the controller of `-n 2`, loads it.
from tests.evals.metrics import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401

SYSTEM = Actor("system", "tests")

# Property tests: no per-example deadline (a shared CI machine is slow at times), and in CI
# (IRIS_REQUIRE_SERVICES=1) a derandomised run, so a red build is reproducible; run locally
# without it to keep exploring new examples.
hypothesis_settings.register_profile("iris", deadline=None)
hypothesis_settings.register_profile("iris-ci", deadline=None, derandomize=True)
hypothesis_settings.load_profile(
    "iris-ci" if os.environ.get("IRIS_REQUIRE_SERVICES") == "1" else "iris"
)


def need_service(available: bool, reason: str) -> None:
    """Skip with a printed reason, or fail when CI demands every service."""
    if available:
        return
    if settings.IRIS_REQUIRE_SERVICES:
        pytest.fail(f"IRIS_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


def pytest_collection_modifyitems(config, items):
    # Tests that need a service carry its marker, so a run can select or deselect them.
    for item in items:
        for fixture, marker in (
            ("require_postgres", "postgres"),
            ("require_redis", "redis"),
            ("chromium_path", "browser"),
        ):
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)


@pytest.fixture
def require_postgres() -> None:
    need_service(connection.vendor == "postgresql", "PostgreSQL is not configured (DATABASE_URL)")


@pytest.fixture
def require_redis() -> str:
    need_service(bool(settings.REDIS_URL), "Redis is not configured (REDIS_URL)")
    return settings.REDIS_URL


@pytest.fixture
def chromium_path() -> str:
    path = os.environ.get("IRIS_CHROMIUM", "/usr/bin/chromium")
    need_service(shutil.which(path) is not None, f"Chromium is not installed at {path}")
    return path


@pytest.fixture(autouse=True, scope="session")
def _ledger_flush_allowed():
    """Transactional tests end with a flush (TRUNCATE/DELETE) that the append-only triggers
    would refuse; lift the triggers for the flush only, inside the test database."""
    ops_class = type(connection.ops)
    original = ops_class.execute_sql_flush

    def flush(self, sql_list):
        tables = dict(append_only.LEDGER_TABLES)
        for table in tables:
            append_only.uninstall(self.connection, table)
        try:
            return original(self, sql_list)
        finally:
            for table, allow_delete in tables.items():
                append_only.install(self.connection, table, allow_delete=allow_delete)

    ops_class.execute_sql_flush = flush
    yield
    ops_class.execute_sql_flush = original


@pytest.fixture(autouse=True, scope="session")
def _log_guard_handler():
    from tests import log_guard

    return log_guard.install()


@pytest.fixture(autouse=True)
def _no_secret_or_body_in_logs(_log_guard_handler):
    """Every test: no planted text (memory bodies the factories build, canaries) and no
    secret in any log line, as the configured handlers would write it (tests/log_guard.py)."""
    from tests import log_guard

    log_guard.start(_log_guard_handler)
    yield
    found = log_guard.findings(_log_guard_handler)
    assert not found, f"log lines of this test gave away: {found}"


@pytest.fixture(autouse=True)
def _checkpoints_in_tmp(tmp_path, settings):
    settings.IRIS_AUDIT_CHECKPOINT_PATH = tmp_path / "audit-checkpoints.jsonl"


@pytest.fixture(autouse=True)
def _no_recall_snapshots_between_tests(settings):
    # A worker's member snapshots (memory.recall.snapshot) belong to one test's data.
    from memory.recall import service as recall_service
    from memory.recall import snapshot as recall_snapshot

    recall_snapshot.clear()
    # No look from another thread after a test's writes: the tests of it turn it on
    # (tests/memory/test_recall_warm.py).
    settings.IRIS_RECALL_TRAIL_SECONDS = 0
    settings.IRIS_RECALL_FOLLOW_SECONDS = 0
    # As in a worker that has rehearsed recall already (tests/memory/test_recall_rehearsal.py
    # starts from one that has not), so no test's first write runs a rehearsal.
    recall_service._REHEARSED[:] = [True]
    yield
    recall_snapshot.clear()  # and the worker's own thread rests, its connection closed


# -- personas ------------------------------------------------------------------------------


@pytest.fixture
def tenant(db):
    from governance.services import tenant_create

    return tenant_create(actor=SYSTEM, slug="acme", name="Acme")


@pytest.fixture
def other_tenant(db):
    from governance.services import tenant_create

    return tenant_create(actor=SYSTEM, slug="globex", name="Globex")


def _user(tenant, username: str, role: str = "member"):
    from governance.services import user_create

    return user_create(
        actor=SYSTEM, tenant=tenant, username=username, role=role, password="pw-" + username
    ).user


@pytest.fixture
def member(tenant):
    return _user(tenant, "ada")


@pytest.fixture
def ready(member):
    """The member, ready to write durable memory: processing and storage consent given."""
    from tests.factories import grant_storage

    grant_storage(member)
    return member


@pytest.fixture
def other_member(tenant):
    return _user(tenant, "grace")


@pytest.fixture
def foreign_member(other_tenant):
    return _user(other_tenant, "linus")


@pytest.fixture
def make_operator(tenant):
    def make(role: str, of_tenant=None):
        return _user(of_tenant or tenant, f"op-{role}-{(of_tenant or tenant).slug}", role)

    return make


@pytest.fixture
def surface_token(tenant) -> str:
    """The tenant's assistant client, registered as running its model locally: the tests
    that recall through it ask for the local tier, which a cloud client may not."""
    from governance.services import surface_client_create

    return surface_client_create(
        actor=SYSTEM, tenant=tenant, surface="assistant", destination_tier="local"
    ).token


@pytest.fixture
def cloud_surface_token(tenant) -> str:
    """An assistant client of the tenant whose model runs in the cloud."""
    from governance.services import surface_client_create

    return surface_client_create(
        actor=SYSTEM, tenant=tenant, surface="assistant", destination_tier="cloud"
    ).token


@pytest.fixture
def foreign_surface_token(other_tenant) -> str:
    from governance.services import surface_client_create

    return surface_client_create(actor=SYSTEM, tenant=other_tenant, surface="assistant").token


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def surface_api(surface_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {surface_token}")
    return client


@pytest.fixture
def cloud_surface_api(cloud_surface_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {cloud_surface_token}")
    return client


@pytest.fixture
def member_api(member) -> APIClient:
    client = APIClient()
    client.force_login(member)
    return client
