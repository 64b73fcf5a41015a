"""The access work of a data-rights request (being built)."""

from __future__ import annotations

from dsar.models import DataRightsRequest


def run_access(request: DataRightsRequest) -> str | None:
    raise NotImplementedError("the access work is being built")
