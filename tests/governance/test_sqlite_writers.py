"""Concurrent writers on SQLite wait for each other instead of failing with "database is
locked" (issue 19, finding 11): the SQLite options of iris_site/settings.py, on a file
database, with threads that each read and then write in one transaction, as the services
do (forget, resume: read the entry, then write its next revision)."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.db import connections, transaction

WRITERS = 4


@pytest.fixture
def sqlite_file(tmp_path, django_db_blocker):
    alias = "sqlite_writers"
    config = {
        **connections.settings["default"],
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(tmp_path / "writers.sqlite3"),
        "OPTIONS": dict(settings.SQLITE_OPTIONS),
        "CONN_MAX_AGE": 0,
    }
    connections.settings[alias] = config
    with django_db_blocker.unblock():
        with connections[alias].cursor() as cursor:
            cursor.execute("CREATE TABLE revisions (n INTEGER PRIMARY KEY, writer INTEGER)")
        connections[alias].close()
        yield alias
    del connections.settings[alias]


def test_the_sqlite_settings_begin_transactions_immediately() -> None:
    assert settings.SQLITE_OPTIONS["transaction_mode"] == "IMMEDIATE"
    assert settings.SQLITE_OPTIONS["timeout"] >= 5


def test_concurrent_writers_on_sqlite_wait_instead_of_failing(
    sqlite_file, django_db_blocker
) -> None:
    alias = sqlite_file
    start = threading.Barrier(WRITERS)
    errors: list[str] = []

    def writer(number: int) -> None:
        connection = connections[alias]  # one connection per thread
        try:
            start.wait()
            for _ in range(3):
                with transaction.atomic(using=alias), connection.cursor() as cursor:
                    cursor.execute("SELECT coalesce(max(n), 0) FROM revisions")
                    (last,) = cursor.fetchone()
                    time.sleep(0.02)  # the others read meanwhile
                    cursor.execute("INSERT INTO revisions VALUES (%s, %s)", [last + 1, number])
        except Exception as exc:  # noqa: BLE001 - the failure is what this test looks for
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    with django_db_blocker.unblock():
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT count(*), max(n) FROM revisions")
            count, last = cursor.fetchone()
        connections[alias].close()
    assert errors == []
    assert (count, last) == (WRITERS * 3, WRITERS * 3)  # every write landed, none lost
