from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from governance.api import service_status
from governance.audit import verify_chain
from governance.doctor import DOCTOR_TAG
from governance.keys import MasterKeyError, check_master_key


class Command(BaseCommand):
    help = (
        "Check the database, migrations, Redis, the master key, the audit chain and what "
        "each app registers as a doctor check (recall's change log, ...)."
    )

    def handle(self, *args: Any, **o: Any) -> None:
        problems: list[str] = []
        warnings: list[str] = []
        status = service_status()
        for name, state in status.items():
            self.stdout.write(f"{name}: {state}")
            if state != "ok":
                problems.append(name)
        if status.get("database") == "ok":
            executor = MigrationExecutor(connection)
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
            self.stdout.write(f"migrations: {'ok' if not pending else f'{len(pending)} pending'}")
            if pending:
                problems.append("migrations")
        try:
            count = check_master_key()
            self.stdout.write(f"master key: ok ({count} key(s))")
        except MasterKeyError as exc:
            self.stdout.write(f"master key: {exc}")
            problems.append("master key")
        if "database" not in problems and "migrations" not in problems:
            report = verify_chain()
            self.stdout.write(
                "audit chain: ok" if report.ok else f"audit chain: BROKEN at {report.first_break}"
            )
            if not report.ok:
                problems.append("audit chain")
        if "database" not in problems and "migrations" not in problems:
            for message in checks.run_checks(tags=[DOCTOR_TAG], databases=["default"]):
                # The check's id is the machine-readable part (memory.W001, ...).
                self.stdout.write(f"{message.msg} [{message.id}]")
                if message.hint:
                    self.stdout.write(f"  {message.hint}")
                topic = message.msg.split(":", 1)[0]
                (problems if message.is_serious() else warnings).append(topic)
        if problems:
            raise CommandError("doctor found problems: " + ", ".join(problems))
        if warnings:
            # Working, but not as configured: said on the last line, where a script looks.
            self.stdout.write("doctor: working, with warnings: " + ", ".join(warnings))
            return
        self.stdout.write("doctor: all good")
