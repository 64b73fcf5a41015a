from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance import views as governance_views
from governance import views_accounts as accounts_views

urlpatterns = [
    path("", governance_views.home, name="home"),
    path("accounts/login/", accounts_views.IrisLoginView.as_view(), name="login"),
    path("accounts/login/code/", accounts_views.login_code, name="login-code"),
    path("accounts/two-step/", accounts_views.totp_setup, name="totp-setup"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("governance.api_urls")),
    path("api/v1/", include("consent.api_urls")),
    path("api/v1/", include("memory.api_urls")),
    path("api/v1/", include("memory.recall.urls")),
    path("api/v1/", include("memory.continuity.api_urls")),
    path("api/v1/", include("dsar.api_urls")),
    path("api/v1/", include("inspection.api_urls")),
    path("api/v1/", include("events.api_urls")),
    path("consent/", include("consent.urls")),
    path("memory/", include("memory.urls")),
    path("approvals/", include("governance.urls_approvals")),
    path("data-rights/", include("dsar.urls")),
    path("inspections/", include("inspection.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

handler403 = "iris_site.handlers.forbidden"
handler404 = "iris_site.handlers.not_found"
handler500 = "iris_site.handlers.server_error"
