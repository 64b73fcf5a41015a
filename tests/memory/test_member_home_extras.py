"""The memory home's extras: the off-the-record banner on every member page, the picture's
counts, the export button and the way to "who looked"."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.urls import reverse

from dsar.models import DataRightsRequest
from governance.principal import Principal
from memory import selectors
from memory.services import MemoryDraft, memory_forget, memory_write, off_the_record_set

BANNER = "You are off the record."


def principal(member) -> Principal:
    return Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)


def write(member, category: str, *, kind: str = "profile", now=None, **ids: str):
    return memory_write(
        now=now,
        principal=principal(member),
        member=member,
        draft=MemoryDraft(
            scope_kind=kind,
            scope_identifiers={"userId": str(member.public_id), **ids},
            category=category,
            body=f"Something about {category} {ids}",
            origin="user-stated",
        ),
    ).entry


@pytest.mark.parametrize(
    "url", ["/", "/memory/", "/consent/", "/data-rights/", "/approvals/", "/inspections/mine/"]
)
def test_the_banner_and_its_switch_are_on_every_member_page(client, ready, url) -> None:
    client.force_login(ready)
    assert BANNER not in client.get(url).content.decode()
    off_the_record_set(principal=principal(ready), member=ready, enabled=True)
    page = client.get(url).content.decode()
    assert BANNER in page
    assert 'action="/memory/off-the-record/"' in page and "Go back on the record" in page


def test_the_banner_switch_puts_the_member_back_on_the_record(client, ready) -> None:
    off_the_record_set(principal=principal(ready), member=ready, enabled=True)
    client.force_login(ready)
    response = client.post(reverse("memory:off_the_record"), {"enabled": ""}, follow=True)
    assert response.status_code == 200
    assert selectors.off_the_record_everywhere(member=ready) is None
    assert BANNER not in response.content.decode()


def test_operators_never_see_the_banner(client, make_operator) -> None:
    client.force_login(make_operator("support"))
    assert BANNER not in client.get("/").content.decode()


def test_the_picture_counts_what_is_remembered_by_month_kind_and_topic(
    ready, django_assert_num_queries
) -> None:
    write(ready, "work", now=datetime(2026, 7, 10, tzinfo=UTC))
    write(ready, "goal", kind="notebook", now=datetime(2026, 11, 3, tzinfo=UTC), notebookId="n1")
    gone = write(ready, "fact", now=datetime(2026, 11, 4, tzinfo=UTC))
    memory_forget(principal=principal(ready), member=ready, entry_id=gone.entry_id)
    with django_assert_num_queries(1):
        counts = selectors.memory_picture(
            principal=principal(ready), member=ready, today=date(2026, 12, 2), months=6
        )
    assert [m.month for m in counts.months] == [7, 8, 9, 10, 11, 12]
    assert counts.by_scope == {"profile": (1, 1, 1, 1, 1, 1), "notebook": (0, 0, 0, 0, 1, 1)}
    assert counts.by_topic_group == {"everyday": (1, 1, 1, 1, 2, 2)}
    assert counts.total == 2  # the forgotten one is not counted


def test_another_members_memories_are_never_counted(ready, other_member) -> None:
    write(ready, "work")
    counts = selectors.memory_picture(
        principal=principal(other_member), member=other_member, today=date(2026, 12, 2)
    )
    assert counts.total == 0 and counts.by_scope == {}


def test_the_home_draws_the_picture_with_its_table(client, ready) -> None:
    write(ready, "work")
    client.force_login(ready)
    page = client.get(reverse("memory:home")).content.decode()
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page and 'role="img"' in page
    assert "The numbers behind this picture" in page
    assert '<th scope="row">About you</th>' in page and '<th scope="row">Everyday life</th>' in page


def test_the_export_button_files_one_export_and_lands_on_its_progress(
    client, ready, django_capture_on_commit_callbacks
) -> None:
    client.force_login(ready)
    home = client.get(reverse("home")).content.decode()
    assert 'action="/data-rights/export/"' in home and "Export my memory" in home
    assert home.count(f'href="{reverse("inspection:mine")}"') >= 1
    page = client.get(reverse("memory:home")).content.decode()
    assert 'action="/data-rights/export/"' in page and "Export my memory" in page
    assert f'href="{reverse("inspection:mine")}"' in page and "Who looked at my memory" in page
    form = {
        "export-include_consents": "on",
        "export-include_opt_outs": "on",
        "export-include_notebooks": "on",
        "export-include_session_memory": "on",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("dsar:file_export"), form)
    assert response.status_code == 303
    rows = list(DataRightsRequest.objects.filter(member=ready))
    assert [r.kind for r in rows] == ["export"]
    assert response["Location"] == f"/data-rights/#request-{rows[0].id}"
    landed = client.get(response["Location"]).content.decode()
    assert f'id="request-{rows[0].id}"' in landed
