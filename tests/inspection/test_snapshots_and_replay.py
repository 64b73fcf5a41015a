"""The operator sees exactly the granted snapshot, redacted outside a data-rights
fulfilment; a replay shows it as it was seen after the member edits or forgets entries;
reads stop when the grant expires (fixed clocks throughout)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.errors import IrisError
from governance.models import AuditEvent
from inspection import jobs, services
from inspection.enums import InspectionState as S
from inspection.models import InspectionPolicy, SnapshotRead
from memory.services import Correction, memory_correct, memory_forget, memory_hard_delete
from tests.factories import NOW, as_member, as_system, written
from tests.factories import mention as person
from tests.inspection.conftest import as_operator, move, request

pytestmark = pytest.mark.django_db


def granted(ops, member, **kwargs):
    inspection = request(ops["support"], member, now=NOW, **kwargs)
    return move(ops["admin"], inspection, "granted", now=NOW + timedelta(minutes=1))


def read(ops, inspection, minutes: int = 5):
    return services.inspection_read_snapshot(
        principal=as_operator(ops["support"]),
        inspection_id=inspection.id,
        now=NOW + timedelta(minutes=minutes),
    )


def replay(user, inspection, days: int = 30):
    return services.inspection_replay(
        principal=as_operator(user), inspection_id=inspection.id, now=NOW + timedelta(days=days)
    )


def test_the_requester_sees_exactly_the_granted_revisions_with_pii_tokenised(ops, remembered):
    member, entries = remembered
    inspection = granted(ops, member)
    view = read(ops, inspection)
    assert [i["entryId"] for i in view.items] == [
        str(entries["colour"].entry_id),
        str(entries["city"].entry_id),
    ]
    city = view.items[1]
    assert "Baker Street" not in city["body"] and "7946" not in city["body"]
    assert "⟦pii:phone:" in city["body"] and "⟦pii:address:" in city["body"]
    assert view.items[0]["body"] == "My favourite colour is blue"
    assert SnapshotRead.objects.filter(inspection=inspection, kind="viewed").count() == 1
    event = AuditEvent.objects.get(action="iris.admin_inspection.snapshot.viewed")
    assert event.payload["entryIds"] == [i["entryId"] for i in view.items]
    assert "Baker" not in str(event.payload)


def test_people_the_member_mentions_are_redacted_outside_a_dsar(ops, ready):
    written(ready, "Lunch with my sister on Sundays", multi_actor=person("Anna"))
    view = read(ops, granted(ops, ready))
    assert view.items[0]["multiActor"] is None


def test_a_dsar_fulfilment_shows_mentions_and_identifiers_to_legal(ops, remembered):
    member, _ = remembered
    written(member, "Lunch with my sister on Sundays", multi_actor=person("Anna"))
    inspection = request(ops["legal"], member, path="dsar-fulfillment", now=NOW)
    move(ops["legal2"], inspection, "granted", now=NOW)
    view = services.inspection_read_snapshot(
        principal=as_operator(ops["legal"]), inspection_id=inspection.id, now=NOW
    )
    bodies = {i["body"] for i in view.items}
    assert any("Baker Street" in b for b in bodies)
    (mentioned,) = [i for i in view.items if i["multiActor"]]
    assert mentioned["multiActor"]["relationshipNote"] == "my sister"


def test_only_the_requester_reads_and_not_after_expiry(ops, remembered):
    member, _ = remembered
    inspection = granted(ops, member)
    with pytest.raises(IrisError) as caught:
        services.inspection_read_snapshot(
            principal=as_operator(ops["admin"]), inspection_id=inspection.id, now=NOW
        )
    assert caught.value.code == "not-permitted"
    # Default grant: four hours from the grant.
    assert inspection.expires_at == NOW + timedelta(minutes=1, hours=4)
    read(ops, inspection, minutes=240)
    with pytest.raises(IrisError) as caught:
        read(ops, inspection, minutes=241)
    assert (caught.value.code, caught.value.status) == ("grant-expired", 403)
    assert AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code="grant-expired"
    ).exists()
    assert SnapshotRead.objects.filter(inspection=inspection).count() == 1


def test_the_tenant_sets_the_grant_hours_and_the_job_closes_expired_grants(ops, remembered, tenant):
    member, _ = remembered
    services.inspection_policy_set(
        principal=as_operator(ops["admin"]), tenant=tenant, grant_hours=1
    )
    assert InspectionPolicy.objects.get(tenant=tenant).grant_hours == 1
    inspection = granted(ops, member)
    assert inspection.expires_at == NOW + timedelta(minutes=61)
    assert jobs.expire_grants(tenant=tenant, now=NOW + timedelta(minutes=60)) == 0
    assert jobs.expire_grants(tenant=tenant, now=NOW + timedelta(minutes=61)) == 1
    assert jobs.expire_grants(tenant=tenant, now=NOW + timedelta(minutes=90)) == 0
    inspection.refresh_from_db()
    assert inspection.state == S.CLOSED
    assert inspection.trail.order_by("-position").first().reason_code == "grant-expired"
    with pytest.raises(IrisError) as caught:
        read(ops, inspection, minutes=70)
    assert caught.value.code == "grant-expired"


def test_only_an_admin_sets_the_time_boxes(ops, tenant):
    with pytest.raises(IrisError) as caught:
        services.inspection_policy_set(
            principal=as_operator(ops["support"]), tenant=tenant, grant_hours=48
        )
    assert caught.value.code == "not-permitted"
    with pytest.raises(IrisError) as caught:
        services.inspection_policy_set(
            principal=as_operator(ops["admin"]), tenant=tenant, grant_hours=0
        )
    assert caught.value.field == "grantHours"


def test_pending_requests_expire_into_denied(ops, remembered, tenant):
    member, _ = remembered
    inspection = request(ops["support"], member, now=NOW)
    assert inspection.pending_until == NOW + timedelta(hours=72)
    assert jobs.expire_pending(tenant=tenant, now=NOW + timedelta(hours=71)) == 0
    assert jobs.expire_pending(tenant=tenant, now=NOW + timedelta(hours=72)) == 1
    assert jobs.expire_pending(tenant=tenant, now=NOW + timedelta(hours=73)) == 0
    inspection.refresh_from_db()
    assert inspection.state == S.DENIED
    with pytest.raises(IrisError) as caught:
        move(ops["admin"], inspection, "granted")
    assert caught.value.code == "transition-not-allowed"


def test_replay_equals_what_was_granted_after_edits_and_forgetting(ops, remembered):
    member, entries = remembered
    inspection = granted(ops, member)
    seen = read(ops, inspection)
    first = replay(ops["legal"], inspection, days=0)
    assert first.items == seen.items

    memory_correct(
        principal=as_member(member),
        member=member,
        entry_id=entries["colour"].entry_id,
        correction=Correction(body="My favourite colour is green"),
        now=NOW + timedelta(hours=1),
    )
    forgotten_at = NOW + timedelta(hours=2)
    memory_forget(
        principal=as_member(member),
        member=member,
        entry_id=entries["city"].entry_id,
        now=forgotten_at,
    )
    later = replay(ops["legal"], inspection)
    colour, city = later.items
    # The edit does not show: the revision granted is what was seen.
    assert colour == seen.items[0]
    assert colour["body"] == "My favourite colour is blue"
    # The forgotten entry replays as forgotten since, never its text.
    assert city["forgotten"] is True
    assert city["forgottenSince"] == forgotten_at.isoformat().replace("+00:00", "Z")
    assert "body" not in city and "Baker" not in str(city)
    assert SnapshotRead.objects.filter(inspection=inspection, kind="replayed").count() == 2
    assert AuditEvent.objects.filter(action="iris.admin_inspection.snapshot.replayed").count() == 2


def test_a_hard_deleted_entry_replays_as_forgotten(ops, remembered):
    member, entries = remembered
    inspection = granted(ops, member)
    memory_hard_delete(
        principal=as_system(member),
        member=member,
        entry_ids=[entries["colour"].entry_id],
        now=NOW + timedelta(hours=3),
    )
    colour = replay(ops["admin"], inspection).items[0]
    assert colour["forgotten"] is True and colour["forgottenSince"] is not None
    assert "body" not in colour


def test_replay_is_for_auditors_and_only_of_a_grant(ops, remembered):
    member, _ = remembered
    inspection = granted(ops, member)
    with pytest.raises(IrisError) as caught:
        replay(ops["support"], inspection)
    assert caught.value.code == "not-permitted"
    waiting = request(ops["support"], member)
    with pytest.raises(IrisError) as caught:
        replay(ops["admin"], waiting)
    assert caught.value.code == "not-permitted"
