"""What a server does before its first request, so that request is not the one to pay.

Two halves, because of how gunicorn starts (`--preload`): `before_fork` runs once in the
master, and whatever Python builds there every worker inherits; `worker_ready` runs in
each worker once it is forked (`gunicorn.conf.py`'s `post_worker_init`), for what cannot
be inherited: a database connection. The figures that chose each step are in
docs/performance.md, "A worker's first request".
"""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import sys
import threading
import uuid
from typing import Any

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


def worker_ready(app: Any = None) -> None:
    """Before the worker takes a request: open its Redis connection (the cache and the
    throttle share one pool), open its database connection and have its server process
    read the catalog entries of every table the app uses (a fresh PostgreSQL backend reads
    them at each table's first query), rehearse a recall, then send requests through
    `app` (the worker's WSGI application) that stop before any work
    (`rehearse_requests`). The database connection stays open for `DB_CONN_MAX_AGE`
    seconds, like any request's; gunicorn.conf.py has its successor opened the same way
    (`renew_connection`). A service that cannot answer is left to the first request to
    report."""
    from django.core.cache import cache

    try:
        cache.get("iris:worker-ready")
    except Exception as exc:  # noqa: BLE001  (whatever the cache raises, the request reports)
        logger.warning("worker start: cache not reached: %s", type(exc).__name__)
    try:
        from memory.recall.service import warm_worker

        warm_worker()
    except Exception as exc:  # noqa: BLE001  (recall itself reports a model that fails)
        logger.warning("worker start: query encoder not warmed: %s", type(exc).__name__)
    if not _open_database("worker start") or app is None:
        return
    try:
        rehearse_requests(app)
    except Exception as exc:  # noqa: BLE001  (the first request goes the same way, and reports)
        logger.warning("worker start: requests not rehearsed: %s", type(exc).__name__)


# The database connection `_open_database` last made ready in each thread (Django's
# connections are per thread).
_ready = threading.local()


def _open_database(when: str, *, again: bool = False) -> bool:
    """Open the database connection, read every table's catalog ahead and rehearse a
    recall on it (`again`: on a connection other than the one rehearsed before). Returns
    whether the connection is open (PostgreSQL only; elsewhere there is nothing to do)."""
    from django.apps import apps
    from django.db import DatabaseError, connection

    if connection.vendor != "postgresql":
        return False
    try:
        with connection.cursor() as cursor:
            for model in apps.get_models(include_auto_created=True):
                table = connection.ops.quote_name(model._meta.db_table)
                cursor.execute(f"SELECT * FROM {table} LIMIT 0")  # noqa: S608  (a model's own table name)
    except DatabaseError as exc:
        logger.warning("%s: database not read ahead: %s", when, type(exc).__name__)
        connection.close()
        return False
    _ready.connection = connection.connection
    try:
        from memory.recall.service import rehearse_again, rehearse_latest

        if again:
            rehearse_again()
        else:
            rehearse_latest()
    except Exception as exc:  # noqa: BLE001  (the first recall does the same work, and reports)
        # Its transaction is rolled back; a connection the failure broke is replaced at the
        # first request (Django closes one that errored and no longer answers).
        logger.warning("%s: recall not rehearsed: %s", when, type(exc).__name__)
    return True


def renew_connection(**_: Any) -> None:
    """`request_finished` in a gunicorn worker (gunicorn.conf.py), after Django's own
    handler and the answer's after-work (`governance.after_response`): when the request's end
    left the worker without the connection it had made ready (closed for its age, or
    replaced by one the answer's after-work opened), open and ready the next one now, once
    the answer has gone out, rather than in the next request, which would otherwise pay
    for the new server process's first reads and the statements it prepares anew
    (docs/decisions/recall.md, "A worker's connection renewed ahead"). Not when connections are
    not kept (`DB_CONN_MAX_AGE=0`): each request then opens its own by choice."""
    from django.db import connection

    if connection.vendor != "postgresql" or connection.settings_dict.get("CONN_MAX_AGE") == 0:
        return
    if connection.connection is not None and connection.connection is getattr(
        _ready, "connection", None
    ):
        return
    _open_database("connection renewed", again=True)


# The path the rehearsed requests take, and how many times each is sent: psycopg prepares
# a statement at its third run (`recall.service.prepared_after`).
REHEARSED_PATH = "/api/v1/recall"
REHEARSALS = 3


def rehearse_requests(app: Any) -> list[int]:
    """Send requests through the worker's own WSGI application that stop before doing
    anything, and return their statuses: so the worker's first request is not the one to
    run the middleware, the API's authentication, throttle and validation, and the
    problem answer for the first time in this process (each fills caches that Python,
    Django and DRF build lazily, and copies the pages it writes of what the worker
    shares with the master).

    Two kinds, for the member whose memory changed last (none, none is sent):
    - a bearer token that matches no client: 401, after the token's lookup;
    - a surface of that member's tenant, authenticated in-process (a request object
      built here is the only way in: nothing a client sends can do it), asking for a
      recall with an out-of-range `limit`: 400 after the throttle, the member's lookup
      and the request's validation, exactly as the live bench's floor.

    Nothing is written but the throttle's counter for a client id that exists nowhere
    (it expires with its window), and nothing is logged: these are not clients' errors."""
    from governance.models import SurfaceClient
    from governance.principal import SurfaceUser
    from memory.recall.service import latest_member

    member = latest_member() if hasattr(app, "get_response") else None
    if member is None:
        return []
    body = {
        "userId": str(member.public_id),
        "scope": {"kind": "profile"},
        "query": "",
        "surface": "assistant",
        "context": "general",
        "limit": -1,
    }
    unknown = {"HTTP_AUTHORIZATION": f"Bearer iris_rehearsal-{uuid.uuid4().hex}"}
    client = SurfaceClient(
        id=uuid.uuid4(), tenant_id=member.tenant_id, surface="assistant", destination_tier="local"
    )
    statuses: list[int] = []
    quiet = logging.getLogger("django.request")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        for _ in range(REHEARSALS):
            statuses.append(_send(app, _environ(body, unknown)))
            statuses.append(_send(app, _environ(body, {}), force_user=SurfaceUser(client)))
    finally:
        quiet.setLevel(level)
    return statuses


def _environ(body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    from django.conf import settings

    data = json.dumps(body).encode()
    host = next((h.lstrip(".") for h in settings.ALLOWED_HOSTS if h != "*"), "localhost")
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": REHEARSED_PATH,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": host,
        "SERVER_PORT": "443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": host,
        # Secure by either reading (the scheme, or the proxy's header when one is set):
        # the HTTPS redirect would otherwise answer before the app.
        "wsgi.url_scheme": "https",
        "HTTP_X_FORWARDED_PROTO": "https",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)),
        "wsgi.input": io.BytesIO(data),
        "wsgi.errors": sys.stderr,
        **headers,
    }


def _send(app: Any, environ: dict[str, Any], force_user: Any = None) -> int:
    from django.core.handlers.wsgi import WSGIRequest

    request: Any = WSGIRequest(environ)
    if force_user is not None:
        # DRF's own hook for a request authenticated in-process (its test client uses it).
        request._force_auth_user = force_user
    response = app.get_response(request)
    response.close()
    return int(response.status_code)


class StartTogether:
    """The workers of one start take requests together, once each has warmed up: one that
    took requests while its peers warmed up shared the machine's cores with them
    (docs/performance.md, "A restart's first recalls"). Made in the master before it
    forks; a worker that starts later (one replaced, or added) finds the others in and
    goes on."""

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("fork")
        self.workers = workers
        self._arrived = context.Value("i", 0)
        self._all_in = context.Event()

    def arrive(self, timeout: float) -> bool:
        """Count this worker in and wait, at most `timeout` seconds, for the rest; returns
        whether all came (a worker that failed to start does not hold the others up)."""
        with self._arrived.get_lock():
            self._arrived.value += 1
            if self._arrived.value >= self.workers:
                self._all_in.set()
        return self._all_in.wait(timeout)
