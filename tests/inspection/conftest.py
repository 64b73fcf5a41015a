"""Inspection personas: operators of each role (two of some, for four eyes), a member with
standard and sensitive memory, and helpers to request and move inspections."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from consent.enums import ConsentType
from governance.models import User
from governance.principal import Principal, principal_of
from inspection import services
from inspection.selectors import current_consent_snapshot
from tests.conftest import SYSTEM
from tests.factories import grant, grant_category, written


def operator_user(tenant, name: str, role: str) -> User:
    from governance.services import user_create

    return user_create(
        actor=SYSTEM, tenant=tenant, username=name, role=role, password="pw-" + name
    ).user


def as_operator(user: User) -> Principal:
    return principal_of(user)


@pytest.fixture
def ops(tenant) -> dict[str, User]:
    """Operators of the tenant: one per role, and a second legal and trust-and-safety."""
    return {
        "support": operator_user(tenant, "op-support", "support"),
        "admin": operator_user(tenant, "op-admin", "admin"),
        "legal": operator_user(tenant, "op-legal", "legal"),
        "legal2": operator_user(tenant, "op-legal-2", "legal"),
        "tns": operator_user(tenant, "op-tns", "trust-and-safety"),
        "tns2": operator_user(tenant, "op-tns-2", "trust-and-safety"),
    }


@pytest.fixture
def foreign_admin(other_tenant) -> User:
    return operator_user(other_tenant, "op-admin-globex", "admin")


@pytest.fixture
def remembered(ready):
    """The member with two standard memories and one sensitive (medical) memory, and the
    sensitive-data consent that sensitive reads cite."""
    grant(ready, ConsentType.SENSITIVE_DATA)
    grant_category(ready, "medical")
    colour = written(ready, "My favourite colour is blue")
    city = written(ready, "I live at 12 Baker Street, call me on +44 20 7946 0958", category="fact")
    medical = written(ready, "I take insulin every morning", category="medical")
    return ready, {"colour": colour, "city": city, "medical": medical}


def request(requester: User, member: User, path: str = "routine-review", **kwargs: Any) -> Any:
    kwargs.setdefault("justification", "Member wrote to support about a wrong reminder.")
    return services.inspection_request(
        principal=as_operator(requester), member=member, path=path, **kwargs
    )


def move(actor: User, inspection: Any, to: str, **kwargs: Any) -> Any:
    return services.inspection_transition(
        principal=as_operator(actor), inspection_id=inspection.id, to=to, **kwargs
    )


def consent_snapshot(member: User) -> str:
    snapshot = current_consent_snapshot(member)
    assert snapshot is not None
    return str(snapshot)


@pytest.fixture
def client_for():
    def make(user: User) -> APIClient:
        client = APIClient()
        client.force_login(user)
        return client

    return make
