"""The evaluation suites' fixtures: `metric` records a suite's figures for the session
summary (tests/evals/metrics.py prints them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.evals.metrics import PROPERTY


@pytest.fixture
def metric(request: pytest.FixtureRequest) -> Callable[..., None]:
    """`metric("suite", name=value, ...)`: figures for the session summary."""

    def record(suite: str, **figures: Any) -> None:
        request.node.user_properties.append((PROPERTY, {"suite": suite, **figures}))

    return record
