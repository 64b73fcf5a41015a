"""Django admin, for superusers only, showing the ledgers read-only.

The admin is a window for the people who run Iris, not a way round its rules: no row can
be added, changed or deleted here (the ledgers refuse it in the database too), and no
member's memory or consent body is registered, because an operator reads a member's
memory only through an inspection (docs/decisions/inspection.md).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest


class IrisAdminSite(admin.AdminSite):
    site_header = "Iris ledgers (read-only)"
    site_title = "Iris ledgers"
    index_title = "Ledgers"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and user.is_superuser)


class IrisAdminConfig(AdminConfig):
    default_site = "governance.admin_site.IrisAdminSite"


class LedgerAdmin(admin.ModelAdmin):
    """Every field shown, nothing editable, no action."""

    actions = None

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)
