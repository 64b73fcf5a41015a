"""The legal team's data-rights queue at /data-rights/queue/."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dsar import services, wording
from dsar.enums import RequestState
from dsar.models import DataRightsEvent, LegalHold
from dsar.views import bucket_counts
from governance.models import AuditEvent
from governance.roles import Role
from tests.factories import as_member, as_surface

pytestmark = pytest.mark.django_db

QUEUE = "/data-rights/queue/"


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    monkeypatch.setattr(services, "_queue_process", lambda request_id: None)


@pytest.fixture
def legal(make_operator):
    return make_operator("legal")


@pytest.fixture
def desk(legal) -> Client:
    client = Client()
    client.force_login(legal)
    return client


def text_of(response) -> str:
    """The page's text as read aloud: inline tags vanish, block tags separate words."""
    page = re.sub(r"</?(?:span|strong|time|a|em|code)\b[^>]*>", "", response.content.decode())
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def file(member, kind="export", *, days_ago=0, by=None, payload=None):
    return services.data_rights_open(
        principal=by or as_member(member),
        member=member,
        kind=kind,
        payload=payload or ({"mode": "soft", "categories": ["fact"]} if kind == "delete" else {}),
        now=timezone.now() - timedelta(days=days_ago),
    )


def item(request) -> str:
    return f"{QUEUE}{request.id}/"


# ------------------------------------------------------------------- who may work it


def test_anonymous_is_sent_to_sign_in(client, db) -> None:
    response = client.get(QUEUE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", [r.value for r in Role if r is not Role.LEGAL])
def test_other_operator_roles_get_403(client, make_operator, member, role) -> None:
    request = file(member)
    client.force_login(make_operator(role))
    for response in (
        client.get(QUEUE),
        client.get(item(request)),
        client.post(item(request) + "start/"),
        client.post(item(request) + "extend/", {"extend-reason": "x"}),
    ):
        assert response.status_code == 403
        assert "The data-rights queue is for the legal team" in text_of(response)
    request.refresh_from_db()
    assert request.extended_at is None


def test_a_member_gets_403(client, member) -> None:
    client.force_login(member)
    assert client.get(QUEUE).status_code == 403


def test_the_console_links_to_the_queue(desk) -> None:
    assert f'href="{QUEUE}"' in desk.get("/").content.decode()


def test_another_tenants_request_is_404(desk, foreign_member) -> None:
    theirs = file(foreign_member, by=as_surface(foreign_member))
    assert desk.get(item(theirs)).status_code == 404
    for action, data in (
        ("start/", {}),
        ("complete/", {}),
        ("verify/", {"verify-method": "operator-signoff"}),
        ("extend/", {"extend-reason": "More time"}),
        ("fail/", {"fail-reason": "data-unavailable"}),
    ):
        assert desk.post(item(theirs) + action, data).status_code == 404
    assert (
        desk.post(
            f"{QUEUE}members/{foreign_member.public_id}/hold/", {"hold-reason": "x"}
        ).status_code
        == 404
    )
    theirs.refresh_from_db()
    assert theirs.state == RequestState.SUBMITTED and theirs.extended_at is None
    assert not LegalHold.objects.exists()


def test_another_tenants_legal_operator_does_not_see_ours(
    client, make_operator, other_tenant, member
) -> None:
    ours = file(member)
    client.force_login(make_operator("legal", of_tenant=other_tenant))
    assert client.get(item(ours)).status_code == 404
    assert str(ours.id) not in client.get(QUEUE).content.decode()


# ------------------------------------------------------------------- the queue


def test_the_queue_is_sorted_by_due_date_and_flags_overdue_and_reminders(
    desk, member, other_member
) -> None:
    # GDPR: due one calendar month after receipt; the clock is fixed through now=.
    soon = file(other_member, "access", days_ago=25)  # due in about 5 days
    late = file(member, "export", days_ago=40)  # overdue by about 10 days
    fresh = file(member, "delete", days_ago=1)  # about 29 days left
    closed = file(other_member, "export", days_ago=50)
    services.data_rights_transition(
        principal=as_member(other_member),
        member=other_member,
        request_id=closed.id,
        to="cancelled",
    )
    response = desk.get(QUEUE)
    assert response.status_code == 200
    page = response.content.decode()
    order = re.findall(r"/data-rights/queue/([0-9a-f-]{36})/", page)
    assert order == [str(late.id), str(soon.id), str(fresh.id)]  # closed is not in the queue

    rows = re.findall(r"<tr class=\"([^\"]*)\">(.*?)</tr>", page, flags=re.S)
    assert rows[0][0] == "queue__row--overdue" and "Overdue" in rows[0][1]
    assert "days overdue" in rows[0][1]
    assert rows[1][0] == "queue__row--soon" and "Reminder: due soon" in rows[1][1]
    assert rows[2][0] == "" and "Overdue" not in rows[2][1] and "Reminder" not in rows[2][1]

    text = text_of(response)
    assert "3 open requests, 1 overdue, 1 due within 7 days." in text
    # The chart and its table say the same: one overdue, one in 4–7 days, one in 15–30.
    assert "Overdue: 1, 0–3 days: 0, 4–7 days: 1, 8–14 days: 0, 15–30 days: 1" in text
    assert "Overdue 1 0–3 days 0 4–7 days 1 8–14 days 0 15–30 days 1 Over 30 days 0" in text
    assert '<svg role="img" aria-labelledby="chart-title"' in page


def test_the_queue_reads_a_fixed_number_of_queries(
    desk, member, other_member, django_assert_max_num_queries
) -> None:
    file(member, "export")
    file(member, "access")
    file(other_member, "delete")
    with django_assert_max_num_queries(12):
        assert desk.get(QUEUE).status_code == 200


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        ([-5, -1], {"Overdue": 2}),
        ([0, 3, 4, 7, 8, 14, 15, 30, 31, 400], None),
    ],
)
def test_days_left_fall_into_their_buckets(days, expected) -> None:
    counts = dict(bucket_counts(days))
    if expected is not None:
        assert counts["Overdue"] == expected["Overdue"]
        assert sum(counts.values()) == 2
    else:
        assert counts == {
            "Overdue": 0,
            "0–3 days": 2,
            "4–7 days": 2,
            "8–14 days": 2,
            "15–30 days": 2,
            "Over 30 days": 2,
        }


# ------------------------------------------------------------------- working a request


def test_legal_verifies_a_request_by_court_order_with_its_reference(desk, member) -> None:
    request = file(member, by=as_surface(member))
    before = (AuditEvent.objects.count(), DataRightsEvent.objects.count())
    response = desk.post(item(request) + "verify/", {"verify-method": "court-order"})
    assert response.status_code == 400
    assert "Reference: This is required." in text_of(response)
    assert 'href="#id_verify-reference"' in response.content.decode()
    request.refresh_from_db()
    assert request.state == RequestState.SUBMITTED
    assert (AuditEvent.objects.count(), DataRightsEvent.objects.count()) == before

    response = desk.post(
        item(request) + "verify/",
        {"verify-method": "court-order", "verify-reference": "Case 2026/114"},
    )
    assert response.status_code == 303 and response["Location"] == item(request)
    request.refresh_from_db()
    assert (request.state, request.verification_method) == ("verified", "court-order")
    assert "Verified. The work starts now." in text_of(desk.get(item(request)))


def test_legal_signs_a_request_off(desk, member) -> None:
    request = file(member, by=as_surface(member))
    response = desk.post(item(request) + "verify/", {"verify-method": "operator-signoff"})
    assert response.status_code == 303
    request.refresh_from_db()
    assert request.verification_method == "operator-signoff"


def test_legal_extends_once_with_a_reason_the_member_reads(desk, client, member) -> None:
    request = file(member)
    due = request.due_at
    empty = desk.post(item(request) + "extend/", {"extend-reason": "  "})
    assert empty.status_code == 400
    assert "Reason for the extension: This field is required." in text_of(empty)
    request.refresh_from_db()
    assert request.due_at == due and request.extended_at is None

    response = desk.post(item(request) + "extend/", {"extend-reason": "Many apps to search."})
    assert response.status_code == 303
    request.refresh_from_db()
    assert request.due_at > due and request.extension_reason == "Many apps to search."
    page = text_of(desk.get(item(request)))
    assert "Reason given to the member: Many apps to search." in page
    assert "Extend the deadline" not in page  # once only

    client.force_login(member)
    assert "Many apps to search." in text_of(client.get("/data-rights/"))


def test_legal_starts_and_completes_an_access_request(desk, member) -> None:
    request = file(member, "access", by=as_surface(member))
    desk.post(item(request) + "verify/", {"verify-method": "operator-signoff"})
    assert desk.post(item(request) + "start/").status_code == 303
    request.refresh_from_db()
    assert request.state == RequestState.IN_PROGRESS
    assert desk.post(item(request) + "complete/").status_code == 303
    request.refresh_from_db()
    assert request.state == RequestState.COMPLETED
    assert "This request is closed" in text_of(desk.get(item(request)))


def test_an_export_is_not_completed_by_hand_before_its_work(desk, member) -> None:
    request = file(member)
    desk.post(item(request) + "start/")
    response = desk.post(item(request) + "complete/", follow=True)
    assert "The work has not finished" in text_of(response)
    request.refresh_from_db()
    assert request.state == RequestState.IN_PROGRESS


def test_legal_fails_a_request_with_a_reason_the_member_reads(desk, client, member) -> None:
    request = file(member, "access")
    desk.post(item(request) + "start/")
    bad = desk.post(item(request) + "fail/", {"fail-reason": "because"})
    assert bad.status_code == 400 and "Why it failed: Select a valid choice." in text_of(bad)
    request.refresh_from_db()
    assert request.state == RequestState.IN_PROGRESS

    assert desk.post(item(request) + "fail/", {"fail-reason": "legal-exemption"}).status_code == 303
    request.refresh_from_db()
    assert (request.state, request.trail.order_by("-position").first().reason_code) == (
        "failed",
        "legal-exemption",
    )
    client.force_login(member)
    text = text_of(client.get("/data-rights/"))
    assert wording.STATE_LABELS["failed"] in text
    assert wording.FAIL_REASONS["legal-exemption"] in text


def test_legal_places_and_lifts_a_hold_with_a_reason(desk, member, client) -> None:
    request = file(member, "delete")
    hold_url = f"{QUEUE}members/{member.public_id}/hold/"
    empty = desk.post(hold_url, {"hold-reason": "", "request_id": str(request.id)})
    assert empty.status_code == 400
    assert "Reason for the legal hold: This field is required." in text_of(empty)
    assert not LegalHold.objects.exists()

    placed = desk.post(hold_url, {"hold-reason": "Litigation 114", "request_id": str(request.id)})
    assert placed.status_code == 303 and placed["Location"] == item(request)
    hold = LegalHold.objects.get(member=member)
    assert hold.reason == "Litigation 114" and hold.lifted_at is None
    page = text_of(desk.get(item(request)))
    assert "A hold applies since" in page and "Litigation 114" in page
    assert "Legal hold" in text_of(desk.get(QUEUE))
    client.force_login(member)
    assert "A legal hold applies." in text_of(client.get("/data-rights/"))

    lifted = desk.post(hold_url + "lift/", {"request_id": str(request.id)})
    assert lifted.status_code == 303
    hold.refresh_from_db()
    assert hold.lifted_at is not None
    assert "A legal hold applies." not in text_of(client.get("/data-rights/"))


def test_the_request_page_shows_the_trail_and_the_clock(desk, member) -> None:
    request = file(member, days_ago=3)
    text = text_of(desk.get(item(request)))
    assert f"Export request from {member.username}" in text
    assert "Received" in text and "Due" in text and "Verify by" in text
    assert "Not yet verified" in text and "Verified, not started" in text
    assert "session-token" in text  # operators read the reason codes as recorded
    assert "The member" in text and "By You" not in text


def test_an_overdue_request_is_no_longer_offered_an_extension(desk, member) -> None:
    late = file(member, days_ago=40)
    text = text_of(desk.get(item(late)))
    assert "Extend the deadline" not in text
    assert "it can no longer be extended" in text
    response = desk.post(item(late) + "extend/", {"extend-reason": "Too late now"})
    assert response.status_code == 400
    assert "An extension must be given before the first deadline passes." in text_of(response)
    late.refresh_from_db()
    assert late.extended_at is None


def test_a_request_past_its_verification_window_is_flagged(desk, member) -> None:
    stale = file(member, days_ago=8, by=as_surface(member))
    assert "Passed: the expiry job closes it" in text_of(desk.get(item(stale)))
