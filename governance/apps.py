from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance import append_only, schema  # noqa: F401 - registers the scheme

        append_only.register("governance_auditevent")
        append_only.register("governance_auditseal")

        from django.core.signals import request_finished, request_started

        from governance import after_response

        request_started.connect(
            after_response.request_began, dispatch_uid="iris-after-response-began"
        )
        # The audit seal of a request's commits is deferred work too (governance.audit).
        request_finished.connect(after_response.run_deferred, dispatch_uid="iris-after-response")

        from governance.checks import register_kernel_checks

        register_kernel_checks()

        # axes' receivers first, so ours see its verdict on the same attempt.
        import axes.signals  # noqa: F401
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from governance import login_signals

        user_logged_in.connect(login_signals.on_logged_in, dispatch_uid="iris-login-succeeded")
        user_login_failed.connect(login_signals.on_login_failed, dispatch_uid="iris-login-failed")
