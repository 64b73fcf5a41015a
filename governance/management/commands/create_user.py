from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit import Actor
from governance.errors import IrisError
from governance.models import Tenant
from governance.roles import ROLE_CHOICES
from governance.services import user_create


class Command(BaseCommand):
    help = "Create a member or an operator with a role; prints the password once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--role", default="member", choices=ROLE_CHOICES)
        parser.add_argument("--email", default="")
        parser.add_argument("--password", default=None, help="default: generated and printed")

    def handle(self, *args: Any, **o: Any) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {o['tenant']!r}.")
        try:
            created = user_create(
                actor=Actor("system", "cli"),
                tenant=tenant,
                username=o["username"],
                role=o["role"],
                email=o["email"],
                password=o["password"],
            )
        except IrisError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(
            f"{o['role']} {created.user.username} {created.user.public_id} "
            f"password: {created.password}"
        )
