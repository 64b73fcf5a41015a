"""Input serializers that share their bound fields still validate each payload on its own."""

from __future__ import annotations

import threading
import uuid

from memory.serializers import MemoryWriteIn

MEMBER = str(uuid.uuid4())


def _payload(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "userId": MEMBER,
        "scope": {"kind": "profile", "userId": MEMBER},
        "category": "fact",
        "body": "Likes walking by the river",
        "origin": "user-stated",
    }
    body.update(overrides)
    return body


def test_instances_share_one_field_set_per_thread() -> None:
    first, second = MemoryWriteIn(data=_payload()), MemoryWriteIn(data=_payload())
    assert first.fields is second.fields


def test_no_request_s_data_stays_reachable_from_the_shared_fields() -> None:
    serializer = MemoryWriteIn(data=_payload(body="A canary body 5f1e"))
    assert serializer.is_valid(), serializer.errors
    root = serializer.fields["body"].root
    assert root is not serializer
    assert not hasattr(root, "initial_data")
    assert "5f1e" not in repr(vars(root))


def test_errors_and_data_belong_to_their_own_instance() -> None:
    bad = MemoryWriteIn(data=_payload(body="", category="not-a-category"))
    good = MemoryWriteIn(data=_payload(multiActor={"actorName": "Sam"}))
    assert not bad.is_valid()
    assert good.is_valid(), good.errors
    assert set(bad.errors) == {"body", "category"}
    assert good.validated_data["body"] == "Likes walking by the river"
    assert good.validated_data["multiActor"]["actorName"] == "Sam"
    # The nested serializer's own rule still runs on the shared fields.
    both = MemoryWriteIn(data=_payload(multiActor={"actorName": "Sam", "actorHandle": "h1"}))
    assert not both.is_valid()
    assert "multiActor" in both.errors
    again = MemoryWriteIn(data=_payload())
    assert again.is_valid(), again.errors
    assert "multiActor" not in again.validated_data


def test_each_thread_builds_its_own_fields() -> None:
    seen: list[object] = []

    def build() -> None:
        serializer = MemoryWriteIn(data=_payload())
        assert serializer.is_valid(), serializer.errors
        seen.append(serializer.fields)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 2
    assert seen[0] is not seen[1]
