"""The opportunistic audit seal runs after a request's answer, not inside it
(governance.audit.seal_after_response); outside a request it still runs at commit."""

from __future__ import annotations

import pytest
from django.core.signals import request_finished, request_started
from django.db import transaction

from governance import audit
from governance.audit import Actor, audit_record
from governance.models import AuditSeal

pytestmark = pytest.mark.django_db(transaction=True)

ACTOR = Actor("system", "tests")


@pytest.fixture
def seals(settings, monkeypatch) -> list[str]:
    settings.IRIS_AUDIT_SEAL_INTERVAL = 0
    calls: list[str] = []
    real = audit.seal_pending

    def counting(*args, **kwargs):
        calls.append("seal")
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "seal_pending", counting)
    return calls


def _commit_one() -> None:
    with transaction.atomic():
        audit_record(actor=ACTOR, action="iris.test.recorded", tenant_id=None, payload={"n": 1})


def test_outside_a_request_the_commit_seals(seals) -> None:
    _commit_one()
    assert seals == ["seal"]


def test_inside_a_request_the_seal_waits_for_the_answer(seals) -> None:
    request_started.send(sender=None)
    _commit_one()
    _commit_one()
    assert seals == []  # committed, answer not yet written
    request_finished.send(sender=None)
    assert seals == ["seal"]  # once, for both commits
    assert AuditSeal.objects.count() == 2
    _commit_one()  # after the request: at commit again
    assert seals == ["seal", "seal"]


def test_a_request_that_committed_nothing_does_not_seal(seals) -> None:
    request_started.send(sender=None)
    request_finished.send(sender=None)
    assert seals == []
