"""A member can find the id surfaces name them by (issue 25): on their home page, and the
demo's in `seed_demo`'s output, fixed so the API guide's requests work as written."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from governance.management.commands.seed_demo import DEMO_MEMBER_ID
from governance.models import User
from iris_site.api_operations import DEMO_MEMBER

pytestmark = pytest.mark.django_db


def test_the_member_home_shows_the_members_own_id(member, other_member) -> None:
    client = Client()
    client.force_login(member)
    page = client.get("/").content.decode()
    assert f'<code id="member-id">{member.public_id}</code>' in page
    assert str(other_member.public_id) not in page


def test_an_operator_home_shows_no_member_id(make_operator, member) -> None:
    client = Client()
    client.force_login(make_operator("support"))
    assert 'id="member-id"' not in client.get("/").content.decode()


def test_seed_demo_prints_the_fixed_demo_member_id() -> None:
    out = StringIO()
    with override_settings(DEBUG=True):
        call_command("seed_demo", stdout=out)
    assert User.objects.get(username="demo-member").public_id == DEMO_MEMBER_ID
    assert f"Demo member's userId (send it as userId): {DEMO_MEMBER_ID}" in out.getvalue()
    assert str(DEMO_MEMBER_ID) == DEMO_MEMBER  # the schema's and the guide's examples
