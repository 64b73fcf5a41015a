"""Work that must wait until the current transaction commits: Celery enqueues, signals
that announce a committed change, the audit seal.

`after_commit(work, *args, **kwargs)` queues `work` on the transaction's commit; a
Celery task (anything with `apply_async`) is enqueued then, any other callable is called.
A rollback drops it, so nothing announces a change that did not happen. Outside a
transaction it runs at once. With `CELERY_TASK_ALWAYS_EAGER` (the tests, and no broker)
an enqueued task runs in-process at that moment.

Task arguments must be JSON values (ids as strings): the broker serialises to JSON.
Work that may also wait for the answer to go out belongs in `governance.after_response`.

`enqueue` sends a task now. When the broker (Redis) cannot be reached, the change has
already committed and its job must not be lost (a revocation's cascade has no other
trigger), so the job runs in this process instead, and the log says so with an error
naming the task; a job that then fails is logged by name and exception type too. The
request that committed the change still gets its answer (docs/assurance.md, "Faults").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import redis.exceptions
from django.db import connection, transaction
from kombu.exceptions import OperationalError as BrokerError

log = logging.getLogger("iris.jobs")

# What sending a task raises when the broker is down or unreachable (kombu wraps the
# socket's errors); not OSError, which a task run eagerly may raise of its own.
BROKER_ERRORS: tuple[type[BaseException], ...] = (
    BrokerError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)


def enqueue(task: Any, /, *args: Any, **kwargs: Any) -> None:
    """Send `task(*args, **kwargs)` to the broker; run it here if the broker is down."""
    try:
        if args:
            task.apply_async(args=args, kwargs=kwargs)
        else:
            task.apply_async(kwargs=kwargs)
    except BROKER_ERRORS as exc:
        name = getattr(task, "name", type(task).__name__)
        log.error("job %s not queued (broker: %s); running it in-process", name, type(exc).__name__)
        try:
            task.apply(args=args, kwargs=kwargs, throw=True)
        except Exception as failed:  # the change committed; report and carry on
            log.error("job %s failed in-process: %s", name, type(failed).__name__)


def after_commit(work: Any, /, *args: Any, once: bool = False, **kwargs: Any) -> None:
    """Run `work(*args, **kwargs)` (or enqueue the task) once the transaction commits.

    With `once`, work already queued on this transaction is not queued again: one seal
    per transaction, however many events it records. `once` takes no arguments."""
    if once:
        if args or kwargs:
            raise TypeError("once= queues bare callables only")
        if connection.in_atomic_block and any(
            entry[1] is work for entry in connection.run_on_commit
        ):
            return
        transaction.on_commit(work)
        return
    callback: Callable[[], Any]
    if getattr(work, "apply_async", None) is not None:
        callback = partial(enqueue, work, *args, **kwargs)
    else:
        callback = partial(work, *args, **kwargs)
    transaction.on_commit(callback)
