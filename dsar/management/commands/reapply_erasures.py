"""`manage.py reapply_erasures [--since ISO]`: after restoring a database backup, delete
again everything the erasure journal says was erased (since the backup was taken).

Idempotent; refuses (and counts) journal lines whose signature does not verify; audited
per tenant as `iris.dsar.erasures.reapplied`. Exits non-zero when a line was refused, so
an operator notices a journal that was tampered with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dsar.deletion import erasures_reapply


def _moment(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"--since is not an ISO 8601 moment: {value!r}") from None
    if moment.tzinfo is None:
        raise CommandError("--since needs a time zone, e.g. 2026-01-31T00:00:00Z")
    return moment


class Command(BaseCommand):
    help = "Delete again what the erasure journal records, after a database restore."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            help="only erasures recorded at or after this moment (when the backup was taken)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = _moment(options["since"]) if options.get("since") else None
        report = erasures_reapply(since=since)
        self.stdout.write(
            f"journal lines applied: {report.lines}, refused: {report.refused}; "
            f"entries deleted again: {report.entries}; consent bodies erased again: "
            f"{report.consent_events} (types skipped: {report.consent_types_skipped}); "
            f"continuation tokens: {report.continuation_tokens}; "
            f"members no longer present: {report.members_missing}"
        )
        if report.refused:
            raise CommandError(
                f"{report.refused} journal line(s) failed their signature and were not applied"
            )
