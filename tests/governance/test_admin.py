"""Django admin: superusers only, every ledger read-only, no member content registered."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

from governance.models import AuditEvent

pytestmark = pytest.mark.django_db

LEDGERS = [
    "governance/auditevent",
    "governance/auditseal",
    "consent/consentevent",
    "dsar/datarightsevent",
    "inspection/inspectiontransition",
    "inspection/snapshotread",
]


@pytest.fixture
def superuser(make_operator):
    user = make_operator("admin")
    user.is_superuser = user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("ledger", LEDGERS)
def test_a_superuser_reads_every_ledger(superuser, ready, ledger):
    from tests.factories import written

    written(ready, "I like green tea")
    assert superuser.get(f"/admin/{ledger}/").status_code == 200


@pytest.mark.parametrize("ledger", LEDGERS)
def test_nothing_can_be_added_changed_or_deleted(superuser, ledger):
    assert superuser.get(f"/admin/{ledger}/add/").status_code == 403


def test_an_audit_event_cannot_be_changed_or_deleted_from_the_admin(superuser, ready):
    from tests.factories import written

    written(ready, "I like green tea")
    event = AuditEvent.objects.order_by("seq").first()
    page = superuser.get(f"/admin/governance/auditevent/{event.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert superuser.post(f"/admin/governance/auditevent/{event.pk}/delete/").status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


@pytest.mark.parametrize("role", ["admin", "legal", "support", "trust-and-safety"])
def test_operators_who_are_not_superusers_are_kept_out(make_operator, role):
    user = make_operator(role)
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    answer = client.get("/admin/governance/auditevent/")
    assert answer.status_code == 302
    assert "/admin/login/" in answer["Location"]


def test_no_memory_or_consent_body_is_registered():
    registered = {f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry}
    assert "memory.memoryentry" not in registered
    assert "consent.consenteventbody" not in registered
    assert not [r for r in registered if r.startswith("memory.")]
    assert "inspection.snapshotitem" not in registered
