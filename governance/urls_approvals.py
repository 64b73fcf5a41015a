"""The member's approvals pages. Included by the site at `approvals/`; the page is named
`approvals` (no namespace) so the member menu lights it up."""

from __future__ import annotations

from django.urls import path

from governance import views_approvals

urlpatterns = [
    path("", views_approvals.approvals_page, name="approvals"),
    path(
        "<uuid:approval_id>/decide",
        views_approvals.approval_decide_page,
        name="approvals-decide",
    ),
]
