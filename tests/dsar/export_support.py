"""Data-rights test helpers: a staging folder per test, and requests filed and worked."""

from __future__ import annotations

from typing import Any

import pytest

from dsar import services, work
from dsar.models import DataRightsRequest
from governance.models import User
from tests.factories import as_member


@pytest.fixture(autouse=True)
def staging(tmp_path, settings):
    """Each test's own export staging folder."""
    settings.IRIS_EXPORT_DIR = tmp_path / "exports"
    return settings.IRIS_EXPORT_DIR


def file_request(member: User, kind: str, **payload: Any) -> DataRightsRequest:
    """Filed by the member's own session, so verified at once (its work not yet run)."""
    return services.data_rights_open(
        principal=as_member(member), member=member, kind=kind, payload=payload
    )


def worked(member: User, kind: str = "export", **payload: Any) -> DataRightsRequest:
    """A request filed and carried through its work."""
    request = file_request(member, kind, **payload)
    work.process(request.id)
    return DataRightsRequest.objects.select_related("member").get(id=request.id)
