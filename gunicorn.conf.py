"""gunicorn settings read from the working directory (README's deployment, the benches).

Garbage collection: the app's long-lived objects (modules, settings, URL patterns, the
embedding model's arrays) are created once, before any request, and are never garbage.
`gc.freeze()` moves them out of the collector's sight, so a collection walks only what
requests made; with fewer collections of the youngest generation as well, a memory write
ran 0.6 M fewer instructions of 10.3 M (callgrind, in-process). Under `--preload` the
master freezes what it loaded before forking; each worker freezes again after loading.

Exit: a worker forked from a master that loaded ONNX Runtime (the embedding model, under
`--preload` with the hybrid ranker) hung for ever in the library's exit-time destructors,
which wait on a condition variable of a thread that lives only in the master (seen with
gdb on a stopped worker: `pthread_cond_destroy` from `__run_exit_handlers`). Such a worker
leaves with `os._exit` once gunicorn is done with it, after flushing the logs.
"""

from __future__ import annotations

import gc
import logging
import os
import sys

# Objects allocated between collections of the youngest generation (CPython's default 700).
YOUNG_THRESHOLD = 10_000

# How long a warmed-up worker waits for its peers before taking requests (well inside
# gunicorn's `--timeout`, which a worker still starting must not outlive).
START_TOGETHER_SECONDS = 10.0

# Made in the master before it forks (`when_ready`), inherited by each worker.
_together = None


def _settle() -> None:
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def when_ready(server) -> None:  # type: ignore[no-untyped-def]
    global _together
    from iris_site.warm import StartTogether

    _together = StartTogether(server.num_workers)
    _settle()


def post_worker_init(worker) -> None:  # type: ignore[no-untyped-def]
    from django.core.signals import request_finished

    from iris_site.warm import renew_connection, worker_ready

    worker_ready(worker.wsgi)
    request_finished.connect(renew_connection, dispatch_uid="iris-renew-connection")
    _settle()
    if _together is not None:
        _together.arrive(START_TOGETHER_SECONDS)


def worker_abort(worker) -> None:  # type: ignore[no-untyped-def]
    # The master aborts a worker whose request outlives `--timeout`. Left to gunicorn, the
    # worker exits from inside the request and gunicorn answers with its own HTML error
    # page. Raised instead, in the request's own code, this unwinds it like any failure:
    # its transaction rolls back and the API's one error shape answers (problem+json 503).
    # gunicorn has already marked the worker as leaving, so it exits after that answer.
    from governance.errors import ServiceUnavailable

    raise ServiceUnavailable(
        "The request took too long and was stopped; try again.", code="worker-timeout"
    )


def worker_exit(server, worker) -> None:  # type: ignore[no-untyped-def]
    # gunicorn calls this in the worker, from the `finally` around its life (the SystemExit
    # in flight carries the code it chose: 0, or a boot error the master acts on), and in
    # the master for a worker found dead, which must go on.
    if os.getpid() != worker.pid or "onnxruntime" not in sys.modules:
        return
    code = _exit_code(sys.exc_info()[1])
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _exit_code(exc: BaseException | None) -> int:
    if isinstance(exc, SystemExit):
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return 0 if exc is None else 1
