from __future__ import annotations

from django.apps import AppConfig


class ConsentConfig(AppConfig):
    name = "consent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from consent.models import BODY_TABLE, CHAIN_TABLE
        from governance import append_only

        append_only.register(CHAIN_TABLE)
        # Bodies may be deleted (erasure through consent_purge_categories), never updated.
        append_only.register(BODY_TABLE, allow_delete=True)

        # An erasure held for the owner's approval (or cut short by a crash) resumes here.
        from consent.services import PURGE_ACTION, PURGE_OPERATION, resume_purge
        from governance.approvals import register_resumable

        register_resumable(PURGE_OPERATION, resume_purge, action=PURGE_ACTION)

        # Who may record which consent: a kernel check, so a refusal is audited as a deny.
        from consent.services import ConsentCaptureGate
        from governance.pipeline import register, registered_checks

        if not any(c.name == ConsentCaptureGate.name for c in registered_checks()):
            register(ConsentCaptureGate())
