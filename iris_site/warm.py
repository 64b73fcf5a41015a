"""What a server does before its first request, so that request is not the one to pay.

Two halves, because of how gunicorn starts (`--preload`): `before_fork` runs once in the
master, and whatever Python builds there every worker inherits; `worker_ready` runs in
each worker once it is forked (`gunicorn.conf.py`'s `post_worker_init`), for what cannot
be inherited: a database connection. The figures that chose each step are in
docs/performance.md, "A worker's first request".
"""

from __future__ import annotations

import logging

logger = logging.getLogger("iris.warm")


def before_fork() -> None:
    """Build, in the master, what Django and Python build lazily at first use."""
    # The embedding model (with the hybrid ranker on), then the recall snapshots of the
    # members active within the change log's window, so a restart does not make each of
    # them build one at their next recall on every worker.
    from memory.recall.service import warm_start, warm_up

    warm_up()
    warm_start()

    # The URL patterns with the views they import, every pattern's regular expression
    # (compiled at first match otherwise), and the Redis client library behind the cache
    # and the throttle.
    import redis  # noqa: F401
    from django.apps import apps
    from django.urls import get_resolver

    get_resolver().reverse_dict  # noqa: B018  (populating it compiles every pattern)

    # Each model's field and relation caches, which the first query of a model fills.
    for model in apps.get_models():
        model._meta.get_fields()


def worker_ready() -> None:
    """Before the worker takes a request: open its Redis connection (the cache and the
    throttle share one pool), open its database connection and have its server process
    read the catalog entries of every table the app uses (a fresh PostgreSQL backend reads
    them at each table's first query). The database connection stays open for
    `DB_CONN_MAX_AGE` seconds, like any request's. A service that cannot answer is left to
    the first request to report."""
    from django.apps import apps
    from django.core.cache import cache
    from django.db import DatabaseError, connection

    try:
        cache.get("iris:worker-ready")
    except Exception as exc:  # noqa: BLE001  (whatever the cache raises, the request reports)
        logger.warning("worker start: cache not reached: %s", type(exc).__name__)
    try:
        from memory.recall.service import warm_worker

        warm_worker()
    except Exception as exc:  # noqa: BLE001  (recall itself reports a model that fails)
        logger.warning("worker start: query encoder not warmed: %s", type(exc).__name__)
    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            for model in apps.get_models(include_auto_created=True):
                table = connection.ops.quote_name(model._meta.db_table)
                cursor.execute(f"SELECT * FROM {table} LIMIT 0")  # noqa: S608  (a model's own table name)
    except DatabaseError as exc:
        logger.warning("worker start: database not read ahead: %s", type(exc).__name__)
        connection.close()
        return
    try:
        from memory.recall.service import rehearse_latest

        rehearse_latest()
    except Exception as exc:  # noqa: BLE001  (the first recall does the same work, and reports)
        # Its transaction is rolled back; a connection the failure broke is replaced at the
        # first request (Django closes one that errored and no longer answers).
        logger.warning("worker start: recall not rehearsed: %s", type(exc).__name__)
