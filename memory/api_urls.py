from __future__ import annotations

from django.urls import path

from memory import api

urlpatterns = [
    path("memories", api.MemoriesView.as_view(), name="api-memories"),
    path(
        "memories/conflicts/<uuid:conflict_id>/answer",
        api.ConflictAnswerView.as_view(),
        name="api-memory-conflict-answer",
    ),
    path("memories/<uuid:entry_id>", api.MemoryDetailView.as_view(), name="api-memory"),
    path(
        "memories/<uuid:entry_id>/history",
        api.MemoryHistoryView.as_view(),
        name="api-memory-history",
    ),
    path(
        "memories/<uuid:entry_id>/forget", api.MemoryForgetView.as_view(), name="api-memory-forget"
    ),
    path("memories/<uuid:entry_id>/pause", api.MemoryPauseView.as_view(), name="api-memory-pause"),
    path(
        "memories/<uuid:entry_id>/resume", api.MemoryResumeView.as_view(), name="api-memory-resume"
    ),
    path(
        "memories/<uuid:entry_id>/confirm",
        api.MemoryConfirmView.as_view(),
        name="api-memory-confirm",
    ),
    path("memories/<uuid:entry_id>/scope", api.MemoryScopeView.as_view(), name="api-memory-scope"),
    path("actors/forget", api.ActorsForgetView.as_view(), name="api-actors-forget"),
    path("off-the-record", api.OffTheRecordView.as_view(), name="api-off-the-record"),
]
