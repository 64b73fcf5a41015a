"""Memory's checks for `manage.py doctor` (Django system checks tagged `doctor`).

They read the database, so they run only when a database is named: `doctor` does, a plain
`manage.py check` does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from governance.doctor import DOCTOR_TAG


@checks.register(DOCTOR_TAG)
def recall_change_log(
    app_configs: Sequence[Any] | None = None, databases: Sequence[str] | None = None, **_: Any
) -> list[checks.CheckMessage]:
    if not databases:
        return []
    from memory.recall.snapshot import missing_triggers

    missing = missing_triggers()
    if not missing:
        return []
    return [
        checks.Error(
            f"recall change log: triggers missing or disabled: {', '.join(missing)}",
            hint="Run `manage.py migrate memory`; see docs/decisions/recall.md.",
            id="memory.E001",
        )
    ]
