"""The member's "Who looked at my memory" page at /inspections/mine/."""

from __future__ import annotations

import pytest
from django.test import Client

from inspection import jobs, wording
from tests.inspection.conftest import consent_snapshot, move, request
from tests.inspection.test_pages_console import text_of

pytestmark = pytest.mark.django_db

MINE = "/inspections/mine/"


def test_an_operator_gets_404(ops) -> None:
    client = Client()
    client.force_login(ops["admin"])
    assert client.get(MINE).status_code == 404


def test_nobody_looked_yet(member) -> None:
    client = Client()
    client.force_login(member)
    response = client.get(MINE)
    assert response.status_code == 200
    assert "Nobody has looked at your memory." in text_of(response)


def test_the_member_home_links_to_the_page(member) -> None:
    client = Client()
    client.force_login(member)
    assert f'href="{MINE}"' in client.get("/").content.decode()


def test_every_access_in_words_and_the_notice(ops, remembered, tenant, other_member) -> None:
    member, _ = remembered
    routine = request(ops["support"], member)
    move(ops["admin"], routine, "granted")
    sensitive = request(
        ops["legal"],
        member,
        "dsar-fulfillment",
        sensitivity="sensitive",
        consent_snapshot_id=consent_snapshot(member),
    )
    move(ops["legal2"], sensitive, "granted")
    move(ops["legal"], sensitive, "closed")
    denied = request(ops["support"], member)
    move(ops["admin"], denied, "denied", reason_code="not-necessary")
    # Another member's access is not on this page.
    theirs = request(ops["support"], other_member)
    move(ops["admin"], theirs, "granted")

    client = Client()
    client.force_login(member)
    text = text_of(client.get(MINE))
    assert text.count("Who Support") == 1 and text.count("Who Legal team") == 1
    assert wording.MEMBER_PATH_LABELS["routine-review"] in text
    assert wording.MEMBER_PATH_LABELS["dsar-fulfillment"] in text
    assert "Medical care" in text  # the sensitive snapshot's topic
    assert "still open" in text
    assert wording.NOTICE_LABELS["queued"] in text
    assert wording.NOTICE_LABELS["not-required"] in text
    for raw in ("dsar-fulfillment", "routine-review", "medical ", "queued"):
        assert raw not in text
    assert str(denied.id) not in client.get(MINE).content.decode()

    jobs.deliver_notices(tenant=tenant)
    text = text_of(client.get(MINE))
    assert "Staff looked at sensitive memory" in text
    assert "You were told, on" in text
