"""gunicorn settings of the fault test that kills a worker between its answer and its
after-response work: the project's own `gunicorn.conf.py`, plus one hook.

When the file named by `IRIS_FAULT_KILL_FILE` exists as a request finishes (Django sends
`request_finished` once gunicorn has written the whole answer), the worker removes it,
writes its pid to `IRIS_FAULT_KILLED_FILE` and SIGKILLs itself, before the
after-response queue (`governance.after_response.run_deferred`) runs.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

_PROJECT = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"
exec(compile(_PROJECT.read_text(), str(_PROJECT), "exec"))  # noqa: S102  the project's hooks

_project_post_worker_init = post_worker_init  # type: ignore[name-defined]  # noqa: F821


def _die_before_after_response(**_: object) -> None:
    trigger = Path(os.environ["IRIS_FAULT_KILL_FILE"])
    if trigger.exists():
        trigger.unlink()
        # Written aside and renamed, so the test never reads a file that exists but is empty.
        killed = Path(os.environ["IRIS_FAULT_KILLED_FILE"])
        aside = killed.with_name(killed.name + ".part")
        aside.write_text(str(os.getpid()))
        os.replace(aside, killed)
        os.kill(os.getpid(), signal.SIGKILL)


def post_worker_init(worker) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from django.core.signals import request_finished

    _project_post_worker_init(worker)
    request_finished.connect(_die_before_after_response, dispatch_uid="iris-fault-kill")
    # First in line, ahead of the after-response queue connected at start-up.
    request_finished.receivers.insert(0, request_finished.receivers.pop())
    request_finished.sender_receivers_cache.clear()
