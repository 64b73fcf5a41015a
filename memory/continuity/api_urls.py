from __future__ import annotations

from django.urls import path

from memory.continuity import api

urlpatterns = [
    path(
        "continuation-tokens",
        api.ContinuationTokensView.as_view(),
        name="api-continuation-tokens",
    ),
]
