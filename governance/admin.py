from __future__ import annotations

from django.contrib import admin

from governance.admin_site import LedgerAdmin
from governance.models import AuditEvent, AuditSeal


@admin.register(AuditEvent)
class AuditEventAdmin(LedgerAdmin):
    list_display = ("seq", "occurred_at", "tenant_id", "actor_kind", "action", "reason_code")
    list_filter = ("action",)


@admin.register(AuditSeal)
class AuditSealAdmin(LedgerAdmin):
    list_display = ("chain", "position", "event_seq", "sealed_at")
