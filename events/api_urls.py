from __future__ import annotations

from django.urls import path

from events import api

urlpatterns = [path("events", api.EventListApi.as_view(), name="api-events")]
