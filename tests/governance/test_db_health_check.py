"""The per-request connection health check (iris_site/postgresql): no query on a healthy
idle session, and a session the server ended is found and replaced before use."""

from __future__ import annotations

import time

import pytest
from django.db import close_old_connections, connection, connections
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _terminate(pid: int) -> None:
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            for _ in range(100):
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                if cursor.fetchone()[0] == 0:
                    return
                time.sleep(0.05)
        raise AssertionError("the session did not end")
    finally:
        other.close()


def test_a_healthy_idle_session_is_usable_without_a_query(require_postgres, monkeypatch) -> None:
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True
    _backend_pid()

    def no_query(*args: object, **kwargs: object) -> None:
        raise AssertionError("the health check sent a query")

    monkeypatch.setattr(connection.connection, "cursor", no_query)
    monkeypatch.setattr(connection.connection, "execute", no_query)
    assert connection.is_usable() is True


def test_a_session_the_server_ended_is_replaced_before_the_next_request(require_postgres) -> None:
    pid = _backend_pid()
    _terminate(pid)
    assert connection.is_usable() is False

    # What a request's start does (request_started), then a real request on a new session:
    # an unknown token is looked up in the database and refused, not a server error.
    close_old_connections()
    response = Client().get("/api/v1/memories", HTTP_AUTHORIZATION="Bearer unknown-token")
    assert response.status_code == 401, response.content
    assert _backend_pid() != pid
