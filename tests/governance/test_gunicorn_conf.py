"""gunicorn.conf.py: read by gunicorn from the working directory; its hooks freeze what was
loaded before the first request and collect the youngest generation less often."""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _conf():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("iris_gunicorn_conf", ROOT / "gunicorn.conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gunicorn_reads_it_from_the_working_directory() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "gunicorn"), "--print-config", "iris_site.wsgi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "config                             = ./gunicorn.conf.py" in done.stdout, done.stderr


def test_the_worker_hook_freezes_and_raises_the_young_threshold() -> None:
    conf = _conf()
    before = gc.get_threshold()
    try:
        gc.unfreeze()
        assert gc.get_freeze_count() == 0
        conf.post_worker_init(None)
        assert gc.get_freeze_count() > 1000  # the modules, settings and the rest
        assert gc.get_threshold() == (conf.YOUNG_THRESHOLD, before[1], before[2])
        conf.when_ready(None)  # the master's hook does the same before forking
        assert gc.get_threshold()[0] == conf.YOUNG_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
