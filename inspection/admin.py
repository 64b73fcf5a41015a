from __future__ import annotations

from django.contrib import admin

from governance.admin_site import LedgerAdmin
from inspection.models import InspectionTransition, SnapshotRead


@admin.register(InspectionTransition)
class InspectionTransitionAdmin(LedgerAdmin):
    list_display = ("id", "tenant", "inspection", "position", "to_state", "occurred_at")


@admin.register(SnapshotRead)
class SnapshotReadAdmin(LedgerAdmin):
    list_display = ("id", "tenant", "inspection", "kind", "read_at")
