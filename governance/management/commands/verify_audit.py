from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from governance.audit import verify_chain, write_checkpoint


class Command(BaseCommand):
    help = "Verify the audit chain against its signed checkpoints; name the first break."

    def add_arguments(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--checkpoint", action="store_true", help="sign the current heads after verifying"
        )

    def handle(self, *args, **o) -> None:  # type: ignore[no-untyped-def]
        report = verify_chain()
        if not report.ok:
            raise CommandError(f"audit chain BROKEN at {report.first_break}")
        self.stdout.write(
            f"audit chain verifies: {report.events} events in {report.chains} chains, "
            f"{report.checkpoints} signed checkpoints"
        )
        if o["checkpoint"]:
            self.stdout.write(f"signed {write_checkpoint()} new checkpoints")
