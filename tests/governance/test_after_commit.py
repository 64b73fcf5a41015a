"""`governance.after_commit`: work that waits for the transaction to commit."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from governance.after_commit import after_commit

pytestmark = pytest.mark.django_db(transaction=True)


class FakeTask:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def apply_async(self, **options: Any) -> None:
        self.sent.append(options)


def test_work_runs_when_the_transaction_commits_and_not_before() -> None:
    done: list[tuple[Any, ...]] = []
    with transaction.atomic():
        after_commit(lambda *a, **k: done.append((a, k)), 1, two=2)
        assert done == []
    assert done == [((1,), {"two": 2})]


def test_a_rollback_drops_the_work() -> None:
    done: list[int] = []
    with pytest.raises(RuntimeError), transaction.atomic():
        after_commit(done.append, 1)
        raise RuntimeError("rolled back")
    assert done == []


def test_outside_a_transaction_the_work_runs_at_once() -> None:
    done: list[int] = []
    after_commit(done.append, 1)
    assert done == [1]


def test_a_task_is_enqueued_on_commit_with_its_arguments() -> None:
    task = FakeTask()
    with transaction.atomic():
        after_commit(task, tenant_id="t", batch=5)
        after_commit(task, "a", "b")
        assert task.sent == []
    assert task.sent == [
        {"kwargs": {"tenant_id": "t", "batch": 5}},
        {"args": ("a", "b"), "kwargs": {}},
    ]


def test_once_queues_the_same_work_once_per_transaction() -> None:
    done: list[str] = []

    def seal() -> None:
        done.append("seal")

    with transaction.atomic():
        after_commit(seal, once=True)
        after_commit(seal, once=True)
    assert done == ["seal"]
    with transaction.atomic():
        after_commit(seal, once=True)
    assert done == ["seal", "seal"]


def test_once_takes_no_arguments() -> None:
    with pytest.raises(TypeError):
        after_commit(print, "x", once=True)


def test_a_celery_task_runs_eagerly_in_the_tests(settings) -> None:
    from iris_site.celery import app

    @app.task(name="tests.after_commit.echo")
    def echo(value: str) -> str:
        ran.append(value)
        return value

    ran: list[str] = []
    with transaction.atomic():
        after_commit(echo, value="x")
        assert ran == []
    assert ran == ["x"]


class BrokerDownTask(FakeTask):
    """A task whose broker cannot be reached; `apply` is the in-process run."""

    name = "tests.after_commit.broker_down"

    def __init__(self, error: Exception, fails: bool = False) -> None:
        super().__init__()
        self.error, self.fails = error, fails
        self.ran: list[dict[str, Any]] = []

    def apply_async(self, **options: Any) -> None:
        raise self.error

    def apply(self, **options: Any) -> None:
        self.ran.append(options)
        if self.fails:
            raise RuntimeError("the job failed")


def test_a_job_the_broker_cannot_take_runs_in_process_and_is_logged(caplog) -> None:
    from kombu.exceptions import OperationalError

    task = BrokerDownTask(OperationalError("Error 111 connecting to 127.0.0.1:6390."))
    with caplog.at_level("ERROR", logger="iris.jobs"), transaction.atomic():
        after_commit(task, "t-1", batch=5)
    assert task.ran == [{"args": ("t-1",), "kwargs": {"batch": 5}, "throw": True}]
    assert [r.getMessage() for r in caplog.records] == [
        "job tests.after_commit.broker_down not queued (broker: OperationalError); "
        "running it in-process"
    ]


def test_a_job_that_fails_in_process_is_logged_and_the_commit_stands(caplog) -> None:
    import redis

    task = BrokerDownTask(redis.exceptions.ConnectionError("refused"), fails=True)
    with caplog.at_level("ERROR", logger="iris.jobs"), transaction.atomic():
        after_commit(task, tenant_id="t")
    assert len(task.ran) == 1
    assert caplog.records[-1].getMessage() == (
        "job tests.after_commit.broker_down failed in-process: RuntimeError"
    )


def test_an_error_that_is_not_the_brokers_is_raised() -> None:
    task = BrokerDownTask(ValueError("bad arguments"))
    with pytest.raises(ValueError), transaction.atomic():
        after_commit(task, tenant_id="t")
    assert task.ran == []
