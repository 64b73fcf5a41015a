"""The policy gate at the move to `granted` (spec: defaultPolicyGate), as one table-driven
pure function.

The gate sees the requester (who will read), the reviewer (who grants), the tenants
involved, the requested scope, the path, what the operator asked to see (standard memory
only, or sensitive memory too), whether a cited incident reference verified, and the
member's consent snapshot. It answers the first refusal that applies, in this order:

1. both people are operators                                  `not-an-operator`
2. one tenant throughout: operators, member, scope            `cross-tenant`
3. the scope belongs to the target member                     `scope-out-of-bounds`
4. four eyes: the reviewer is not the requester               `self-grant`
5. the reviewer holds a reviewing role                        `reviewer-not-permitted`
6. an incident escalation cites a valid signed reference      `no-legitimate-interest`
7. a sensitive read cites the member's current consent        `consent-not-current`
8. the row of ROLE_TABLE for (path, sensitivity, role)        its code

Decisions beyond the spec are in docs/decisions/inspection.md. Plain Python: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

from governance.roles import Role
from inspection.enums import (
    PATHS,
    IncidentReferenceStatus,
    InspectionState,
    Refusal,
    Sensitivity,
)

S = InspectionState
STANDARD = Sensitivity.STANDARD
SENSITIVE = Sensitivity.SENSITIVE
R = Refusal

# Who may grant: never support (support asks, it does not approve access).
REVIEWER_ROLES: frozenset[str] = frozenset(
    {Role.ADMIN.value, Role.LEGAL.value, Role.TRUST_AND_SAFETY.value}
)

# (path, sensitivity, requester role) -> None when that role may read, else the refusal.
# Standard memory: routine review is open to every role; the data-rights path belongs to
# legal (and admin, who helps with non-sensitive fulfilment); incidents to trust and
# safety. Sensitive memory: never by routine review, never by support or admin, legal only
# in dsar-fulfillment, trust and safety only in incident-escalation (spec).
ROLE_TABLE: dict[tuple[InspectionState, Sensitivity, Role], Refusal | None] = {
    (S.ROUTINE_REVIEW, STANDARD, Role.SUPPORT): None,
    (S.ROUTINE_REVIEW, STANDARD, Role.ADMIN): None,
    (S.ROUTINE_REVIEW, STANDARD, Role.LEGAL): None,
    (S.ROUTINE_REVIEW, STANDARD, Role.TRUST_AND_SAFETY): None,
    (S.DSAR_FULFILLMENT, STANDARD, Role.SUPPORT): R.PATH_NOT_PERMITTED,
    (S.DSAR_FULFILLMENT, STANDARD, Role.ADMIN): None,
    (S.DSAR_FULFILLMENT, STANDARD, Role.LEGAL): None,
    (S.DSAR_FULFILLMENT, STANDARD, Role.TRUST_AND_SAFETY): R.PATH_NOT_PERMITTED,
    (S.INCIDENT_ESCALATION, STANDARD, Role.SUPPORT): R.PATH_NOT_PERMITTED,
    (S.INCIDENT_ESCALATION, STANDARD, Role.ADMIN): R.PATH_NOT_PERMITTED,
    (S.INCIDENT_ESCALATION, STANDARD, Role.LEGAL): R.PATH_NOT_PERMITTED,
    (S.INCIDENT_ESCALATION, STANDARD, Role.TRUST_AND_SAFETY): None,
    (S.ROUTINE_REVIEW, SENSITIVE, Role.SUPPORT): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (S.ROUTINE_REVIEW, SENSITIVE, Role.ADMIN): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (S.ROUTINE_REVIEW, SENSITIVE, Role.LEGAL): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (S.ROUTINE_REVIEW, SENSITIVE, Role.TRUST_AND_SAFETY): R.ROUTINE_REVIEW_OF_SENSITIVE,
    (S.DSAR_FULFILLMENT, SENSITIVE, Role.SUPPORT): R.SENSITIVE_ROLE_REFUSED,
    (S.DSAR_FULFILLMENT, SENSITIVE, Role.ADMIN): R.SENSITIVE_ROLE_REFUSED,
    (S.DSAR_FULFILLMENT, SENSITIVE, Role.LEGAL): None,
    (S.DSAR_FULFILLMENT, SENSITIVE, Role.TRUST_AND_SAFETY): R.TRUST_AND_SAFETY_INCIDENT_ONLY,
    (S.INCIDENT_ESCALATION, SENSITIVE, Role.SUPPORT): R.SENSITIVE_ROLE_REFUSED,
    (S.INCIDENT_ESCALATION, SENSITIVE, Role.ADMIN): R.SENSITIVE_ROLE_REFUSED,
    (S.INCIDENT_ESCALATION, SENSITIVE, Role.LEGAL): R.LEGAL_DSAR_ONLY,
    (S.INCIDENT_ESCALATION, SENSITIVE, Role.TRUST_AND_SAFETY): None,
}


@dataclass(frozen=True, slots=True)
class GateInput:
    """Everything the gate decides on, as plain values. Ids are strings."""

    requester_kind: str
    requester_id: str
    requester_roles: frozenset[str]
    requester_tenant_id: str | None
    reviewer_kind: str
    reviewer_id: str
    reviewer_roles: frozenset[str]
    reviewer_tenant_id: str | None
    target_tenant_id: str
    target_member_id: str
    # The tenant and member the requested scope names (a scope without a tenant id
    # belongs to the target's tenant).
    scope_tenant_id: str | None
    scope_member_id: str | None
    path: InspectionState
    sensitivity: Sensitivity
    incident_reference: IncidentReferenceStatus
    # The consent snapshot the request cites, and the member's current one (None when
    # the member has no sensitive-data consent in force).
    cited_consent_snapshot: str | None
    current_consent_snapshot: str | None


@dataclass(frozen=True, slots=True)
class GateResult:
    refusal: Refusal | None
    # A finer reason inside the refusal, e.g. the incident reference's status.
    rule: str = ""

    @property
    def allowed(self) -> bool:
        return self.refusal is None


ALLOW = GateResult(None)


def _role_rows(path: InspectionState, sensitivity: Sensitivity, roles: frozenset[str]):
    for role in Role:
        if role.value in roles:
            yield ROLE_TABLE[(path, sensitivity, role)]


def decide(gate: GateInput) -> GateResult:
    """The first refusal that applies (module docstring), or ALLOW."""
    if gate.requester_kind != "operator" or gate.reviewer_kind != "operator":
        return GateResult(R.NOT_AN_OPERATOR)
    tenants = {
        gate.requester_tenant_id,
        gate.reviewer_tenant_id,
        gate.target_tenant_id,
        gate.scope_tenant_id or gate.target_tenant_id,
    }
    if len(tenants) != 1 or None in tenants:
        return GateResult(R.CROSS_TENANT)
    if gate.scope_member_id != gate.target_member_id:
        return GateResult(R.SCOPE_OUT_OF_BOUNDS)
    if gate.reviewer_id == gate.requester_id:
        return GateResult(R.SELF_GRANT)
    if not gate.reviewer_roles & REVIEWER_ROLES:
        return GateResult(R.REVIEWER_NOT_PERMITTED)
    if gate.path not in PATHS:
        return GateResult(R.TRANSITION_NOT_ALLOWED)
    if (
        gate.path is S.INCIDENT_ESCALATION
        and gate.incident_reference is not IncidentReferenceStatus.VALID
    ):
        return GateResult(R.NO_LEGITIMATE_INTEREST, gate.incident_reference.value)
    if gate.sensitivity is SENSITIVE and (
        gate.cited_consent_snapshot is None
        or gate.current_consent_snapshot is None
        or gate.cited_consent_snapshot != gate.current_consent_snapshot
    ):
        return GateResult(
            R.CONSENT_NOT_CURRENT, "missing" if gate.cited_consent_snapshot is None else "stale"
        )
    rows = list(_role_rows(gate.path, gate.sensitivity, gate.requester_roles))
    if not rows:
        return GateResult(R.PATH_NOT_PERMITTED, "no-operator-role")
    if any(row is None for row in rows):
        return ALLOW
    # Several roles, each refused: the most specific reason.
    return GateResult(_most_specific(rows))


_SPECIFICITY = (
    R.ROUTINE_REVIEW_OF_SENSITIVE,
    R.LEGAL_DSAR_ONLY,
    R.TRUST_AND_SAFETY_INCIDENT_ONLY,
    R.SENSITIVE_ROLE_REFUSED,
    R.PATH_NOT_PERMITTED,
)


def _most_specific(rows: list[Refusal | None]) -> Refusal:
    present = {row for row in rows if row is not None}
    return next(code for code in _SPECIFICITY if code in present)
