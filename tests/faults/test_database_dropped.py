"""PostgreSQL drops the request's connection mid-request (`pg_terminate_backend` on the
request's own backend, after it inserted the memory and before it committed): the answer
is a clean 503 problem, and nothing of the write stays."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import connection

from governance.models import AuditEvent
from memory.models import MemoryEntry
from tests.faults.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)
PROBLEM = "application/problem+json"
CANARY = "zq-fault my locker code is in the blue notebook"


@contextmanager
def backend_terminated_after(table: str) -> Iterator[dict[str, Any]]:
    """Let the first INSERT into `table` run, then terminate this connection's backend from
    another session before the next statement: the server rolls the transaction back."""
    seen: dict[str, Any] = {"inserted": False, "terminated": False}

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any):
        if seen["inserted"] and not seen["terminated"]:
            seen["terminated"] = True
            pid = connection.connection.info.backend_pid
            with psycopg.connect(database_url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        result = execute(sql, params, many, context)
        # The INSERT may lead the statement or sit in its WITH (rows written along with it).
        if f"INSERT INTO {table.upper()} " in sql.replace('"', "").upper():
            seen["inserted"] = True
        return result

    with connection.execute_wrapper(wrapper):
        yield seen
    connection.close()  # the test's own next query opens a fresh connection


def test_a_write_whose_connection_drops_is_a_503_problem_and_leaves_nothing(
    require_postgres, surface_api, ready
):
    audits = AuditEvent.objects.count()
    with backend_terminated_after(MemoryEntry._meta.db_table) as seen:
        answer = surface_api.post(
            "/api/v1/memories",
            {
                "userId": str(ready.public_id),
                "scope": {"kind": "profile", "userId": str(ready.public_id)},
                "category": "preference",
                "body": CANARY,
                "origin": "user-stated",
            },
            format="json",
        )
    assert seen == {"inserted": True, "terminated": True}, answer.content
    assert answer.status_code == 503
    assert answer["Content-Type"] == PROBLEM
    assert answer["Retry-After"]
    body = answer.json()
    assert body["code"] == "service-unavailable" and body["status"] == 503
    assert CANARY not in answer.content.decode()
    # No partial write: no revision, no audit row of it.
    assert not MemoryEntry.objects.filter(body=CANARY).exists()
    assert AuditEvent.objects.count() == audits

    # The next request gets a fresh connection and works.
    again = surface_api.get("/api/v1/memories", {"userId": str(ready.public_id)})
    assert again.status_code == 200
