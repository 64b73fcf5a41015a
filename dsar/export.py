"""The export work of a data-rights request (being built)."""

from __future__ import annotations

from dsar.models import DataRightsRequest


def run_export(request: DataRightsRequest) -> str | None:
    raise NotImplementedError("the export work is being built")
