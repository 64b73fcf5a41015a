"""Run limits: caps on a run's writes and recalls, and loop detection (the same write again
and again, a correction that flips back), each refused with a clear code and audited."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from governance.kernel_models import Run
from governance.models import AuditEvent, User
from governance.pipeline import Denied, Effect, Hook, Operation, govern
from governance.principal import Principal
from governance.runs import WriteRecord, content_fingerprint, detect_loop, run_step_record

ENTRY = "entry-1"


def surface_of(member: User) -> Principal:
    return Principal("surface", uuid.uuid4(), member.tenant_id, surface="assistant")


def write(
    member: User,
    run_id: str | None,
    body: str,
    *,
    name: str = "memory.write",
    entry: str = ENTRY,
    **attributes,
) -> None:
    govern(
        Hook.PRE_WRITE,
        Operation(
            name=name,
            effect=Effect.WRITE,
            principal=surface_of(member),
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            subject_ids=(entry,),
            attributes={"run_id": run_id, **attributes},
            text=body,
        ),
    )


def recall(member: User, run_id: str) -> None:
    govern(
        Hook.PRE_RECALL,
        Operation(
            name="memory.recall",
            effect=Effect.READ,
            principal=surface_of(member),
            tenant_id=member.tenant_id,
            member_id=member.public_id,
            attributes={"run_id": run_id, "egress_tier": "local"},
        ),
    )


def denials(code: str) -> int:
    return AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code=code
    ).count()


@pytest.mark.django_db
def test_a_run_over_its_write_cap_is_stopped(member, settings) -> None:
    settings.IRIS_RUN_MAX_WRITES = 3
    run_id = str(uuid.uuid4())
    for n in range(3):
        write(member, run_id, f"fact {n}", entry=f"entry-{n}")
    with pytest.raises(Denied) as caught:
        write(member, run_id, "fact 3", entry="entry-3")
    assert caught.value.code == "run-write-limit" and caught.value.status == 403
    assert denials("run-write-limit") == 1
    event = AuditEvent.objects.get(reason_code="run-write-limit")
    assert event.payload["decisions"][-1]["check"] == "run-limits"
    assert Run.objects.get(run_id=run_id).write_count == 3  # refused calls do not count
    # Another run, and a call in no run, are not affected.
    write(member, str(uuid.uuid4()), "fact 3", entry="entry-3")
    write(member, None, "fact 4", entry="entry-4")


@pytest.mark.django_db
def test_a_run_over_its_recall_cap_is_stopped(member, settings) -> None:
    settings.IRIS_RUN_MAX_RECALLS = 2
    run_id = str(uuid.uuid4())
    recall(member, run_id)
    recall(member, run_id)
    with pytest.raises(Denied) as caught:
        recall(member, run_id)
    assert caught.value.code == "run-recall-limit"
    assert denials("run-recall-limit") == 1
    assert Run.objects.get(run_id=run_id).recall_count == 2


@pytest.mark.django_db
def test_the_same_write_a_third_time_is_a_loop(member) -> None:
    run_id = str(uuid.uuid4())
    write(member, run_id, "likes tea")
    write(member, run_id, "likes tea")  # one retry is fine
    with pytest.raises(Denied) as caught:
        write(member, run_id, "likes tea")
    assert caught.value.code == "run-loop-detected"
    assert denials("run-loop-detected") == 1
    # The same text elsewhere, or other text here, is not that loop.
    write(member, run_id, "likes tea", entry="entry-2")
    write(member, run_id, "likes green tea")


@pytest.mark.django_db
def test_a_correction_that_flips_back_is_a_loop(member) -> None:
    run_id = str(uuid.uuid4())
    write(member, run_id, "lives in Paris", name="memory.correct")
    write(member, run_id, "lives in London", name="memory.correct")
    with pytest.raises(Denied) as caught:
        write(member, run_id, "lives in Paris", name="memory.correct")
    assert caught.value.code == "run-loop-detected"
    write(member, run_id, "lives in Rome", name="memory.correct")


@pytest.mark.django_db
def test_a_flip_is_seen_at_once_when_the_replaced_text_is_known(member) -> None:
    run_id = str(uuid.uuid4())
    paris = content_fingerprint("lives in Paris")
    write(member, run_id, "lives in London", name="memory.correct", previous_fingerprint=paris)
    with pytest.raises(Denied) as caught:
        write(
            member,
            run_id,
            "lives in Paris",
            name="memory.correct",
            previous_fingerprint=content_fingerprint("lives in London"),
        )
    assert caught.value.code == "run-loop-detected"


@pytest.mark.django_db
def test_the_run_row_keeps_hashes_not_text(member) -> None:
    run_id = str(uuid.uuid4())
    write(member, run_id, "my cat is called Ziggy")
    run = Run.objects.get(run_id=run_id)
    assert "Ziggy" not in str(run.recent_writes)
    assert run.recent_writes[0]["c"] == content_fingerprint("my cat is called Ziggy")


@pytest.mark.django_db
def test_a_held_call_does_not_count_against_the_run(member, surface_token, settings) -> None:
    from governance.models import SurfaceClient
    from governance.pipeline import HeldForApproval

    settings.IRIS_RUN_MAX_WRITES = 1
    client = SurfaceClient.objects.get()
    surface = Principal("surface", client.id, client.tenant_id, surface="assistant")
    run_id = str(uuid.uuid4())
    run_step_record(principal=surface, run_id=run_id, tool="web_fetch", read_external_content=True)
    for _ in range(3):
        with pytest.raises(HeldForApproval):
            write(member, run_id, "likes coffee", name="memory.correct")
    assert Run.objects.get(run_id=run_id).write_count == 0
    write(member, run_id, "likes coffee", name="memory.write")
    assert Run.objects.get(run_id=run_id).write_count == 1


# -- the pure rule ---------------------------------------------------------------------------


def record(write: str, content: str, subject: str = "s", previous: str = "") -> WriteRecord:
    return WriteRecord(write=write, subject=subject, content=content, previous=previous)


def test_detect_loop_rules() -> None:
    a, b = record("w-a", "A"), record("w-b", "B")
    assert not detect_loop([], a, repeats=3)
    assert not detect_loop([a], a, repeats=3)
    assert detect_loop([a, a], a, repeats=3)
    assert detect_loop([a, b], a, repeats=3)  # A -> B -> A
    assert not detect_loop([a, b], record("w-c", "C"), repeats=3)
    assert not detect_loop([a, b], record("w-a2", "A", subject="other"), repeats=3)
    assert detect_loop(
        [record("w-b", "B", previous="A")], record("w-a", "A", previous="B"), repeats=3
    )
    assert not detect_loop([record("w-1", "")], record("w-2", ""), repeats=3)


@given(st.lists(st.integers(min_value=0, max_value=10_000), unique=True, max_size=40))
def test_distinct_writes_never_look_like_a_loop(values: list[int]) -> None:
    history: list[WriteRecord] = []
    for value in values:
        new = record(f"w{value}", f"c{value}")
        assert not detect_loop(history, new, repeats=3)
        history.append(new)


@given(st.lists(st.sampled_from("ABC"), min_size=1, max_size=30))
def test_going_back_to_replaced_text_is_always_caught(texts: list[str]) -> None:
    history: list[WriteRecord] = []
    for n, text in enumerate(texts):
        new = record(f"w{n}", text)
        contents = [r.content for r in history]
        flips_back = bool(contents) and text != contents[-1] and text in contents[:-1]
        assert detect_loop(history, new, repeats=3) == flips_back
        if not flips_back:
            history.append(new)


# -- concurrency (PostgreSQL) -------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_never_exceed_the_cap(member, settings, require_postgres) -> None:
    settings.IRIS_RUN_MAX_WRITES = 5
    run_id = str(uuid.uuid4())
    write(member, run_id, "warm-up", entry="entry-0")
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            write(member, run_id, f"fact {n}", entry=f"entry-{n}")
            result = "ok"
        except Denied as exc:
            result = exc.code
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("ok") == 4
    assert outcomes.count("run-write-limit") == 6
    assert Run.objects.get(run_id=run_id).write_count == 5
