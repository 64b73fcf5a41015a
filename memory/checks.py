"""Memory's checks for `manage.py doctor` (Django system checks tagged `doctor`).

They read the database, so they run only when a database is named: `doctor` does, a plain
`manage.py check` does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from governance.doctor import DOCTOR_TAG


def _migrations_pending() -> bool:
    """`migrate` runs the checks on the database it migrates: on a fresh or older database
    the triggers are what the pending migrations install, not a fault (and `doctor` says
    "migrations: N pending" itself)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


@checks.register(DOCTOR_TAG)
def recall_change_log(
    app_configs: Sequence[Any] | None = None, databases: Sequence[str] | None = None, **_: Any
) -> list[checks.CheckMessage]:
    if not databases or _migrations_pending():
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


@checks.register(DOCTOR_TAG)
def recall_ranking(
    app_configs: Sequence[Any] | None = None, databases: Sequence[str] | None = None, **_: Any
) -> list[checks.CheckMessage]:
    # Only under `doctor` (which names a database): finding out loads the model, which a
    # plain `manage.py check` or `makemigrations` has no use for.
    if not databases:
        return []
    from memory.recall.service import ranker_state

    state = ranker_state()
    if not state.fallback:
        return []
    return [
        checks.Warning(
            f"recall ranking: {state.configured} is configured but the embedding model "
            f"cannot load ({state.reason}); recall ranks with {state.active} (BM25) until "
            "it can",
            hint="Run `make install` (it installs the model), then restart the app.",
            id="memory.W001",
        )
    ]


def recall_ranking_note() -> dict[str, Any]:
    """For `/api/v1/health`: which ranker recall uses, and in plain words whether it is the
    configured one. The reason itself may name paths on disk: `doctor` gives it."""
    from memory.recall.service import ranker_state

    state = ranker_state()
    if state.fallback:
        detail = (
            f"Recall is configured for {state.configured} ranking but the embedding model "
            f"cannot load, so it ranks with {state.active} (BM25) instead. Run "
            "`manage.py doctor` for the reason."
        )
    else:
        detail = f"Recall ranks with {state.active}, as configured."
    return {
        "ranker": state.active,
        "configuredRanker": state.configured,
        "fallback": state.fallback,
        "detail": detail,
    }
