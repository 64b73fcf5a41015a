from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from iris_site.env import SettingsError, exit_on_settings_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iris_site.settings")
try:
    application = get_wsgi_application()
except SettingsError as exc:
    exit_on_settings_error(exc)

# Before the first request: with the hybrid ranker on, the model is loaded and warmed here
# (under gunicorn --preload, once in the master, its weights then shared by the workers).
from memory.recall.service import warm_start, warm_up  # noqa: E402

warm_up()
# And the recall snapshots of the members active within the change log's window, so a
# restart does not make each of them build one at their next recall on every worker.
warm_start()

# And what every worker's first request would otherwise import: the URL patterns with the
# views they name, and the Redis client library behind the cache and the throttle. Under
# --preload this happens once, in the master.
import redis  # noqa: E402, F401
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018
