"""The gate at the move to granted, as a table over roles × paths × sensitivity × tenant
(and scope, four eyes, incident references and consent). Pure: no database."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from governance.roles import Role
from inspection.enums import IncidentReferenceStatus as Ref
from inspection.enums import InspectionState as S
from inspection.enums import Refusal as R
from inspection.enums import Sensitivity
from inspection.policy import ROLE_TABLE, GateInput, decide

TENANT = "t-1"
OTHER_TENANT = "t-2"
MEMBER = "m-1"
CONSENT = "c-1"
STD = Sensitivity.STANDARD
SEN = Sensitivity.SENSITIVE
SUP, ADM, LEG, TNS = Role.SUPPORT, Role.ADMIN, Role.LEGAL, Role.TRUST_AND_SAFETY
PATHS = (S.ROUTINE_REVIEW, S.DSAR_FULFILLMENT, S.INCIDENT_ESCALATION)


def gate(role: Role, path: S, sensitivity: Sensitivity, **changes) -> GateInput:
    base = GateInput(
        requester_kind="operator",
        requester_id="op-requester",
        requester_roles=frozenset({role.value}),
        requester_tenant_id=TENANT,
        reviewer_kind="operator",
        reviewer_id="op-reviewer",
        reviewer_roles=frozenset({ADM.value}),
        reviewer_tenant_id=TENANT,
        target_tenant_id=TENANT,
        target_member_id=MEMBER,
        scope_tenant_id=None,
        scope_member_id=MEMBER,
        path=path,
        sensitivity=sensitivity,
        incident_reference=Ref.VALID,
        cited_consent_snapshot=CONSENT,
        current_consent_snapshot=CONSENT,
    )
    return dataclasses.replace(base, **changes)


# role × path × sensitivity, everything else in order: the whole role table.
EXPECTED = {
    (SUP, S.ROUTINE_REVIEW, STD): None,
    (ADM, S.ROUTINE_REVIEW, STD): None,
    (LEG, S.ROUTINE_REVIEW, STD): None,
    (TNS, S.ROUTINE_REVIEW, STD): None,
    (SUP, S.DSAR_FULFILLMENT, STD): R.PATH_NOT_PERMITTED,
    (ADM, S.DSAR_FULFILLMENT, STD): None,
    (LEG, S.DSAR_FULFILLMENT, STD): None,
    (TNS, S.DSAR_FULFILLMENT, STD): R.PATH_NOT_PERMITTED,
    (SUP, S.INCIDENT_ESCALATION, STD): R.PATH_NOT_PERMITTED,
    (ADM, S.INCIDENT_ESCALATION, STD): R.PATH_NOT_PERMITTED,
    (LEG, S.INCIDENT_ESCALATION, STD): R.PATH_NOT_PERMITTED,
    (TNS, S.INCIDENT_ESCALATION, STD): None,
    (SUP, S.ROUTINE_REVIEW, SEN): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (ADM, S.ROUTINE_REVIEW, SEN): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (LEG, S.ROUTINE_REVIEW, SEN): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (TNS, S.ROUTINE_REVIEW, SEN): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (SUP, S.DSAR_FULFILLMENT, SEN): R.SENSITIVE_ROLE_REFUSED,
    (ADM, S.DSAR_FULFILLMENT, SEN): R.SENSITIVE_ROLE_REFUSED,
    (LEG, S.DSAR_FULFILLMENT, SEN): None,
    (TNS, S.DSAR_FULFILLMENT, SEN): R.TRUST_AND_SAFETY_INCIDENT_ONLY,
    (SUP, S.INCIDENT_ESCALATION, SEN): R.SENSITIVE_ROLE_REFUSED,
    (ADM, S.INCIDENT_ESCALATION, SEN): R.SENSITIVE_ROLE_REFUSED,
    (LEG, S.INCIDENT_ESCALATION, SEN): R.LEGAL_DSAR_ONLY,
    (TNS, S.INCIDENT_ESCALATION, SEN): None,
}
CASES = list(itertools.product(Role, PATHS, Sensitivity))


def test_the_table_covers_every_role_path_and_sensitivity() -> None:
    assert set(EXPECTED) == set(CASES)
    assert {(role, path, sen) for path, sen, role in ROLE_TABLE} == set(CASES)
    assert all(ROLE_TABLE[(p, s, r)] is code for (r, p, s), code in EXPECTED.items())
    assert len(CASES) == 24


@pytest.mark.parametrize(
    ("role", "path", "sensitivity"), CASES, ids=[f"{r}-{p}-{s}" for r, p, s in CASES]
)
@pytest.mark.parametrize("tenant", ["same", "scope-other", "reviewer-other", "requester-other"])
def test_role_path_sensitivity_and_tenant(role, path, sensitivity, tenant) -> None:
    changes = {
        "same": {},
        "scope-other": {"scope_tenant_id": OTHER_TENANT},
        "reviewer-other": {"reviewer_tenant_id": OTHER_TENANT},
        "requester-other": {"requester_tenant_id": OTHER_TENANT},
    }[tenant]
    result = decide(gate(role, path, sensitivity, **changes))
    if tenant != "same":
        # Another tenant is refused before anything else is looked at.
        assert result.refusal is R.CROSS_TENANT
    else:
        assert result.refusal is EXPECTED[(role, path, sensitivity)]
        assert result.allowed is (result.refusal is None)


# One row per gate rule that is not the role table, each against an otherwise-allowed
# inspection (trust and safety, incident escalation, sensitive memory).
RULES = [
    ("requester not an operator", {"requester_kind": "member"}, R.NOT_AN_OPERATOR, ""),
    ("reviewer not an operator", {"reviewer_kind": "surface"}, R.NOT_AN_OPERATOR, ""),
    ("scope in another tenant", {"scope_tenant_id": OTHER_TENANT}, R.CROSS_TENANT, ""),
    ("operator without a tenant", {"reviewer_tenant_id": None}, R.CROSS_TENANT, ""),
    ("target in another tenant", {"target_tenant_id": OTHER_TENANT}, R.CROSS_TENANT, ""),
    ("profile of another member", {"scope_member_id": "m-2"}, R.SCOPE_OUT_OF_BOUNDS, ""),
    ("scope naming no member", {"scope_member_id": None}, R.SCOPE_OUT_OF_BOUNDS, ""),
    ("self-grant", {"reviewer_id": "op-requester"}, R.SELF_GRANT, ""),
    (
        "support reviews",
        {"reviewer_roles": frozenset({SUP.value})},
        R.REVIEWER_NOT_PERMITTED,
        "",
    ),
    (
        "reviewer without a role",
        {"reviewer_roles": frozenset()},
        R.REVIEWER_NOT_PERMITTED,
        "",
    ),
    ("no reference", {"incident_reference": Ref.MISSING}, R.NO_LEGITIMATE_INTEREST, "missing"),
    ("forged reference", {"incident_reference": Ref.FORGED}, R.NO_LEGITIMATE_INTEREST, "forged"),
    (
        "expired reference",
        {"incident_reference": Ref.EXPIRED},
        R.NO_LEGITIMATE_INTEREST,
        "expired",
    ),
    ("reused reference", {"incident_reference": Ref.USED}, R.NO_LEGITIMATE_INTEREST, "used"),
    (
        "reference of another member",
        {"incident_reference": Ref.MISMATCHED},
        R.NO_LEGITIMATE_INTEREST,
        "mismatched",
    ),
    (
        "no consent snapshot",
        {"cited_consent_snapshot": None},
        R.CONSENT_NOT_CURRENT,
        "missing",
    ),
    (
        "stale consent snapshot",
        {"cited_consent_snapshot": "c-0"},
        R.CONSENT_NOT_CURRENT,
        "stale",
    ),
    (
        "consent withdrawn since",
        {"current_consent_snapshot": None},
        R.CONSENT_NOT_CURRENT,
        "stale",
    ),
    ("no role at all", {"requester_roles": frozenset()}, R.PATH_NOT_PERMITTED, "no-operator-role"),
]


@pytest.mark.parametrize(("name", "changes", "code", "rule"), RULES, ids=[r[0] for r in RULES])
def test_every_gate_rule_refuses_with_its_code(name, changes, code, rule) -> None:
    assert decide(gate(TNS, S.INCIDENT_ESCALATION, SEN)).allowed
    result = decide(gate(TNS, S.INCIDENT_ESCALATION, SEN, **changes))
    assert result.refusal is code
    assert result.rule == rule


def test_a_state_that_is_not_a_path_is_never_granted() -> None:
    assert decide(
        dataclasses.replace(gate(TNS, S.ROUTINE_REVIEW, STD), path=S.GRANTED)
    ).refusal is (R.TRANSITION_NOT_ALLOWED)


def test_references_and_consent_matter_only_where_the_spec_says() -> None:
    # A routine review of standard memory needs neither a reference nor consent.
    assert decide(
        gate(
            SUP,
            S.ROUTINE_REVIEW,
            STD,
            incident_reference=Ref.MISSING,
            cited_consent_snapshot=None,
            current_consent_snapshot=None,
        )
    ).allowed
    # A standard incident escalation still needs its reference.
    assert (
        decide(gate(TNS, S.INCIDENT_ESCALATION, STD, incident_reference=Ref.FORGED)).refusal
        is R.NO_LEGITIMATE_INTEREST
    )


def test_an_operator_with_several_roles_reads_where_any_role_may() -> None:
    both = frozenset({SUP.value, LEG.value})
    assert decide(gate(SUP, S.DSAR_FULFILLMENT, SEN, requester_roles=both)).allowed
    refused = decide(gate(SUP, S.INCIDENT_ESCALATION, SEN, requester_roles=both))
    assert refused.refusal is R.LEGAL_DSAR_ONLY  # the most specific reason
