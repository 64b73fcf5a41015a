from __future__ import annotations

from django.urls import path

from dsar import api

urlpatterns = [
    path("data-rights", api.DataRightsApi.as_view(), name="api-data-rights"),
    path(
        "data-rights/signing-key",
        api.DataRightsSigningKeyApi.as_view(),
        name="api-data-rights-signing-key",
    ),
    path(
        "data-rights/<uuid:request_id>",
        api.DataRightsDetailApi.as_view(),
        name="api-data-rights-detail",
    ),
    path(
        "data-rights/<uuid:request_id>/transition",
        api.DataRightsTransitionApi.as_view(),
        name="api-data-rights-transition",
    ),
    path(
        "data-rights/<uuid:request_id>/verification-code",
        api.DataRightsCodeApi.as_view(),
        name="api-data-rights-code",
    ),
    path(
        "data-rights/<uuid:request_id>/extend",
        api.DataRightsExtendApi.as_view(),
        name="api-data-rights-extend",
    ),
    path(
        "data-rights/<uuid:request_id>/undo",
        api.DataRightsUndoApi.as_view(),
        name="api-data-rights-undo",
    ),
    path(
        "data-rights/<uuid:request_id>/bundle",
        api.DataRightsBundleApi.as_view(),
        name="api-data-rights-bundle",
    ),
]
