from __future__ import annotations

from django.urls import path

from governance import api

urlpatterns = [
    path("health", api.HealthView.as_view(), name="api-health"),
]

# The governance kernel: approvals and run steps.
from governance import api_kernel  # noqa: E402

urlpatterns += [
    path("approvals", api_kernel.ApprovalListApi.as_view(), name="api-approvals"),
    path(
        "approvals/<uuid:approval_id>/decide",
        api_kernel.ApprovalDecideApi.as_view(),
        name="api-approvals-decide",
    ),
    path("runs/<str:run_id>/steps", api_kernel.RunStepApi.as_view(), name="api-run-steps"),
]
