from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from iris_site.env import SettingsError, exit_on_settings_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iris_site.settings")
try:
    application = get_wsgi_application()
except SettingsError as exc:
    exit_on_settings_error(exc)

# Before the first request, once in the master under gunicorn --preload: the model, the
# recall snapshots of recently active members, and what Python and Django build lazily.
from iris_site.warm import before_fork  # noqa: E402

before_fork()
