from __future__ import annotations

from django.apps import AppConfig


class InspectionConfig(AppConfig):
    name = "inspection"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Operator inspection"

    def ready(self) -> None:
        from governance import append_only
        from inspection.models import READS_TABLE, SNAPSHOT_TABLE, TRAIL_TABLE

        for table in (TRAIL_TABLE, SNAPSHOT_TABLE, READS_TABLE):
            append_only.register(table)

        from governance.pipeline import register, registered_checks
        from inspection.services import InspectionGateCheck

        if not any(c.name == InspectionGateCheck.name for c in registered_checks()):
            register(InspectionGateCheck())

        # The member's export and access report carry the access log (dsar.collect).
        from governance import member_data
        from inspection.selectors import member_access_records

        member_data.register("operator-accesses", member_access_records)
