"""The deletion work of a data-rights request (being built)."""

from __future__ import annotations

from dsar.models import DataRightsRequest


def run_deletion(request: DataRightsRequest) -> str | None:
    raise NotImplementedError("the deletion work is being built")
