from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit import Actor
from governance.selectors import surface_clients_matching
from governance.services import surface_client_revoke


class Command(BaseCommand):
    help = (
        "Revoke a surface client by its id or its token's prefix (the first 12 characters); "
        "its next API request gets 401. Revoking twice changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("client", help="client id, or the token's first 12 characters")

    def handle(self, *args: Any, **o: Any) -> None:
        matches = surface_clients_matching(o["client"])
        if not matches:
            raise CommandError("No surface client has that id or token prefix.")
        if len(matches) > 1:
            ids = ", ".join(str(c.id) for c in matches)
            raise CommandError(f"That prefix names {len(matches)} clients ({ids}); give an id.")
        result = surface_client_revoke(actor=Actor("system", "cli"), client_id=matches[0].id)
        client = result.client
        when = client.revoked_at.isoformat() if client.revoked_at else "-"
        state = "revoked" if result.revoked_now else "already revoked"
        self.stdout.write(f"surface client {client.id} ({client.surface}) {state} at {when}")
