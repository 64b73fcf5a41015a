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
