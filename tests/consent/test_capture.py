"""consent.capture: who may record which consent, dated when (issue 19, finding 5).

The table over caller kind x capture method x date, as the pure function reads it, then
the main cells through the API: a surface records only an inline prompt at about now.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from consent.capture import CLOCK_SKEW, OPERATOR_BACKDATE, capture_refusal
from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.models import ConsentEvent
from consent.services import consent_record
from governance.models import AuditEvent
from governance.pipeline import Denied
from governance.principal import Principal

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KINDS = ("surface", "member", "operator", "system")
METHODS = tuple(m.value for m in CaptureMethod)

# The whole table: which caller kind may record which capture method.
ALLOWED = {
    ("surface", "inline-prompt"),
    ("member", "inline-prompt"),
    ("member", "settings-toggle"),
    ("operator", "operator-recorded"),
    ("system", "dsar-import"),
}
# How far back each allowed cell may date an act (None: any time in the past).
BACKDATE = {
    "inline-prompt": CLOCK_SKEW,
    "settings-toggle": CLOCK_SKEW,
    "operator-recorded": OPERATOR_BACKDATE,
    "dsar-import": None,
}
# Offsets from now: at now, inside the skew either way, just past it, a day, a year, 2001.
WHEN = {
    "now": timedelta(0),
    "skew-ago": -CLOCK_SKEW,
    "skew-ahead": CLOCK_SKEW,
    "past-skew-ago": -(CLOCK_SKEW + timedelta(seconds=1)),
    "past-skew-ahead": CLOCK_SKEW + timedelta(seconds=1),
    "day-ago": -timedelta(days=1),
    "month-ago": -(OPERATOR_BACKDATE + timedelta(seconds=1)),
    "2001": datetime(2001, 1, 1, tzinfo=UTC) - NOW,
}


def _expected(kind: str, method: str, offset: timedelta) -> str | None:
    if (kind, method) not in ALLOWED:
        return "capture-method-not-allowed"
    if offset > CLOCK_SKEW:
        return "capture-future-dated"
    limit = BACKDATE[method]
    if limit is not None and offset < -limit:
        return "capture-backdated"
    return None


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_capture_table_over_caller_method_and_date(kind, method, when) -> None:
    refusal = capture_refusal(
        caller_kind=kind,
        roles={"support"} if kind == "operator" else set(),
        capture_method=method,
        occurred_at=NOW + WHEN[when],
        now=NOW,
        witness_is_caller=True,
    )
    assert (refusal.rule if refusal else None) == _expected(kind, method, WHEN[when])


@pytest.mark.parametrize(
    ("roles", "rule"),
    [
        ({"support"}, None),
        ({"legal"}, None),
        ({"admin"}, "capture-role-not-allowed"),
        ({"trust-and-safety"}, "capture-role-not-allowed"),
        (set(), "capture-role-not-allowed"),
    ],
)
def test_only_support_and_legal_operators_record_witnessed_consent(roles, rule) -> None:
    refusal = capture_refusal(
        caller_kind="operator",
        roles=roles,
        capture_method="operator-recorded",
        occurred_at=NOW,
        now=NOW,
        witness_is_caller=True,
    )
    assert (refusal.rule if refusal else None) == rule


def test_an_operator_is_the_witness_of_what_it_records() -> None:
    refusal = capture_refusal(
        caller_kind="operator",
        roles={"support"},
        capture_method="operator-recorded",
        occurred_at=NOW,
        now=NOW,
        witness_is_caller=False,
    )
    assert refusal is not None and refusal.rule == "witness-must-be-recorder"
    assert refusal.field == "witness"


def test_an_unknown_caller_kind_records_nothing() -> None:
    refusal = capture_refusal(
        caller_kind="robot",
        roles=(),
        capture_method="inline-prompt",
        occurred_at=NOW,
        now=NOW,
        witness_is_caller=False,
    )
    assert refusal is not None and refusal.allowed == ()


# ---------------------------------------------------------------- through the API

URL = "/api/v1/consents"


def _sensitive(member, **overrides):
    data = {
        "userId": str(member.public_id),
        "type": "category:mental_health",
        "status": "granted",
        "legalBasis": "explicit_consent",
        "captureMethod": "inline-prompt",
    }
    data.update(overrides)
    return data


def _denies(rule: str) -> int:
    return AuditEvent.objects.filter(
        action="iris.governance.decision.deny", reason_code=rule
    ).count()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        # The review's two requests (issue 19, finding 5).
        (
            {"captureMethod": "dsar-import", "occurredAt": "2001-01-01T00:00:00Z"},
            "captureMethod",
            "capture-method-not-allowed",
        ),
        (
            {"captureMethod": "operator-recorded", "witness": "Dr. Made Up"},
            "captureMethod",
            "capture-method-not-allowed",
        ),
        ({"captureMethod": "settings-toggle"}, "captureMethod", "capture-method-not-allowed"),
        ({"occurredAt": "2001-01-01T00:00:00Z"}, "occurredAt", "capture-backdated"),
    ],
)
def test_a_surface_cannot_record_what_the_member_did_not_just_do_in_it(
    surface_api: APIClient, member, overrides, field, rule
) -> None:
    response = surface_api.post(URL, _sensitive(member, **overrides), format="json")
    assert response.status_code == 403, response.json()
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == rule
    assert (problem["errors"][0]["field"], problem["errors"][0]["rule"]) == (field, rule)
    assert not ConsentEvent.objects.exists()
    assert _denies(rule) == 1
    assert "Made Up" not in str(list(AuditEvent.objects.values_list("payload", flat=True)))


@pytest.mark.django_db
def test_a_surface_records_an_inline_prompt_at_about_now(surface_api: APIClient, member) -> None:
    response = surface_api.post(URL, _sensitive(member), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["captureMethod"] == "inline-prompt"


@pytest.mark.django_db
def test_a_member_session_may_use_a_setting_but_not_backdate_it(
    member_api: APIClient, member
) -> None:
    ok = member_api.post(URL, _sensitive(member, captureMethod="settings-toggle"), format="json")
    assert ok.status_code == 201, ok.json()
    late = member_api.post(
        URL,
        _sensitive(
            member,
            type="data_processing",
            legalBasis="consent",
            captureMethod="settings-toggle",
            occurredAt="2020-01-01T00:00:00Z",
        ),
        format="json",
    )
    assert late.status_code == 403 and late.json()["code"] == "capture-backdated"
    assert ConsentEvent.objects.count() == 1


def _as(operator, roles):
    return Principal(
        kind="operator", id=operator.public_id, tenant_id=operator.tenant_id, roles=roles
    )


def _record(principal, member, **extra):
    fields = {
        "principal": principal,
        "member": member,
        "consent_type": ConsentType.DATA_PROCESSING,
        "status": "granted",
        "legal_basis": LegalBasis.CONSENT,
        "capture_method": CaptureMethod.OPERATOR_RECORDED,
    }
    fields.update(extra)
    return consent_record(**fields)


@pytest.mark.django_db
def test_an_operator_records_what_it_witnessed_and_is_named_the_witness(
    member, make_operator
) -> None:
    operator = make_operator("support")
    row = _record(_as(operator, frozenset({"support"})), member)
    assert row.body.witness == str(operator.public_id)


@pytest.mark.django_db
def test_an_operator_cannot_name_someone_else_as_witness(member, make_operator) -> None:
    operator = make_operator("support")
    with pytest.raises(Denied) as raised:
        _record(_as(operator, frozenset({"support"})), member, witness="Dr. Made Up")
    assert raised.value.code == "witness-must-be-recorder"
    assert not ConsentEvent.objects.exists()
    assert _denies("witness-must-be-recorder") == 1


@pytest.mark.django_db
def test_only_iris_imports_consent_from_a_data_rights_request(member) -> None:
    old = datetime(2001, 1, 1, tzinfo=UTC)
    system = Principal.system("dsar", member.tenant_id)
    row = _record(system, member, capture_method=CaptureMethod.DSAR_IMPORT, occurred_at=old)
    assert row.body.occurred_at == old
    member_principal = Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)
    with pytest.raises(Denied) as raised:
        _record(member_principal, member, capture_method=CaptureMethod.DSAR_IMPORT)
    assert raised.value.code == "capture-method-not-allowed"
