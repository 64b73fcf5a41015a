"""Run one memory job by hand, batch after batch, with a plain-text progress bar.

manage.py run_job retention --tenant acme --batch 200
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from governance.models import Tenant
from memory.jobs import JOBS, handled

BAR_WIDTH = 10


def progress_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[#####.....] 50/100`; an empty job shows a full bar at 0/0."""
    filled = width if total <= 0 else min(width, done * width // total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


class Command(BaseCommand):
    help = "Run one memory job (retention, purge, decay, expire) for a tenant, every batch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job", help=f"one of: {', '.join(sorted(JOBS))}")
        parser.add_argument("--tenant", help="tenant slug; default: every tenant in turn")
        parser.add_argument("--batch", type=int, default=200, help="items per batch")
        parser.add_argument(
            "--now", help="RFC 3339 time to act as of (for rehearsals); default: now"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        job = JOBS.get(options["job"])
        if job is None:
            raise CommandError(f"unknown job {options['job']!r}; one of: {', '.join(sorted(JOBS))}")
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        now = self._now(options["now"])
        tenants = Tenant.objects.order_by("slug")
        if options["tenant"]:
            tenants = tenants.filter(slug=options["tenant"])
            if not tenants.exists():
                raise CommandError(f"no tenant {options['tenant']!r}")
        for tenant in tenants:
            self._run(job, tenant, options["batch"], now)

    def _now(self, value: str | None) -> datetime:
        if not value:
            return timezone.now()
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise CommandError("--now must be an RFC 3339 time") from None
        if moment.tzinfo is None:
            raise CommandError("--now must carry a UTC offset")
        return moment

    def _run(self, job: Any, tenant: Tenant, batch: int, now: datetime) -> None:
        total = job.pending(tenant.id, now)
        done = 0
        self.stdout.write(f"{job.name} · {tenant.slug}: {total} due")
        self.stdout.write(progress_bar(done, total))
        while True:
            run = job.run(tenant_id=tenant.id, batch=batch, now=now)
            step = handled(job, run)
            done += step
            remaining = int(run.counts.get("remaining", 0))
            total = max(total, done + remaining)
            self.stdout.write(progress_bar(done, total))
            # Stop when nothing is left, or when a batch could not move (the rest needs a
            # person, e.g. a refused write): never spin.
            if remaining == 0 or step == 0:
                break
        self.stdout.write(self.style.SUCCESS(f"{job.name} · {tenant.slug}: {done} handled"))
