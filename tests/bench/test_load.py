"""The load benchmark's pure helpers: the mix, the percentiles and what counts as lost
(the benchmark itself is not part of `make test`)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[2] / "bench" / "load.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("load_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["load_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_the_mix_is_seventy_recall_twenty_write_ten_other(bench: ModuleType) -> None:
    # 1000 evenly spaced draws land exactly on the weights (out of 1000).
    drawn = Counter(bench.pick(bench.MIX, (i + 0.5) / 1000) for i in range(1000))
    assert drawn["recall"] == 700
    assert drawn["write"] == 200
    others = ("consent", "forget", "continuity", "data-rights")
    assert [drawn[op] for op in others] == [25, 25, 25, 25]


@pytest.mark.parametrize(
    ("u", "op"),
    [
        (0.0, "recall"),
        (0.6999, "recall"),
        (0.7, "write"),
        (0.8999, "write"),
        (0.9, "consent"),
        (0.925, "forget"),
        (0.95, "continuity"),
        (0.975, "data-rights"),
        (0.99999, "data-rights"),
    ],
)
def test_pick_maps_a_draw_to_its_operation(bench: ModuleType, u: float, op: str) -> None:
    assert bench.pick(bench.MIX, u) == op


@given(st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_every_draw_picks_an_operation_of_the_mix(bench: ModuleType, u: float) -> None:
    assert bench.pick(bench.MIX, u) in {name for name, _ in bench.MIX}


@pytest.mark.parametrize(
    ("p", "expected"), [(50, 5.0), (95, 10.0), (99, 10.0), (10, 1.0), (0, 1.0)]
)
def test_percentile_is_nearest_rank(bench: ModuleType, p: float, expected: float) -> None:
    values = [float(v) for v in (7, 3, 9, 1, 5, 2, 8, 4, 10, 6)]
    assert bench.percentile(values, p) == expected


def test_percentile_of_nothing_is_none(bench: ModuleType) -> None:
    assert bench.percentile([], 95) is None


def test_summary_counts_errors_by_the_operations_expected_answers(bench: ModuleType) -> None:
    S = bench.Sample
    samples = [
        S("recall", 0.010, 200),
        S("recall", 0.030, 500),  # a 5xx: an error, still timed
        S("recall", 5.000, None),  # a timeout: an error, not timed
        S("data-rights", 0.020, 409),  # an open request already: the API's answer
        S("write", 0.040, 400),  # a write refused as invalid: not what the bench sends
        S("floor", 0.005, 400),  # the floor's 400 is its answer, and not in the mix
    ]
    summary = bench.summarise(samples, seconds=2.0)
    assert summary["ops"]["recall"] == {
        "count": 3,
        "per_second": 1.5,
        "p50_ms": 10.0,
        "p95_ms": 30.0,
        "p99_ms": 30.0,
        "errors": 2,
    }
    assert summary["ops"]["data-rights"]["errors"] == 0
    assert summary["ops"]["write"]["errors"] == 1
    assert summary["ops"]["floor"]["errors"] == 0
    assert summary["requests"] == 5
    assert summary["errors"] == 3
    assert summary["error_rate"] == 0.6
    assert summary["per_second"] == 2.5


def test_lost_names_unreadable_writes_and_forgets_still_present(bench: ModuleType) -> None:
    status_of = {"a": 200, "b": 404, "c": 404, "d": 200, "e": None}
    missing = bench.lost(["a", "b", "c", "d", "e"], ["c", "d"], status_of)
    # b and e were acknowledged and not forgotten, yet do not read back; d was forgotten
    # and still reads back; c is gone as it should be.
    assert missing == {"writes_missing": ["b", "e"], "forgets_present": ["d"]}


def test_nothing_lost_when_every_write_reads_and_every_forget_is_gone(bench: ModuleType) -> None:
    assert bench.lost(["a", "b"], ["b"], {"a": 200, "b": 404}) == {
        "writes_missing": [],
        "forgets_present": [],
    }
