"""iris_site/warm.py: what a server does before its first request. The master builds what
Python and Django build lazily, and leaves no database connection for the workers to
share; each worker opens its own connections and reads its tables ahead."""

from __future__ import annotations

import importlib
import logging
import queue

import pytest
from django.apps import apps
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, clear_url_caches, get_resolver

from iris_site import warm


def _patterns(resolver: URLResolver):
    for entry in resolver.url_patterns:
        yield entry
        if isinstance(entry, URLResolver):
            yield from _patterns(entry)


@pytest.mark.django_db(transaction=True)
def test_loading_the_wsgi_app_leaves_no_database_connection_open(require_postgres) -> None:
    # gunicorn --preload loads it in the master before forking: a connection left open
    # there would be shared by every worker.
    import iris_site.wsgi

    connection.ensure_connection()
    importlib.reload(iris_site.wsgi)
    assert callable(iris_site.wsgi.application)
    assert connection.connection is None


@pytest.mark.django_db
def test_before_fork_compiles_every_url_pattern() -> None:
    clear_url_caches()  # a resolver another test populated would not populate again
    resolver = get_resolver()
    patterns = list(_patterns(resolver))
    for entry in patterns:
        entry.pattern.__dict__.pop("regex", None)
    warm.before_fork()
    compiled = [entry for entry in patterns if "regex" in entry.pattern.__dict__]
    assert len(compiled) == len(patterns)
    assert any(isinstance(entry, URLPattern) for entry in compiled)


@pytest.mark.django_db(transaction=True)
def test_worker_ready_reads_every_table_ahead(require_postgres) -> None:
    connection.close()
    with CaptureQueriesContext(connection) as queries:
        warm.worker_ready()
    read = {q["sql"] for q in queries.captured_queries}
    tables = {m._meta.db_table for m in apps.get_models(include_auto_created=True)}
    ahead = {f'SELECT * FROM "{table}" LIMIT 0' for table in tables}
    assert ahead <= read
    # Then the change log is asked whom to rehearse recall for (no one with memory here):
    # nothing else is read, nothing written.
    rest = read - ahead
    assert "SELECT member_id FROM memory_recallchange ORDER BY noted_at DESC LIMIT 1" in rest
    assert all(sql.startswith("SELECT ") for sql in rest), rest
    assert connection.connection is not None  # kept for the first request


@pytest.mark.django_db(transaction=True)
def test_worker_ready_rehearses_recall(require_postgres, monkeypatch) -> None:
    from memory.recall import service as recall_service

    ran: list[bool] = []
    monkeypatch.setattr(recall_service, "rehearse_latest", lambda: ran.append(True) or True)
    warm.worker_ready()
    assert ran == [True]


@pytest.mark.django_db(transaction=True)
def test_a_failed_rehearsal_is_left_to_the_first_recall(
    require_postgres, monkeypatch, caplog
) -> None:
    from memory.recall import service as recall_service

    def fail() -> bool:
        raise OperationalError("server closed the connection")

    monkeypatch.setattr(recall_service, "rehearse_latest", fail)
    with caplog.at_level(logging.WARNING, logger="iris.warm"):
        warm.worker_ready()
    assert [r.getMessage() for r in caplog.records] == [
        "worker start: recall not rehearsed: OperationalError"
    ]
    # What was read ahead stays with the connection, which is left open and usable.
    assert connection.connection is not None and connection.is_usable()
    assert not connection.in_atomic_block


@pytest.fixture
def renewing(monkeypatch):
    """`renew_connection` on `request_finished`, as gunicorn.conf.py connects it in a
    worker, with the recall rehearsals it asks for counted."""
    from django.core.signals import request_finished

    from memory.recall import service as recall_service

    rehearsed: list[str] = []
    monkeypatch.setattr(recall_service, "rehearse_again", lambda: rehearsed.append("again"))
    monkeypatch.setattr(recall_service, "rehearse_latest", lambda: rehearsed.append("first"))
    request_finished.connect(warm.renew_connection, dispatch_uid="test-renew")
    try:
        yield rehearsed
    finally:
        request_finished.disconnect(dispatch_uid="test-renew")


def _catalog_reads(queries: CaptureQueriesContext) -> int:
    return sum(q["sql"].endswith(" LIMIT 0") for q in queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_a_connection_closed_for_its_age_is_renewed_once_the_answer_is_out(
    require_postgres, renewing
) -> None:
    from django.core.signals import request_finished

    warm.worker_ready()
    assert renewing == ["first"]
    first = connection.connection
    request_finished.send(sender=None)  # young: Django keeps it, and so does the renewal
    assert connection.connection is first and renewing == ["first"]
    # Past DB_CONN_MAX_AGE: Django's own handler closes it at the request's end, then the
    # renewal opens the next one, reads the catalog ahead and rehearses recall on it.
    connection.close_at = 0.0
    with CaptureQueriesContext(connection) as queries:
        request_finished.send(sender=None)
    assert connection.connection is not None and connection.connection is not first
    assert connection.is_usable()
    assert _catalog_reads(queries) == len(apps.get_models(include_auto_created=True))
    assert renewing == ["first", "again"]
    request_finished.send(sender=None)  # the renewed one is ready: nothing more
    assert renewing == ["first", "again"]


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_after_work_opened_is_readied_too(require_postgres, renewing) -> None:
    warm.worker_ready()
    connection.close()
    connection.ensure_connection()  # as the answer's after-work would, lazily
    warm.renew_connection()
    assert renewing == ["first", "again"]


@pytest.mark.django_db(transaction=True)
def test_each_thread_readies_its_own_connection_once(require_postgres, renewing) -> None:
    # Django's connections are per thread (a gthread worker serves requests on several):
    # another thread's connection is readied at its first request's end, then left alone,
    # and so is this thread's.
    import threading

    from django.db import connections

    warm.worker_ready()
    mine = connection.connection

    def serve_two() -> None:
        try:
            warm.renew_connection()
            warm.renew_connection()
        finally:
            connections.close_all()

    other = threading.Thread(target=serve_two)
    other.start()
    other.join()
    warm.renew_connection()
    assert renewing == ["first", "again"]
    assert connection.connection is mine


@pytest.mark.django_db(transaction=True)
def test_connections_not_kept_are_not_renewed(require_postgres, renewing, monkeypatch) -> None:
    from django.core.signals import request_finished

    warm.worker_ready()
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.close_at = 0.0
    request_finished.send(sender=None)
    assert connection.connection is None  # closed by Django, left closed
    assert renewing == ["first"]


def test_worker_ready_leaves_an_unreachable_database_to_the_first_request(
    require_postgres, monkeypatch, caplog
) -> None:
    def refuse() -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(connection, "cursor", refuse)
    with caplog.at_level(logging.WARNING, logger="iris.warm"):
        warm.worker_ready()
    assert [r.getMessage() for r in caplog.records] == [
        "worker start: database not read ahead: OperationalError"
    ]


def test_worker_ready_runs_the_query_encoder_once_in_the_worker(settings, monkeypatch) -> None:
    # A forked worker's first encode paid for the model's first run in that process, and
    # its first hybrid recall for starting the helper thread: the worker does both first.
    from memory.recall import service
    from memory.recall.ranking import embedding
    from tests.conftest import need_service

    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    monkeypatch.setattr(embedding, "_prefetcher", None)
    encoder = embedding.default_encoder()
    encoder.clear_cache()
    monkeypatch.setattr(connection, "vendor", "sqlite")  # stop before the table reads
    warm.worker_ready()
    assert embedding._prefetcher is not None  # noqa: SLF001  (the thread recall uses)
    assert encoder.cache_len == 1
    assert service.warm_worker() is True


def test_a_worker_of_a_lexical_ranker_warms_no_encoder(settings, monkeypatch) -> None:
    from memory.recall import service
    from memory.recall.ranking import embedding

    settings.IRIS_RECALL_SEMANTIC = "lexical"
    monkeypatch.setattr(embedding, "_prefetcher", None)
    assert service.warm_worker() is False
    assert embedding._prefetcher is None  # noqa: SLF001


def test_a_failing_encoder_is_left_to_the_first_recall(settings, monkeypatch, caplog) -> None:
    from memory.recall import service

    def fail() -> bool:
        raise RuntimeError("model broke")

    monkeypatch.setattr(service, "warm_worker", fail)
    monkeypatch.setattr(connection, "vendor", "sqlite")  # stop before the table reads
    with caplog.at_level(logging.WARNING, logger="iris.warm"):
        warm.worker_ready()
    assert "worker start: query encoder not warmed: RuntimeError" in [
        r.getMessage() for r in caplog.records
    ]


def _write_one(surface_api, member) -> None:
    from tests.factories import payload

    response = surface_api.post(
        "/api/v1/memories", payload(member, body="I keep bees on the roof"), format="json"
    )
    assert response.status_code == 201, response.content


@pytest.mark.django_db(transaction=True)
def test_rehearsed_requests_stop_before_any_work(
    require_postgres, ready, surface_api, settings, caplog
) -> None:
    from django.core.handlers.wsgi import WSGIHandler

    from governance.models import AuditEvent, SurfaceClient
    from memory.models import MemoryEntry

    settings.IRIS_RECALL_SNAPSHOT = True
    _write_one(surface_api, ready)
    audit = AuditEvent.objects.count()
    usage = list(MemoryEntry.objects.values_list("revision_id", "reference_count"))
    clients = SurfaceClient.objects.count()
    quiet = logging.getLogger("django.request")
    level = quiet.level
    with caplog.at_level(logging.DEBUG):
        statuses = warm.rehearse_requests(WSGIHandler())
    # An unknown token, then the floor: validation after the member's lookup. Each three
    # times, so the driver prepares their statements.
    assert statuses == [401, 400] * warm.REHEARSALS
    assert AuditEvent.objects.count() == audit
    assert list(MemoryEntry.objects.values_list("revision_id", "reference_count")) == usage
    assert SurfaceClient.objects.count() == clients  # the in-process client is never saved
    assert not [r for r in caplog.records if r.name == "django.request"]
    assert quiet.level == level


@pytest.mark.django_db(transaction=True)
def test_no_request_is_rehearsed_without_a_member_or_a_django_app(
    require_postgres, ready, surface_api, settings
) -> None:
    from django.core.handlers.wsgi import WSGIHandler

    settings.IRIS_RECALL_SNAPSHOT = True
    assert warm.rehearse_requests(WSGIHandler()) == []  # the change log is empty
    _write_one(surface_api, ready)
    assert warm.rehearse_requests(lambda environ, start_response: []) == []


@pytest.mark.django_db(transaction=True)
def test_worker_ready_rehearses_requests_through_the_workers_app(
    require_postgres, monkeypatch, caplog
) -> None:
    app = object()
    sent: list[object] = []
    monkeypatch.setattr(warm, "rehearse_requests", lambda a: sent.append(a) or [])
    warm.worker_ready(app)
    assert sent == [app]

    def fail(_: object) -> list[int]:
        raise OperationalError("server closed the connection")

    monkeypatch.setattr(warm, "rehearse_requests", fail)
    with caplog.at_level(logging.WARNING, logger="iris.warm"):
        warm.worker_ready(app)
    assert [r.getMessage() for r in caplog.records] == [
        "worker start: requests not rehearsed: OperationalError"
    ]


def _arrive_later(together: warm.StartTogether, go, done, timeout: float) -> None:
    go.wait()
    done.put(together.arrive(timeout))


def test_workers_of_one_start_take_requests_together() -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    together = warm.StartTogether(2)
    go, done = context.Event(), context.Queue()
    first = context.Process(target=_arrive_later, args=(together, go, done, 30.0))
    first.start()
    try:
        go.set()
        # The first worker in waits for the second: nothing comes back while it is alone.
        with pytest.raises(queue.Empty):
            done.get(timeout=0.5)
        assert first.is_alive()
        assert together.arrive(30.0) is True  # the second worker: both go on
        assert done.get(timeout=30) is True
    finally:
        first.join(timeout=30)
    # A worker started later (a replacement) does not wait.
    assert together.arrive(0.0) is True


def test_a_worker_whose_peers_never_come_goes_on_after_the_timeout() -> None:
    together = warm.StartTogether(3)
    assert together.arrive(0.05) is False
    assert together.arrive(0.05) is False
    assert together.arrive(0.05) is True  # the third: all in
