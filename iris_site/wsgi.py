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
from memory.recall.service import warm_up  # noqa: E402

warm_up()
