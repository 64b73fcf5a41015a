"""One member's memory writes on PostgreSQL: writes of one fact take turns, writes of
different facts go on side by side, and taking the member whole waits for both."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection, transaction

from governance.models import User
from memory.models import MemoryEntry, PendingConflict
from memory.rules.conflicts import conflict_key
from memory.services import memory_write
from memory.services.common import _lock_fact, _lock_member, _share_member
from memory.services.types import WriteOutcome
from tests.factories import as_member, draft, grant_storage
from tests.helpers_db import run_together

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def held(take: Callable[[], None]) -> Iterator[None]:
    """`take` a lock in a transaction of another connection, held until the block ends."""
    taken, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                take()
                taken.set()
                release.wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            taken.set()
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(timeout=30)
    assert not errors, errors
    try:
        yield
    finally:
        release.set()
        thread.join(timeout=30)


@contextmanager
def lock_timeout() -> Iterator[None]:
    """Waiting on a lock for more than a moment fails this connection's statements."""
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '300ms'")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")


def _write(member: User, body: str, subject: str) -> WriteOutcome:
    return memory_write(
        principal=as_member(member), member=member, draft=draft(member, body, subject=subject)
    )


def _current(member: User, subject: str) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(member=member, subject=subject, is_current=True))


@pytest.mark.parametrize("rounds", range(3))
def test_two_values_of_one_fact_at_once_leave_one_current_row(
    require_postgres, member, rounds: int
) -> None:
    grant_storage(member)
    bodies = ["I live in Porto", "I live in Braga"]
    outcomes: list[WriteOutcome] = []

    def worker() -> None:
        outcomes.append(_write(member, bodies.pop(), "home"))

    # (One value written at once by several: tests/memory/test_entry_db.py.)
    assert run_together(worker, threads=2) == []
    # The second to take the fact meets the first, and the conflict ladder settles it (a
    # new revision, the stored one kept, or a question for the member, by which came
    # first and when): never two entries of one fact.
    [created, other] = sorted(outcomes, key=lambda o: o.reason != "created")
    assert created.reason == "created"
    [current] = _current(member, "home")
    rows = MemoryEntry.objects.filter(member=member, subject="home")
    assert created.entry is not None
    assert {r.entry_id for r in rows} == {created.entry.entry_id}
    if other.status == "written":
        assert current.revision == 2
    else:
        assert current.revision == 1
    questions = PendingConflict.objects.filter(entry_id=current.entry_id, status="open")
    assert questions.count() == (1 if other.status == "conflict" else 0)


def test_a_write_waits_for_a_write_of_its_own_fact_only(require_postgres, member) -> None:
    grant_storage(member)
    key = conflict_key("preference", None, "tea")
    with held(lambda: _lock_fact(member, key)), lock_timeout():
        # Another fact of the same member goes ahead.
        assert _write(member, "I run on Sundays", "running").reason == "created"
        # The same fact waits; here it gives up, and nothing of it is stored.
        with pytest.raises(OperationalError):
            _write(member, "I drink oolong tea", "tea")
        assert _current(member, "tea") == []
    assert _write(member, "I drink oolong tea", "tea").reason == "created"


def test_writes_share_the_member_and_taking_it_whole_waits_for_them(
    require_postgres, member
) -> None:
    grant_storage(member)
    with held(lambda: _share_member(member)), lock_timeout():
        # A write in flight: another write goes on; forgetting, moving, correcting wait.
        assert _write(member, "I run on Sundays", "running").reason == "created"
        with pytest.raises(OperationalError), transaction.atomic():
            _lock_member(member)
    with held(lambda: _lock_member(member)), lock_timeout():
        # The member taken whole: a write waits.
        with pytest.raises(OperationalError):
            _write(member, "I drink oolong tea", "tea")
    assert _current(member, "tea") == []
