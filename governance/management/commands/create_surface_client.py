from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit import Actor
from governance.models import SurfaceClient, Tenant
from governance.services import surface_client_create
from governance.surfaces import SURFACES


class Command(BaseCommand):
    help = "Create a surface API client; prints its bearer token once (only a hash is kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--surface", required=True, choices=SURFACES)
        parser.add_argument(
            "--tier",
            choices=SurfaceClient.DestinationTier.values,
            default=SurfaceClient.DestinationTier.CLOUD,
            help="where the client's model runs; its recalls go no further (default: cloud, "
            "which receives nothing personal)",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {o['tenant']!r}.")
        created = surface_client_create(
            actor=Actor("system", "cli"),
            tenant=tenant,
            surface=o["surface"],
            destination_tier=o["tier"],
        )
        self.stdout.write(f"surface client {created.client.id} ({o['surface']}, {o['tier']} tier)")
        self.stdout.write(f"token (shown once): {created.token}")
