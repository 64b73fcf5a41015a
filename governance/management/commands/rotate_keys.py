from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.keys import MasterKeyError, check_master_key
from governance.vault import VaultUnreadable, rotate_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every vault secret under the newest master key. Prepend the new key to "
        "IRIS_MASTER_KEY, run this, then drop the old key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=500, help="rows per transaction")

    def handle(self, *args: Any, **o: Any) -> None:
        if o["batch"] < 1:
            raise CommandError("--batch must be positive")
        try:
            keys = check_master_key()
        except MasterKeyError as exc:
            raise CommandError(f"master key: {exc}") from None
        try:
            count = rotate_all(batch=o["batch"])
        except VaultUnreadable as exc:
            raise CommandError(f"{exc.detail} Put the old key back and run again.") from None
        self.stdout.write(
            f"re-encrypted {count} vault secret(s) under the newest of {keys} master key(s)"
        )
