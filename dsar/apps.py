from __future__ import annotations

from django.apps import AppConfig


class DsarConfig(AppConfig):
    name = "dsar"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Data rights"

    def ready(self) -> None:
        from dsar.models import TRAIL_TABLE
        from governance import append_only

        append_only.register(TRAIL_TABLE)

        from dsar.services import DataRightsCallerGate, LegalHoldGate
        from governance.pipeline import register, registered_checks

        for check in (DataRightsCallerGate(), LegalHoldGate()):
            if not any(c.name == check.name for c in registered_checks()):
                register(check)
