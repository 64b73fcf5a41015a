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

from django.db.backends.postgresql import base
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
