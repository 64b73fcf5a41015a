from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dsar.services import data_rights_jurisdiction_set
from governance.errors import IrisError
from governance.models import Tenant
from governance.principal import Principal


class Command(BaseCommand):
    help = "Set the statutory clock (gdpr or ccpa) a tenant's new data-rights requests run on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="the tenant's slug")
        parser.add_argument("jurisdiction", choices=["gdpr", "ccpa"])

    def handle(self, *args: Any, tenant: str, jurisdiction: str, **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant).first()
        if row is None:
            raise CommandError(f"no tenant with the slug {tenant!r}")
        try:
            data_rights_jurisdiction_set(
                principal=Principal.system("cli", tenant_id=row.id),
                tenant=row,
                jurisdiction=jurisdiction,
            )
        except IrisError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"tenant {row.slug}: new data-rights requests run on {jurisdiction}")
