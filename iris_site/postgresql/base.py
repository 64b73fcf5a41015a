"""Django's PostgreSQL backend with a health check that costs no round trip.

With CONN_HEALTH_CHECKS Django asks `is_usable` once per request before first use, and the
stock check sends `SELECT 1`: one more round trip on every request, the write path's
eleventh (docs/performance.md, "Write throughput"). An idle session has nothing to say,
so a readable socket means the server has spoken on its own: a shutdown or termination
notice, or the end of the stream. Then the connection is dropped and a new one opened,
as the stock check would. A dead peer that sent nothing is found by the first query, as
without health checks.
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.postgresql import base
from django.db.backends.utils import CursorWrapper
from psycopg.pq import TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        if conn.info.transaction_status != TransactionStatus.IDLE:
            # Mid-transaction or in an unknown state: ask the server, as Django does.
            return super().is_usable()
        try:
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    _kept: Any = None

    def kept_cursor(self) -> CursorWrapper:
        """One cursor kept open for the hot statements of a request (governance.plainsql).

        Opening a cursor for each statement and closing it after (`connection.cursor()`)
        was a third of the client's CPU for a small indexed read; this one is made once
        per server session and reused. Statements still go through Django's wrapper
        (execute wrappers, error translation); with queries logged (DEBUG, a test
        capturing them) the usual logging cursor is handed out instead.
        """
        if self.queries_logged:
            return self.cursor()
        # What `cursor()` does first: the once-a-request health check, then connecting.
        self.close_if_health_check_failed()
        self.ensure_connection()
        kept = self._kept
        if kept is None or kept.cursor.closed or kept.cursor.connection is not self.connection:
            with self.wrap_database_errors:
                kept = self._kept = _KeptCursor(self.create_cursor(), self)
        return kept


class _KeptCursor(CursorWrapper):
    def __exit__(self, type, value, traceback) -> None:
        # Left open for the next statement; its rows are dropped by the next execute.
        return None
