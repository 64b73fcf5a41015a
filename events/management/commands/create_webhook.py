from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from events.catalogue import EVENT_TYPE_NAMES
from events.services import webhook_create
from governance.errors import IrisError
from governance.models import Tenant
from governance.principal import Principal


class Command(BaseCommand):
    help = (
        "Declare a webhook endpoint for a tenant; prints its signing secret once (the vault "
        "keeps it encrypted). The URL's host must be in IRIS_WEBHOOK_ALLOWED_HOSTS."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--url", required=True)
        parser.add_argument(
            "--events",
            required=True,
            help=f"comma-separated event types: {', '.join(EVENT_TYPE_NAMES)}",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {o['tenant']!r}.")
        try:
            created = webhook_create(
                principal=Principal.system("cli"),
                tenant=tenant,
                url=o["url"],
                event_types=o["events"],
            )
        except IrisError as exc:
            rule = f" ({exc.field}: {exc.rule})" if exc.field else ""
            raise CommandError(f"{exc.detail}{rule}") from None
        endpoint = created.endpoint
        self.stdout.write(
            f"webhook {endpoint.id} → {endpoint.host} ({', '.join(endpoint.event_types)})"
        )
        self.stdout.write(f"signing secret (shown once): {created.secret}")
