"""Work deferred until the answer has gone out (`governance.after_response`)."""

from __future__ import annotations

import logging

import pytest

from governance import after_response


@pytest.fixture(autouse=True)
def outside_a_request():
    after_response.run_deferred()
    yield
    after_response.run_deferred()


def test_outside_a_request_work_runs_at_once() -> None:
    done: list[str] = []
    after_response.defer(lambda: done.append("now"))
    assert done == ["now"]


def test_inside_a_request_work_waits_and_runs_in_order() -> None:
    done: list[int] = []
    after_response.request_began()
    after_response.defer(lambda: done.append(1))
    after_response.defer(lambda: done.append(2))
    assert done == []
    after_response.run_deferred()
    assert done == [1, 2]
    after_response.run_deferred()  # nothing runs twice
    assert done == [1, 2]


def test_a_failure_is_logged_without_its_message_and_the_rest_still_runs(caplog) -> None:
    done: list[str] = []

    def recall_usage() -> None:
        raise ValueError("Key (body)=(my secret diary) already exists")

    after_response.request_began()
    after_response.defer(recall_usage)
    after_response.defer(lambda: done.append("after"))
    with caplog.at_level(logging.ERROR, logger="iris.after_response"):
        after_response.run_deferred()
    assert done == ["after"]
    (record,) = caplog.records
    assert record.getMessage() == "after-response work recall_usage failed: ValueError"
    assert "secret" not in caplog.text


def test_once_queues_the_same_work_once_per_request() -> None:
    done: list[str] = []

    def seal() -> None:
        done.append("seal")

    after_response.request_began()
    after_response.defer(seal, once=True)
    after_response.defer(seal, once=True)
    after_response.defer(lambda: done.append("other"))
    after_response.run_deferred()
    assert done == ["seal", "other"]


def test_a_key_queues_work_once_per_request_whatever_the_callable() -> None:
    done: list[str] = []
    after_response.request_began()
    assert after_response.in_request()
    after_response.defer(lambda: done.append("first"), key=("warm", 1))
    after_response.defer(lambda: done.append("second"), key=("warm", 1))
    after_response.defer(lambda: done.append("other member"), key=("warm", 2))
    after_response.run_deferred()
    assert done == ["first", "other member"]
    assert not after_response.in_request()
