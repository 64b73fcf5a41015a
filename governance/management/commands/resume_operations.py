from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.effects import side_effects_resume
from governance.models import Tenant


class Command(BaseCommand):
    help = (
        "Complete (through the resumable registry) or mark failed the destructive calls "
        "whose side-effect ledger rows are still pending: calls a crash interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-minutes",
            type=int,
            default=10,
            help="only rows pending for longer than this (default 10)",
        )
        parser.add_argument("--tenant", help="only this tenant (slug)")
        parser.add_argument("--batch", type=int, default=100, help="rows per run (default 100)")

    def handle(self, *args: Any, **o: Any) -> None:
        if o["older_than_minutes"] < 0 or o["batch"] < 1:
            raise CommandError("--older-than-minutes must be >= 0 and --batch >= 1")
        tenant_id = None
        if o["tenant"]:
            tenant = Tenant.objects.filter(slug=o["tenant"]).first()
            if tenant is None:
                raise CommandError(f"no tenant {o['tenant']!r}")
            tenant_id = tenant.id
        report = side_effects_resume(
            older_than_minutes=o["older_than_minutes"], tenant_id=tenant_id, batch=o["batch"]
        )
        self.stdout.write(
            f"resume_operations: {report.completed} completed, {report.failed} failed, "
            f"{report.skipped} skipped"
        )
