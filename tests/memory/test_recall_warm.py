"""Warm snapshots: a worker keeps its snapshot of a member current as the member writes,
rebuilds an old one after the answer rather than before it, and a starting server builds
those of the members active lately (docs/decisions/recall.md, "Warm snapshots").

Keeping a snapshot needs committed rows and the change log, so these run on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from memory.models import MemoryEntry
from memory.recall import service as recall_service
from memory.recall import snapshot as recall_snapshot

pytestmark = [pytest.mark.django_db(transaction=True)]

NAME = "lexical"


@pytest.fixture(autouse=True)
def _lexical(settings):
    settings.IRIS_RECALL_SNAPSHOT = True  # tests/conftest.py empties the cache for each test
    settings.IRIS_RECALL_SEMANTIC = NAME


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """The member pk of every snapshot built from the table."""
    built: list[int] = []
    build = recall_snapshot._build

    def counting(member: Any, ranker_name: str, *, follow: bool) -> Any:
        built.append(member.pk)
        return build(member, ranker_name, follow=follow)

    monkeypatch.setattr(recall_snapshot, "_build", counting)
    return built


def _held(member: Any) -> recall_snapshot.Snapshot | None:
    return recall_snapshot._CACHE.get((connection.alias, str(member.tenant_id), member.pk, NAME))


def _write(surface_api: Any, member: Any, body: str, subject: str) -> str:
    response = surface_api.post(
        "/api/v1/memories",
        {
            "userId": str(member.public_id),
            "scope": {"kind": "profile", "userId": str(member.public_id)},
            "category": "preference",
            "body": body,
            "subject": subject,
            "origin": "user-stated",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return str(response.json()["revisionId"])


def _answer(surface_api: Any, member: Any, query: str, **fields: str) -> dict[str, Any]:
    response = surface_api.post(
        "/api/v1/recall",
        {
            "userId": str(member.public_id),
            "scope": {"kind": "profile"},
            "query": query,
            "surface": "assistant",
            "context": "general",
            **fields,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return dict(response.json())


def _recall(surface_api: Any, member: Any, query: str) -> list[str]:
    return [item["entry"]["body"] for item in _answer(surface_api, member, query)["entries"]]


def test_a_write_leaves_the_workers_snapshot_current_for_the_next_recall(
    require_postgres, ready, surface_api, builds, monkeypatch
) -> None:
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 0.0)
    first = _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    # Built once the write's answer had gone out, holding what the write stored.
    assert builds == [ready.pk]
    snap = _held(ready)
    assert snap is not None and snap.known(_uuid(first))
    second = _write(surface_api, ready, "I cycle to work along the river", "commute")
    # Caught up, not rebuilt: the same snapshot now holds the second revision too.
    assert builds == [ready.pk] and _held(ready) is snap and snap.known(_uuid(second))
    assert _recall(surface_api, ready, "what tea do I drink") == [
        "I drink oolong tea in the morning"
    ]
    assert builds == [ready.pk]  # the recall built nothing


def test_a_write_soon_after_a_look_leaves_the_catch_up_to_the_next_recall(
    require_postgres, ready, surface_api, builds, monkeypatch
) -> None:
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 60.0)  # every write is soon
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    snap = _held(ready)
    assert snap is not None
    looks: list[int] = []
    catch_up = recall_snapshot._catch_up
    monkeypatch.setattr(
        recall_snapshot,
        "_catch_up",
        lambda m, s, *rider: looks.append(m.pk) or catch_up(m, s, *rider),
    )
    second = _write(surface_api, ready, "I cycle to work along the river", "commute")
    assert looks == [] and not snap.known(_uuid(second))  # looked a moment ago
    assert _recall(surface_api, ready, "how do I get to work") == [
        "I cycle to work along the river"
    ]
    assert looks == [ready.pk] and snap.known(_uuid(second)) and builds == [ready.pk]
    snap.looked -= recall_snapshot.WARM_AFTER_SECONDS  # as if that long had passed
    third = _write(surface_api, ready, "I keep bees on the roof", "bees")
    assert looks == [ready.pk, ready.pk] and snap.known(_uuid(third))


def test_a_change_outside_a_request_builds_nothing(require_postgres, ready, builds) -> None:
    from memory.services import memory_write
    from tests.factories import as_member, draft

    memory_write(principal=as_member(ready), member=ready, draft=draft(ready, "I like figs"))
    assert builds == [] and _held(ready) is None


def test_an_old_snapshot_answers_once_caught_up_and_is_rebuilt_after_the_answer(
    require_postgres, ready, surface_api, builds, settings, monkeypatch
) -> None:
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    stale = _held(ready)
    assert stale is not None and builds == [ready.pk]
    # Past its lifetime, but it read the change log a moment ago (the log keeps every
    # note for two lifetimes), so it misses nothing it could still be told.
    settings.IRIS_RECALL_SNAPSHOT_SECONDS = 60
    stale.built -= 120
    answered_from: list[Any] = []
    resolve = recall_snapshot._resolve

    def answering(snap: Any, *args: Any, **kwargs: Any) -> Any:
        answered_from.append(snap)
        return resolve(snap, *args, **kwargs)

    monkeypatch.setattr(recall_snapshot, "_resolve", answering)
    assert _recall(surface_api, ready, "tea") == ["I drink oolong tea in the morning"]
    # The answer came from the old snapshot, caught up; after it, a new one replaced it.
    assert answered_from == [stale]
    fresh = _held(ready)
    assert fresh is not None and fresh is not stale
    assert builds == [ready.pk, ready.pk]
    # The same after a write: the write answers, then the snapshot is rebuilt.
    fresh.built -= 120
    later = _write(surface_api, ready, "I moved to Porto last spring", "home")
    newest = _held(ready)
    assert newest is not None and newest is not fresh and newest.known(_uuid(later))


def test_a_snapshot_that_missed_a_lifetime_of_looks_is_rebuilt_before_answering(
    require_postgres, ready, surface_api, builds, settings
) -> None:
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    stale = _held(ready)
    assert stale is not None
    settings.IRIS_RECALL_SNAPSHOT_SECONDS = 60
    stale.built -= 120
    stale.looked -= 120  # notes older than that may have been pruned: not trusted
    assert _recall(surface_api, ready, "tea") == ["I drink oolong tea in the morning"]
    assert builds == [ready.pk, ready.pk]
    assert _held(ready) is not stale


def test_a_starting_server_builds_the_snapshots_of_recently_active_members(
    require_postgres, ready, other_member, surface_api, builds, settings
) -> None:
    from tests.factories import grant_storage

    grant_storage(other_member)
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    _write(surface_api, other_member, "I keep bees on the roof", "bees")
    recall_snapshot.clear()
    builds.clear()
    # The most recently active member first, while the worker's row budget holds them.
    settings.IRIS_RECALL_SNAPSHOT_ROWS = 1
    assert recall_service.warm_start() == 1
    assert builds == [other_member.pk, ready.pk]  # the second did not fit
    assert _held(other_member) is not None and _held(ready) is None
    # The master's connection is closed, so no forked worker shares it.
    assert connection.connection is None
    settings.IRIS_RECALL_SNAPSHOT_ROWS = 100
    recall_snapshot.clear()
    assert recall_service.warm_start() == 2
    # And the next recall of either answers from what was built.
    builds.clear()
    assert _recall(surface_api, ready, "tea") == ["I drink oolong tea in the morning"]
    assert builds == []
    assert MemoryEntry.objects.filter(member=ready).count() == 1


def test_a_starting_server_without_a_change_log_still_starts(
    require_postgres, ready, monkeypatch
) -> None:
    from django.db import DatabaseError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseError("relation memory_recallchange does not exist")

    monkeypatch.setattr(recall_snapshot, "warm_start", broken)
    assert recall_service.warm_start() == 0


def _uuid(text: str) -> Any:
    import uuid

    return uuid.UUID(text)


def _trail_looks(monkeypatch) -> list[tuple[str, int]]:
    """(thread name, member pk) of every catch-up."""
    import threading

    looks: list[tuple[str, int]] = []
    catch_up = recall_snapshot._catch_up

    def counting(m: Any, s: Any, *rider: Any) -> Any:
        looks.append((threading.current_thread().name, m.pk))
        return catch_up(m, s, *rider)

    monkeypatch.setattr(recall_snapshot, "_catch_up", counting)
    return looks


def _settled(timeout: float = 20.0) -> None:
    """Wait until the trail has nothing due and no look under way."""
    import time

    trail = recall_snapshot._FOLLOWER
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with trail._cond:
            if not trail._due and not trail._busy:
                return
        time.sleep(0.02)
    raise AssertionError("the trail never settled")


def test_writes_left_to_the_next_look_are_caught_up_once_they_pause(
    require_postgres, ready, surface_api, builds, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_TRAIL_SECONDS = 0.3
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 60.0)  # every write is soon
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    snap = _held(ready)
    assert snap is not None
    looks = _trail_looks(monkeypatch)
    second = _write(surface_api, ready, "I cycle to work along the river", "commute")
    third = _write(surface_api, ready, "I keep bees on the roof", "bees")
    _settled()
    # No recall asked: the worker's own thread looked once, after the writes paused.
    assert looks == [("recall-follow", ready.pk)]
    assert snap.known(_uuid(second)) and snap.known(_uuid(third))
    assert _held(ready) is snap and builds == [ready.pk]
    recall_snapshot.clear()


def test_a_look_after_the_writes_leaves_the_trail_nothing_to_read(
    require_postgres, ready, surface_api, builds, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_TRAIL_SECONDS = 3.0
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 60.0)
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    looks = _trail_looks(monkeypatch)
    _write(surface_api, ready, "I cycle to work along the river", "commute")
    assert _recall(surface_api, ready, "how do I get to work") == [
        "I cycle to work along the river"
    ]
    _settled()
    assert [thread for thread, _ in looks] == ["MainThread"]  # the recall's look only
    recall_snapshot.clear()


def test_clearing_drops_what_the_trail_has_due(
    require_postgres, ready, surface_api, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_TRAIL_SECONDS = 30.0
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 60.0)
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    _write(surface_api, ready, "I cycle to work along the river", "commute")
    assert recall_snapshot._FOLLOWER._due
    recall_snapshot.clear()
    assert not recall_snapshot._FOLLOWER._due


@pytest.fixture
def no_cascade() -> Any:
    """A revocation whose cascade over the member's rows has not run yet: the recall's read
    of the ledger alone must hold the category back."""
    from consent.signals import sensitive_consent_revoked
    from memory import receivers

    sensitive_consent_revoked.disconnect(dispatch_uid=receivers.DISPATCH_UID)
    yield
    receivers.connect()


def _health_recall(surface_api: Any, member: Any) -> dict[str, Any]:
    return _answer(
        surface_api, member, "what medicine do I take", context="health", destinationTier="local"
    )


def _medical(member: Any) -> None:
    from memory.services import memory_write
    from tests.factories import as_member, draft, grant_category

    grant_category(member, "medical")
    memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "I take insulin with breakfast", category="medical"),
    )


def _counted_ledger_reads(monkeypatch: Any) -> list[int]:
    reads: list[int] = []
    read = recall_service.active_consent_types

    def counted(**kwargs: Any) -> Any:
        reads.append(1)
        return read(**kwargs)

    monkeypatch.setattr(recall_service, "active_consent_types", counted)
    return reads


WITHHELD = {"sensitive-category-without-consent": 1}


def test_a_caught_up_recall_reads_the_consent_ledger_on_the_snapshots_round_trip(
    require_postgres, ready, surface_api, builds, monkeypatch, no_cascade
) -> None:
    from consent.enums import category_consent_type
    from tests.factories import grant, grant_category

    _medical(ready)
    assert len(_health_recall(surface_api, ready)["entries"]) == 1
    assert builds == [ready.pk]
    own_reads = _counted_ledger_reads(monkeypatch)
    riders: list[int] = []
    catch_up = recall_snapshot._catch_up

    def looking(member: Any, snap: Any, riders_asked: Any = ()) -> Any:
        riders.append(len(riders_asked))
        return catch_up(member, snap, riders_asked)

    monkeypatch.setattr(recall_snapshot, "_catch_up", looking)
    grant(ready, category_consent_type("medical"), status="revoked")
    withheld = _health_recall(surface_api, ready)
    assert withheld["entries"] == []
    assert withheld["auditEnvelope"]["suppressionCounts"] == WITHHELD
    grant_category(ready, "medical")
    assert [e["entry"]["body"] for e in _health_recall(surface_api, ready)["entries"]] == [
        "I take insulin with breakfast"
    ]
    # Caught up, never rebuilt, with the ledger riding on each look; no read of its own.
    assert builds == [ready.pk] and riders == [2, 2] and own_reads == []


def test_a_built_snapshot_reads_the_consent_ledger_itself(
    require_postgres, ready, surface_api, builds, monkeypatch, no_cascade
) -> None:
    from consent.enums import category_consent_type
    from tests.factories import grant

    _medical(ready)
    own_reads = _counted_ledger_reads(monkeypatch)
    assert len(_health_recall(surface_api, ready)["entries"]) == 1
    assert builds == [ready.pk] and own_reads == [1]
    recall_snapshot.clear()
    grant(ready, category_consent_type("medical"), status="revoked")
    withheld = _health_recall(surface_api, ready)
    assert withheld["entries"] == []
    assert withheld["auditEnvelope"]["suppressionCounts"] == WITHHELD
    assert builds == [ready.pk, ready.pk] and own_reads == [1, 1]


# -- snapshots followed between recalls ----------------------------------------------------


def _written_elsewhere(member: Any, body: str) -> Any:
    """A write outside a request, as another worker's: the revision it stored."""
    from memory.services import memory_write
    from tests.factories import as_member, draft

    outcome = memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    return outcome.entry.revision_id


def _eventually(check: Any, what: str, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.02)


def test_a_recalled_member_is_followed_between_recalls(
    require_postgres, ready, surface_api, builds, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_FOLLOW_SECONDS = 0.05
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    assert _recall(surface_api, ready, "what tea do I drink")
    snap = _held(ready)
    assert snap is not None
    looks = _trail_looks(monkeypatch)
    # Other workers' writes, one after the other: this worker's snapshot learns of each
    # with no recall asked, at its next look.
    for body in ("I keep bees on the roof", "I sing in a choir on Thursdays"):
        revision = _written_elsewhere(ready, body)
        _eventually(lambda r=revision: snap.known(r), "the followed snapshot never caught up")
    assert {thread for thread, _ in looks} == {"recall-follow"}
    assert {pk for _, pk in looks} == {ready.pk}
    assert _held(ready) is snap and builds == [ready.pk]
    recall_snapshot.clear()
    assert not recall_snapshot._FOLLOWER._until


def test_writes_alone_do_not_make_a_member_followed(
    require_postgres, ready, surface_api, settings, monkeypatch
) -> None:
    settings.IRIS_RECALL_FOLLOW_SECONDS = 0.02
    settings.IRIS_RECALL_TRAIL_SECONDS = 0.2
    monkeypatch.setattr(recall_snapshot, "WARM_AFTER_SECONDS", 60.0)  # every write is soon
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    looks = _trail_looks(monkeypatch)
    _write(surface_api, ready, "I cycle to work along the river", "commute")
    _write(surface_api, ready, "I keep bees on the roof", "bees")
    _settled()
    # The one look once the writes paused, and no following after it.
    assert looks == [("recall-follow", ready.pk)]
    assert not recall_snapshot._FOLLOWER._until
    recall_snapshot.clear()


def test_following_ends_once_the_member_is_quiet_here(
    require_postgres, ready, surface_api, settings, monkeypatch
) -> None:
    import time

    settings.IRIS_RECALL_FOLLOW_SECONDS = 0.05
    monkeypatch.setattr(recall_snapshot, "FOLLOW_WINDOW_SECONDS", 0.3)
    _write(surface_api, ready, "I drink oolong tea in the morning", "tea")
    assert _recall(surface_api, ready, "what tea do I drink")
    _settled()  # the window passed: nothing is due any more
    assert not recall_snapshot._FOLLOWER._until
    looks = _trail_looks(monkeypatch)
    revision = _written_elsewhere(ready, "I keep bees on the roof")
    time.sleep(0.3)  # six intervals: a follower still running would have looked
    assert looks == []
    snap = _held(ready)
    assert snap is not None and not snap.known(revision)  # left to the next recall
    recall_snapshot.clear()


def test_a_worker_follows_only_its_most_recent_members(settings, monkeypatch) -> None:
    import uuid

    settings.IRIS_RECALL_FOLLOW_SECONDS = 30.0  # no look falls due while this runs
    monkeypatch.setattr(recall_snapshot, "warm", lambda member, ranker_name: None)
    follower = recall_snapshot._Follower()
    members = [
        recall_snapshot.MemberRef(pk=pk, tenant_id=uuid.UUID(int=1))
        for pk in range(recall_snapshot.FOLLOW_MEMBERS + 2)
    ]
    for member in members:
        follower.recalled(member, NAME)
    followed = [key[2] for key in follower._until]
    assert followed == [m.pk for m in members[-recall_snapshot.FOLLOW_MEMBERS :]]
    follower.recalled(members[-recall_snapshot.FOLLOW_MEMBERS], NAME)  # used again: newest
    assert [key[2] for key in follower._until][-1] == members[-recall_snapshot.FOLLOW_MEMBERS].pk
    follower.cancel()


def test_a_look_that_fails_ends_the_following(settings, monkeypatch) -> None:
    import uuid

    settings.IRIS_RECALL_FOLLOW_SECONDS = 0.02
    tried: list[int] = []

    def failing(member: Any, ranker_name: str) -> None:
        tried.append(member.pk)
        raise ConnectionError("the database is away")

    monkeypatch.setattr(recall_snapshot, "warm", failing)
    follower = recall_snapshot._Follower()
    member = recall_snapshot.MemberRef(pk=7, tenant_id=uuid.UUID(int=1))
    follower.recalled(member, NAME)
    _eventually(lambda: tried, "the follower never looked")
    _eventually(lambda: not follower._due and not follower._busy, "the follower kept looking")
    # One look, then nothing due: followed again from the member's next recall.
    assert tried == [7] and not follower._until
    follower.cancel()


def test_the_next_look_comes_an_interval_after_the_last(settings) -> None:
    import time
    import uuid

    settings.IRIS_RECALL_FOLLOW_SECONDS = 10.0
    follower = recall_snapshot._Follower()
    member = recall_snapshot.MemberRef(pk=1, tenant_id=uuid.UUID(int=1))
    key = recall_snapshot._key(member, NAME)
    follower._until[key] = time.monotonic() + 60.0
    before = time.monotonic()
    follower._again(key, member, NAME)  # no snapshot held: never at once
    at, since, _, _ = follower._due[key]
    assert at >= before + 5.0 and since >= before
    follower._until[key] = time.monotonic() - 1.0
    follower._due.clear()
    follower._again(key, member, NAME)
    assert key not in follower._due and key not in follower._until  # its window is over
