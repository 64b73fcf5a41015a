from __future__ import annotations

from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "events"
    verbose_name = "Events and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from events import egress, outbox

        outbox.listen()
        egress.register_checks()
