"""The beat and worker path: the schedule names registered tasks, and a real Celery worker
on the Redis broker publishes a committed event and posts it to a receiver."""

from __future__ import annotations

import json
import os

from django.db import connection

from events.services import webhook_create
from governance.principal import Principal
from iris_site.beat import BEAT_SCHEDULE
from tests.factories import written
from tests.helpers_celery import celery_worker

# Its own queue: the governance worker test may run beside it on the same broker.
QUEUE = "iris-events-test"


def test_the_beat_schedule_runs_the_registered_dispatch_task() -> None:
    from iris_site.celery import app

    app.loader.import_default_modules()
    assert BEAT_SCHEDULE["events-dispatch"]["task"] == "events.tasks.dispatch"
    assert {"events.tasks.dispatch", "events.tasks.deliver"} <= set(app.tasks)


def test_a_real_worker_delivers_a_committed_event(
    require_postgres,
    require_redis,
    transactional_db,
    ready,
    receiver,
    webhook_settings,
    tmp_path,
    monkeypatch,
) -> None:
    from events.tasks import dispatch
    from iris_site.celery import app

    entry = written(ready, "I take my coffee black")  # committed: no test transaction here
    # Declared after the write, so nothing was dispatched at its commit: the worker publishes.
    hook = webhook_create(
        principal=Principal.system("tests"),
        tenant=ready.tenant,
        url=receiver.url,
        event_types=["memory.written"],
    )
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "iris_site.settings_test",
        # The worker reads this test's database, where the event was committed.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "IRIS_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK": "1",
    }
    log = tmp_path / "worker.log"
    with celery_worker(env, log, queue=QUEUE):
        assert dispatch.apply_async(queue=QUEUE).get(timeout=90) == 1
    text = log.read_text()
    assert "events.tasks.dispatch" in text and "events.tasks.deliver" in text
    posted = [json.loads(r.body) for r in receiver.requests]
    assert [p["data"]["entryId"] for p in posted] == [str(entry.entry_id)]
    assert receiver.requests[0].headers["iris-signature"].startswith("v1=")
    assert hook.secret not in text
