from __future__ import annotations

from django.contrib import admin

from consent.models import ConsentEvent
from governance.admin_site import LedgerAdmin


# The chain only: its bodies say which sensitive topics a member consented to.
@admin.register(ConsentEvent)
class ConsentEventAdmin(LedgerAdmin):
    list_display = ("id", "tenant", "position", "recorded_at", "fingerprint")
