from __future__ import annotations

from django.urls import path

from memory.recall import api as api_recall

urlpatterns = [
    path("recall", api_recall.RecallView.as_view(), name="api-recall"),
]
