from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.accounts import totp_reset
from governance.audit import Actor
from governance.models import User


class Command(BaseCommand):
    help = "Remove an operator's two-step sign-in (a lost phone); audited. They can enrol again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **o: Any) -> None:
        user = User.objects.filter(username=o["username"], kind=User.Kind.OPERATOR).first()
        if user is None:
            raise CommandError("No operator has that username.")
        if totp_reset(actor=Actor("system", "cli"), user=user):
            self.stdout.write(f"two-step sign-in removed for operator {user.public_id}")
        else:
            self.stdout.write(f"operator {user.public_id} had no two-step sign-in")
