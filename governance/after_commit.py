"""Work that must wait until the current transaction commits: Celery enqueues, signals
that announce a committed change, the audit seal.

`after_commit(work, *args, **kwargs)` queues `work` on the transaction's commit; a
Celery task (anything with `apply_async`) is enqueued then, any other callable is called.
A rollback drops it, so nothing announces a change that did not happen. Outside a
transaction it runs at once. With `CELERY_TASK_ALWAYS_EAGER` (the tests, and no broker)
an enqueued task runs in-process at that moment.

Task arguments must be JSON values (ids as strings): the broker serialises to JSON.
Work that may also wait for the answer to go out belongs in `governance.after_response`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import connection, transaction


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
    apply_async = getattr(work, "apply_async", None)
    callback: Callable[[], Any]
    if apply_async is not None:
        callback = (
            partial(apply_async, args=args, kwargs=kwargs)
            if args
            else partial(apply_async, kwargs=kwargs)
        )
    else:
        callback = partial(work, *args, **kwargs)
    transaction.on_commit(callback)
