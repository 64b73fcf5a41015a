"""`.env.example` documents every variable Iris reads from the environment."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READERS = (
    r"env_(?:bool|str|int|float|list)\(\s*\"([A-Z][A-Z0-9_]+)\""
    r"|required_in_production\(\s*\"([A-Z][A-Z0-9_]+)\""
)
# Read by tools, not by Iris's settings.
NOT_OURS = {"DJANGO_SETTINGS_MODULE"}


def _read_by_iris() -> set[str]:
    names: set[str] = set()
    for path in [*(ROOT / "iris_site").glob("*.py"), *(ROOT / "memory").rglob("*.py")]:
        for match in re.finditer(READERS, path.read_text()):
            names.add(match.group(1) or match.group(2))
    names.add("IRIS_EMBEDDING_BACKEND")  # memory.recall.ranking.embedding.BACKEND_ENV
    return names - NOT_OURS


def test_every_variable_iris_reads_is_in_env_example() -> None:
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert _read_by_iris() - documented == set()


def test_the_scan_finds_the_variables_it_must() -> None:
    found = _read_by_iris()
    assert {"SECRET_KEY", "IRIS_MASTER_KEY", "REDIS_URL", "IRIS_RECALL_STATS_SECONDS"} <= found
