"""The live recall benchmark's pure helpers: how it scores answers and finds each worker's
first recall (the benchmark itself is not part of `make test`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "recall_live.py"


@pytest.fixture(scope="module")
def live() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recall_live", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["recall_live"] = module
    spec.loader.exec_module(module)
    return module


def test_quality_counts_an_unanswered_question_as_a_miss(live: ModuleType) -> None:
    scores = live.quality([["a", "x"], None], [frozenset({"a"}), frozenset({"b"})])
    assert scores == {"hit@12": 0.5, "ndcg@12": 0.5}


def test_quality_ranks_by_the_returned_order(live: ModuleType) -> None:
    # The relevant memory second of the answer: a hit, with the gain of rank 2 (1/log2 3).
    scores = live.quality([["x", "a", "y"]], [frozenset({"a"})])
    assert scores["hit@12"] == 1.0
    assert scores["ndcg@12"] == pytest.approx(0.6309, abs=1e-4)


def test_quality_misses_what_lies_beyond_the_budget(live: ModuleType) -> None:
    answer = [f"x{i}" for i in range(12)] + ["a"]
    assert live.quality([answer], [frozenset({"a"})])["hit@12"] == 0.0


def test_quality_of_a_question_whose_memories_were_not_written_is_a_miss(live: ModuleType) -> None:
    assert live.quality([["a"]], [frozenset()]) == {"hit@12": 0.0, "ndcg@12": 0.0}


def test_missed_names_the_questions_quality_counts_as_misses(live: ModuleType) -> None:
    answers = [["a"], None, ["x"], [f"x{i}" for i in range(12)] + ["a"], ["b"]]
    wanted = [frozenset({"a"})] * 4 + [frozenset()]
    assert live.missed(answers, wanted) == [1, 2, 3, 4]
    hits = 1 - len(live.missed(answers, wanted)) / len(answers)
    assert live.quality(answers, wanted)["hit@12"] == pytest.approx(hits)


def test_quarters_cover_the_stream_once(live: ModuleType) -> None:
    parts = live.quarters(10)
    assert [list(r) for r in parts] == [[0, 1], [2, 3], [4, 5], [6, 7, 8, 9]]


def test_first_per_worker_takes_each_pids_first_answered_recall(live: ModuleType) -> None:
    order = ["r0", "r1", "r2", "r3", "r4"]
    pid_of = {"r0": "11", "r1": "11", "r2": "12", "r3": "13", "r4": "12"}
    # r3 timed out (no latency): worker 13 has no answered recall to report.
    latency_of = {"r0": 0.5, "r1": 0.1, "r2": 0.4, "r4": 0.2}
    assert live.first_per_worker(order, pid_of, latency_of) == {"11": 0.5, "12": 0.4}


def test_worker_of_reads_tag_and_pid_from_the_access_log(live: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text("r0 <101> 200\n- <102> 200\nf0 <102> 400\n")
    assert live.worker_of(log) == {"r0": "101", "f0": "102"}


def test_drift_is_what_live_use_adds_to_the_questions_own_difference(live: ModuleType) -> None:
    from types import SimpleNamespace

    memories = [SimpleNamespace(entry_id=f"m{i}") for i in range(8)]
    asked = [live.Question(f"q{i}", frozenset({i})) for i in range(8)]
    wanted = [frozenset({f"m{i}"}) for i in range(8)]
    # Live: the first quarter both hit, the last quarter one of two. Control: the last
    # quarter's second question is missed there too (a hard question), so usage adds nothing.
    live_answers = [["m0"], ["m1"], ["m2"], ["m3"], ["m4"], ["m5"], ["m6"], ["x"]]
    control = [["m0"], ["m1"], ["m2"], ["m3"], ["m4"], ["m5"], ["m6"], ["y"]]
    figures = live.drift(live_answers, wanted, control, asked, memories)
    assert figures == {
        "last_less_first_quarter": -0.5,
        "control_last_less_first_quarter": -0.5,
        "drift_from_usage": 0.0,
    }
    # The same live answers against a control that hits everything: the drift is usage's.
    perfect = [[f"m{i}"] for i in range(8)]
    assert live.drift(live_answers, wanted, perfect, asked, memories)["drift_from_usage"] == -0.5
    assert live.drift(live_answers, wanted, None, asked, memories) == {
        "last_less_first_quarter": -0.5
    }
