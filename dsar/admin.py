from __future__ import annotations

from django.contrib import admin

from dsar.models import DataRightsEvent
from governance.admin_site import LedgerAdmin


@admin.register(DataRightsEvent)
class DataRightsEventAdmin(LedgerAdmin):
    list_display = ("id", "tenant", "request", "position", "to_state", "occurred_at")
