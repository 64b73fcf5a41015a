from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from events.services import webhook_deactivate
from governance.errors import IrisError
from governance.models import Tenant
from governance.principal import Principal


class Command(BaseCommand):
    help = "Switch a webhook endpoint off: nothing more is posted to it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("endpoint_id")

    def handle(self, *args: Any, **o: Any) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {o['tenant']!r}.")
        try:
            endpoint = webhook_deactivate(
                principal=Principal.system("cli"), tenant=tenant, endpoint_id=o["endpoint_id"]
            )
        except IrisError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"webhook {endpoint.id} is off")
