from __future__ import annotations

from django.urls import path

from memory import api_recall

urlpatterns = [
    path("recall", api_recall.RecallView.as_view(), name="api-recall"),
]
