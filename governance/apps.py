from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance import append_only, schema  # noqa: F401 - registers the scheme

        append_only.register("governance_auditevent")
        append_only.register("governance_auditseal")

        from governance.checks import register_kernel_checks

        register_kernel_checks()
