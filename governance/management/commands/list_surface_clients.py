from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.models import Tenant
from governance.selectors import surface_clients_for_operations


class Command(BaseCommand):
    help = "List surface clients: tenant, surface, tier, id, token prefix, created, revoked."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=None, help="only this tenant's (slug)")

    def handle(self, *args: Any, **o: Any) -> None:
        if o["tenant"] is not None and not Tenant.objects.filter(slug=o["tenant"]).exists():
            raise CommandError(f"No tenant {o['tenant']!r}.")
        # The prefix is what revoke_surface_client takes; the token and its hash never show.
        row = "{:<20} {:<10} {:<6} {:<36} {:<12} {:<25} {}"
        self.stdout.write(
            row.format("tenant", "surface", "tier", "id", "prefix", "created", "revoked")
        )
        for client in surface_clients_for_operations(tenant_slug=o["tenant"]):
            self.stdout.write(
                row.format(
                    client.tenant.slug,
                    client.surface,
                    client.destination_tier,
                    str(client.id),
                    client.token_prefix,
                    client.created_at.isoformat(timespec="seconds"),
                    client.revoked_at.isoformat(timespec="seconds") if client.revoked_at else "-",
                )
            )
