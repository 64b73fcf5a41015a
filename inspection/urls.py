from __future__ import annotations

from django.urls import path

from inspection import views

app_name = "inspection"

urlpatterns = [
    path("", views.home, name="home"),
    path("request/", views.request_access, name="request"),
    path("audit/", views.audit, name="audit"),
    path("references/", views.issue_reference, name="issue_reference"),
    path("mine/", views.mine, name="mine"),
    path("<uuid:inspection_id>/", views.detail, name="detail"),
    path("<uuid:inspection_id>/grant/", views.grant, name="grant"),
    path("<uuid:inspection_id>/deny/", views.deny, name="deny"),
    path("<uuid:inspection_id>/withdraw/", views.withdraw, name="withdraw"),
    path("<uuid:inspection_id>/close/", views.close, name="close"),
    path("<uuid:inspection_id>/snapshot/", views.snapshot, name="snapshot"),
    path("<uuid:inspection_id>/replay/", views.replay, name="replay"),
]
