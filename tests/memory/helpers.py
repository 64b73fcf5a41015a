"""Moved to tests/factories.py, the one home of the tests' builders.

Kept only so that branches written against the old path still import after they are
merged; import from `tests.factories`, and delete this file once nothing imports it.
"""

from typing import Any

from tests import factories


def __getattr__(name: str) -> Any:
    return getattr(factories, name)
