"""The kept cursor of the PostgreSQL backend (iris_site.postgresql): one per server
session, replaced with the session, and never in the way of query logging."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance import plainsql

pytestmark = pytest.mark.django_db


def _one(cur) -> int:
    cur.execute("SELECT %s::int", [1])
    return cur.fetchone()[0]


def test_one_cursor_serves_every_statement_of_a_session(require_postgres) -> None:
    with plainsql.cursor() as first:
        assert _one(first) == 1
    with plainsql.cursor() as second:
        assert _one(second) == 1
    assert first is second
    assert not second.cursor.closed  # leaving the block does not close it


@pytest.mark.django_db(transaction=True)
def test_a_new_session_gets_a_new_cursor(require_postgres) -> None:
    with plainsql.cursor() as before:
        _one(before)
    connection.close()
    with plainsql.cursor() as after:
        assert _one(after) == 1
    assert after is not before
    assert after.cursor.connection is connection.connection


def test_captured_queries_still_see_plain_sql(require_postgres) -> None:
    with CaptureQueriesContext(connection) as captured:
        with plainsql.cursor() as cur:
            _one(cur)
    assert [q["sql"] for q in captured.captured_queries] == ["SELECT 1::int"]


def test_execute_wrappers_still_see_plain_sql(require_postgres) -> None:
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper), plainsql.cursor() as cur:
        _one(cur)
    assert seen == ["SELECT %s::int"]
