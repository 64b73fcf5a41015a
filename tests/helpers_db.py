"""Database-wide checks for tests: is a value stored anywhere at all?

Used to prove erasure: write a unique canary, erase, then search every column of every
table (not only the table that was meant to hold it). Works on PostgreSQL and SQLite by
asking the connection's introspection for tables and columns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection

# Column types that cannot hold text; everything else (text, varchar, json, uuid, bytes …)
# is searched through a cast to text.
_NON_TEXT_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "SmallAutoField",
        "BigIntegerField",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "BooleanField",
        "NullBooleanField",
        "FloatField",
        "DecimalField",
        "DateField",
        "DateTimeField",
        "TimeField",
        "DurationField",
    }
)


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def text_columns() -> list[tuple[str, str]]:
    """Every (table, column) that could hold a string, in every table of the database."""
    found: list[tuple[str, str]] = []
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor, include_views=False)):
            for column in connection.introspection.get_table_description(cursor, table):
                try:
                    field_type = connection.introspection.get_field_type(column.type_code, column)
                except KeyError:
                    field_type = "unknown"  # a type Django does not map: search it anyway
                if field_type not in _NON_TEXT_TYPES:
                    found.append((table, column.name))
    return found


def find_in_database(value: str) -> list[tuple[str, str]]:
    """Every (table, column) in which some row's value contains `value` as a substring."""
    if connection.vendor == "postgresql":
        condition = "strpos(CAST({col} AS text), %s) > 0"
    else:
        condition = "instr(CAST({col} AS TEXT), %s) > 0"
    hits: list[tuple[str, str]] = []
    with connection.cursor() as cursor:
        for table, column in text_columns():
            # Table and column names come from introspection, never from input.
            where = condition.format(col=_quote(column))
            sql = f"SELECT 1 FROM {_quote(table)} WHERE {where} LIMIT 1"  # noqa: S608
            cursor.execute(sql, [value])
            if cursor.fetchone() is not None:
                hits.append((table, column))
    return hits


def run_together(work: Callable[[], object], threads: int) -> list[BaseException]:
    """Run `work` in `threads` threads released together, each on its own database
    connection (closed after); returns what they raised."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)
        finally:
            connection.close()

    running = [threading.Thread(target=run) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return errors
