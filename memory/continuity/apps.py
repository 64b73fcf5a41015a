from __future__ import annotations

from django.apps import AppConfig


class ContinuityConfig(AppConfig):
    name = "memory.continuity"
    label = "continuity"
    verbose_name = "Cross-device continuity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from consent.signals import sensitive_consent_revoked
        from governance.pipeline import register, registered_checks
        from memory.continuity.services import ContinuityGate
        from memory.continuity.tasks import on_sensitive_consent_revoked

        if not any(check.name == ContinuityGate.name for check in registered_checks()):
            register(ContinuityGate())
        sensitive_consent_revoked.connect(
            on_sensitive_consent_revoked, dispatch_uid="continuity-sensitive-consent-revoked"
        )
