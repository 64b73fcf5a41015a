from __future__ import annotations

from django.urls import path

from consent import views

app_name = "consent"

urlpatterns = [
    path("", views.home, name="home"),
    path("grant/", views.grant, name="grant"),
    path("revoke/", views.revoke, name="revoke"),
    path("opt-out/", views.opt_out, name="opt_out"),
    path("opt-in/", views.opt_in, name="opt_in"),
]
