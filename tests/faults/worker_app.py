"""The Celery app of the fault tests' worker: Iris's own app, with two changes made for
the test only.

- Redis hands an unacknowledged message to another consumer after
  `IRIS_FAULT_VISIBILITY` seconds (production: kombu's default hour), so a restarted
  worker gets back the job its killed predecessor held within the test.
- With `IRIS_FAULT_HANG=<module>:<function>:<n>`, the worker stops for good right after
  the n-th call of that function has returned (its transaction committed), writing
  `IRIS_FAULT_MARKER` first: the test then kills it there, mid-job, deterministically.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from pathlib import Path

from iris_site.celery import app

app.conf.broker_transport_options = {
    "visibility_timeout": float(os.environ.get("IRIS_FAULT_VISIBILITY", "3600"))
}


def _hang_after(module_name: str, function: str, calls: int, marker: Path) -> None:
    module = importlib.import_module(module_name)
    real = getattr(module, function)
    seen = 0

    @functools.wraps(real)
    def counted(*args, **kwargs):
        nonlocal seen
        result = real(*args, **kwargs)
        seen += 1
        if seen == calls:
            marker.write_text(str(os.getpid()))
            while True:  # the test kills this process here
                time.sleep(60)
        return result

    setattr(module, function, counted)


if hang := os.environ.get("IRIS_FAULT_HANG"):
    import django

    django.setup()
    module_name, function, calls = hang.rsplit(":", 2)
    _hang_after(module_name, function, int(calls), Path(os.environ["IRIS_FAULT_MARKER"]))
