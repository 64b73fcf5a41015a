from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit import Actor
from governance.errors import IrisError
from governance.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            tenant = tenant_create(actor=Actor("system", "cli"), slug=slug, name=name or slug)
        except IrisError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"tenant {tenant.slug} {tenant.id}")
