"""The Celery app. Redis broker when REDIS_URL is set; eager in-process otherwise."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iris_site.settings")

app = Celery("iris")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _beat_schedule() -> dict:
    from iris_site.beat import BEAT_SCHEDULE

    return BEAT_SCHEDULE


app.conf.beat_schedule = _beat_schedule()
