"""Work that may wait until the answer has gone out, and may be lost.

Only work whose loss costs nothing belongs here: today, bringing a worker's recall
snapshot of a member up to date or rebuilding it (`memory.recall.snapshot`), which the
next recall does itself if it never ran, and the audit seal of the request's commits
(`governance.audit`), which the beat task's sweep does if it never ran. Records (usage
counters, recall history, audit) commit with the answer's own transaction instead: a
worker killed between sending the answer and running this queue loses the queue
(docs/decisions/hardening-controls.md).

Inside a request, `defer` queues such work and `request_finished` (which the server sends
once it has written the answer) runs it; outside a request it runs at once, so jobs and
tests see it done when the call returns. Work that must wait for a commit instead goes
through `governance.after_commit`.

The supported deployment is WSGI (gunicorn, docs/performance.md). The queue is a context
variable rather than a thread-local, so under ASGI, where Django sends the request signals
from a thread pool, each request still gets a queue of its own.

A failure is logged by name and exception type only (no values: a database error can
quote a row), and never reaches the caller, who already has the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

log = logging.getLogger("iris.after_response")

_queue: ContextVar[list[tuple[object, Callable[[], object]]] | None] = ContextVar(
    "iris_after_response", default=None
)


def request_began(**_: Any) -> None:
    """`request_started`: from here on `defer` queues."""
    _queue.set([])


def in_request() -> bool:
    """Whether `defer` queues (inside a request) rather than runs at once."""
    return _queue.get() is not None


def defer(work: Callable[[], object], *, once: bool = False, key: object = None) -> None:
    """Run `work` once the answer has gone out (at once outside a request). With `once`,
    work already queued by this request is not queued again; with `key`, neither is work
    queued under an equal key."""
    queue = _queue.get()
    if queue is None:
        work()
        return
    if key is None and once:
        key = work
    if key is None or not any(queued == key for queued, _ in queue):
        queue.append((key, work))


def run_deferred(**_: Any) -> None:
    """`request_finished`: run what the request deferred, in order."""
    queue = _queue.get()
    _queue.set(None)
    for _key, work in queue or ():
        try:
            work()
        except Exception as exc:  # the answer has gone; report and carry on
            name = getattr(work, "__name__", None) or type(work).__name__
            log.error("after-response work %s failed: %s", name, type(exc).__name__)
