"""The evaluation suites' figures, gathered into one session summary.

A suite records its figures with the `metric` fixture (tests/evals/conftest.py); they
travel as `user_properties` of the test's report, which pytest-xdist carries from its
workers back to the controller. The two hooks below are imported by tests/conftest.py,
which every run loads (the controller of `-n 2` never loads tests/evals/conftest.py), and
print a table and one JSON line (`IRIS-EVALS {...}`) that runs can be compared by.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

PROPERTY = "iris-eval-metric"
JSON_PREFIX = "IRIS-EVALS"

# Filled in the process that prints the summary (the controller under xdist).
_collected: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" or not report.passed:
        return
    for name, value in report.user_properties:
        if name == PROPERTY and isinstance(value, dict):
            figures = dict(value)
            _collected.setdefault(str(figures.pop("suite")), {}).update(figures)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _collected:
        return
    terminalreporter.section("Iris evaluation suites")
    for suite in sorted(_collected):
        figures = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(_collected[suite].items()))
        terminalreporter.write_line(f"{suite}: {figures}")
    line = json.dumps({s: _collected[s] for s in sorted(_collected)}, sort_keys=True)
    terminalreporter.write_line(f"{JSON_PREFIX} {line}")


def _shown(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
