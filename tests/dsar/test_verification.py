"""Verifying a request: codes single-use, hashed, expiring, capped; operator sign-off."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from dsar import services
from dsar.models import DataRightsEvent, DataRightsRequest, VerificationCode
from governance.errors import Forbidden, ValidationFailed
from governance.models import AuditEvent
from governance.principal import principal_of
from tests.factories import as_surface

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 10, tzinfo=UTC)


@pytest.fixture
def filed(member):
    member.email = "ada@example.org"
    member.save()
    return services.data_rights_open(
        principal=as_surface(member), member=member, kind="access", payload={}, now=NOW
    )


@pytest.fixture
def send(django_capture_on_commit_callbacks):
    """Send a code and return it as the member reads it in the mail (sent after commit)."""

    def send(member, request, when=NOW):
        mail.outbox.clear()
        with django_capture_on_commit_callbacks(execute=True):
            services.data_rights_send_code(
                principal=as_surface(member),
                member=member,
                request_id=request.id,
                method="email-link",
                now=when,
            )
        return re.search(r"\b(\d{8})\b", mail.outbox[-1].body).group(1)

    return send


def verify(member, request, code, when=NOW):
    return services.data_rights_verify(
        principal=as_surface(member),
        member=member,
        request_id=request.id,
        method="email-link",
        code=code,
        now=when,
    )


def test_a_surface_filed_request_waits_for_verification(filed):
    assert filed.state == "submitted"
    assert filed.verify_by == NOW + timedelta(days=7)
    assert list(filed.trail.values_list("to_state", flat=True)) == ["submitted"]


def test_the_code_is_mailed_and_only_its_hash_is_kept(member, filed, send):
    code = send(member, filed)
    row = VerificationCode.objects.get(request=filed)
    assert code not in row.code_hash
    assert len(row.code_hash) == 64
    assert not AuditEvent.objects.filter(payload__icontains=code).exists()
    verified = verify(member, filed, code)
    assert verified.state == "verified"
    assert verified.verification_method == "email-link"


@pytest.mark.parametrize(
    ("how", "rule"),
    [
        ("wrong", "code-wrong"),
        ("expired", "code-expired"),
        ("reused", "code-used"),
        ("superseded", "code-used"),
    ],
)
def test_a_bad_code_is_refused_naming_the_rule_and_verifies_nothing(member, filed, how, rule, send):
    code = send(member, filed)
    when = NOW
    if how == "wrong":
        code = "00000000" if code != "00000000" else "11111111"
    elif how == "expired":
        when = NOW + timedelta(minutes=31)
    elif how == "superseded":
        send(member, filed)  # a newer code replaces the first
    if how == "reused":
        verify(member, filed, code)
        # a reused code on a verified request: the state table refuses first
        with pytest.raises(ValidationFailed) as refused:
            verify(member, filed, code)
        assert refused.value.rule == "transition-not-allowed"
        return
    with pytest.raises(ValidationFailed) as refused:
        verify(member, filed, code, when)
    assert (refused.value.field, refused.value.rule) == ("code", rule)
    filed.refresh_from_db()
    assert filed.state == "submitted"
    assert DataRightsEvent.objects.filter(request=filed).count() == 1
    assert AuditEvent.objects.filter(action="iris.dsar.code.refused", reason_code=rule).exists()


def test_attempts_are_capped_even_for_the_right_code(member, filed, send):
    code = send(member, filed)
    wrong = "00000000" if code != "00000000" else "11111111"
    for _ in range(VerificationCode.MAX_ATTEMPTS):
        with pytest.raises(ValidationFailed):
            verify(member, filed, wrong)
    with pytest.raises(ValidationFailed) as refused:
        verify(member, filed, code)
    assert refused.value.rule == "too-many-attempts"


def test_operator_signoff_is_for_legal_only_and_a_court_order_names_its_reference(
    member, filed, make_operator
):
    support = principal_of(make_operator("support"))
    with pytest.raises(Exception) as refused:
        services.data_rights_verify(
            principal=support, member=None, request_id=filed.id, method="operator-signoff"
        )
    assert getattr(refused.value, "status", None) == 404
    legal = principal_of(make_operator("legal"))
    with pytest.raises(ValidationFailed) as missing:
        services.data_rights_verify(
            principal=legal, member=None, request_id=filed.id, method="court-order"
        )
    assert (missing.value.field, missing.value.rule) == ("reference", "required")
    done = services.data_rights_verify(
        principal=legal,
        member=None,
        request_id=filed.id,
        method="court-order",
        reference="Case 2026/114",
    )
    assert done.verification_method == "court-order"


def test_a_surface_cannot_sign_off_for_an_operator(member, filed):
    with pytest.raises(Forbidden):
        services.data_rights_verify(
            principal=as_surface(member),
            member=member,
            request_id=filed.id,
            method="operator-signoff",
        )


def test_another_tenants_legal_operator_sees_nothing(filed, other_tenant):
    from governance.audit import Actor
    from governance.services import user_create

    stranger = user_create(
        actor=Actor("system", "iris"),
        tenant=other_tenant,
        username="legal-elsewhere",
        role="legal",
        password="pw-x",
    ).user
    with pytest.raises(Exception) as refused:
        services.data_rights_verify(
            principal=principal_of(stranger),
            member=None,
            request_id=filed.id,
            method="operator-signoff",
        )
    assert getattr(refused.value, "status", None) == 404
    assert DataRightsRequest.objects.get(id=filed.id).state == "submitted"
