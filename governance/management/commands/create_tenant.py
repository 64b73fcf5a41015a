from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from governance.audit import Actor
from governance.errors import IrisError
from governance.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug: str, name: str, **options) -> None:  # type: ignore[no-untyped-def]
        try:
            tenant = tenant_create(actor=Actor("system", "cli"), slug=slug, name=name or slug)
        except IrisError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"tenant {tenant.slug} {tenant.id}")
