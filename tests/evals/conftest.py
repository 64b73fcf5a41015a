"""The evaluation suites' fixtures: `metric` records a suite's figures for the session
summary (tests/evals/metrics.py prints them); `clock` fixes Iris's time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from tests.evals.generators import T0
from tests.evals.metrics import PROPERTY

# The inspection personas (operators of every role, a member with sensitive memory).
from tests.inspection.conftest import client_for, ops, remembered  # noqa: F401


@pytest.fixture
def metric(request: pytest.FixtureRequest) -> Callable[..., None]:
    """`metric("suite", name=value, ...)`: figures for the session summary."""

    def record(suite: str, **figures: Any) -> None:
        request.node.user_properties.append((PROPERTY, {"suite": suite, **figures}))

    return record


class Clock:
    """Iris's clock (django.utils.timezone.now), standing still until a test moves it."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def move_to(self, at: datetime) -> None:
        self.at = at


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fixed = Clock(T0)
    monkeypatch.setattr(timezone, "now", fixed.now)
    return fixed
