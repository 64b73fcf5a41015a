from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit import verify_chain, write_checkpoint


class Command(BaseCommand):
    help = "Verify the audit chain against its signed checkpoints; name the first break."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--checkpoint", action="store_true", help="sign the current heads after verifying"
        )

    def handle(self, *args: Any, **o: Any) -> None:
        report = verify_chain()
        if not report.ok:
            raise CommandError(f"audit chain BROKEN at {report.first_break}")
        self.stdout.write(
            f"audit chain verifies: {report.events} events in {report.chains} chains, "
            f"{report.checkpoints} signed checkpoints"
        )
        if o["checkpoint"]:
            self.stdout.write(f"signed {write_checkpoint()} new checkpoints")
