from __future__ import annotations

from django.urls import path

from inspection import api

urlpatterns = [
    path("inspections", api.InspectionsApi.as_view(), name="api-inspections"),
    path(
        "inspections/<uuid:inspection_id>",
        api.InspectionDetailApi.as_view(),
        name="api-inspection-detail",
    ),
    path(
        "inspections/<uuid:inspection_id>/transition",
        api.InspectionTransitionApi.as_view(),
        name="api-inspection-transition",
    ),
    path(
        "inspections/<uuid:inspection_id>/snapshot",
        api.InspectionSnapshotApi.as_view(),
        name="api-inspection-snapshot",
    ),
    path(
        "inspections/<uuid:inspection_id>/replay",
        api.InspectionReplayApi.as_view(),
        name="api-inspection-replay",
    ),
]
