from __future__ import annotations

from django.urls import path

from consent import api

urlpatterns = [
    path("consents", api.ConsentsApi.as_view(), name="api-consents"),
    path("consents/active", api.ConsentActiveApi.as_view(), name="api-consents-active"),
]
