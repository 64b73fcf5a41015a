"""Two devices writing one slot at once, on PostgreSQL, from two threads (two connections)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from governance.principal import Principal
from memory.continuity import services
from memory.continuity.models import ContinuationToken

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _payload(member, device: str) -> dict[str, Any]:
    return {
        "userId": str(member.public_id),
        "scopeKey": f"session:{member.public_id}:s-1",
        "surfaceContext": {"surface": "tara", "sessionId": "s-1"},
        "anchorRef": {"surface": "tara", "kind": "segment", "ref": f"seg-{device}"},
        "posture": "listening",
        "deviceId": device,
        "clientTimestamp": "2025-03-01T12:00:00Z",
    }


def _race(member, stamps: dict[str, datetime]) -> dict[str, services.WriteResult]:
    surface = Principal(kind="surface", id=uuid.uuid4(), tenant_id=member.tenant_id)
    barrier = threading.Barrier(len(stamps))
    results: dict[str, services.WriteResult] = {}
    errors: list[BaseException] = []

    def write(device: str) -> None:
        try:
            barrier.wait()
            results[device] = services.continuation_token_write(
                principal=surface,
                member=member,
                payload=_payload(member, device),
                now=stamps[device],
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(d,)) for d in stamps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    return results


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rounds", range(5))
def test_two_concurrent_writers_make_one_winner_and_one_conflict_notice(
    require_postgres, member, rounds: int
) -> None:
    # The laptop's write was received 2 s after the phone's; which one gets the slot's lock
    # first is up to the threads. Either way the laptop wins and exactly one answer (the
    # one decided second) carries the notice, naming the other device.
    stamps = {"phone": T0, "laptop": T0 + timedelta(seconds=2)}
    results = _race(member, stamps)

    stored = ContinuationToken.objects.get()
    assert stored.device_id == "laptop"
    assert stored.anchor_ref["ref"] == "seg-laptop"
    notices = {d: r.conflict_with for d, r in results.items() if r.conflict_with is not None}
    assert len(notices) == 1
    [(told, other)] = notices.items()
    assert other.device_id == ("phone" if told == "laptop" else "laptop")
    assert results["laptop"].outcome == "written"
    if results["phone"].outcome == "superseded":
        assert told == "phone"
        assert results["phone"].token.device_id == "laptop"
    assert sum(r.created for r in results.values()) == 1
