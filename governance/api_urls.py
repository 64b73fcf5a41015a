from __future__ import annotations

from django.urls import path

from governance import api

urlpatterns = [
    path("health", api.HealthView.as_view(), name="api-health"),
]
