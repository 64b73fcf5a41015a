"""Work that may wait until the answer has gone out.

Some bookkeeping belongs to a request but not to its answer: a recall's usage counters and
the member's recall history are written from what the recall's audit event already holds
(committed before the answer leaves). Waiting for them cost a 1k recall 2.1 of its 11 ms.
Inside a request, `defer` queues such work and `request_finished` (which the server sends
once it has written the answer) runs it; outside a request it runs at once, so jobs and
tests see it done when the call returns.

A failure is logged by name and exception type only (no values: a database error can
quote a row), and never reaches the caller, who already has the answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("iris.after_response")

_state = threading.local()


def request_began(**_: Any) -> None:
    """`request_started`: from here on `defer` queues."""
    _state.queue = []


def defer(work: Callable[[], None]) -> None:
    queue = getattr(_state, "queue", None)
    if queue is None:
        work()
    else:
        queue.append(work)


def run_deferred(**_: Any) -> None:
    """`request_finished`: run what the request deferred, in order."""
    queue = getattr(_state, "queue", None)
    _state.queue = None
    for work in queue or ():
        try:
            work()
        except Exception as exc:  # the answer has gone; report and carry on
            name = getattr(work, "__name__", None) or type(work).__name__
            log.error("after-response work %s failed: %s", name, type(exc).__name__)
