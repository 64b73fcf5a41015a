"""Operator roles and what each may do inside its own tenant."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    SUPPORT = "support"
    ADMIN = "admin"
    LEGAL = "legal"
    TRUST_AND_SAFETY = "trust-and-safety"


MEMBER = "member"
ROLE_CHOICES: tuple[str, ...] = (MEMBER, *(r.value for r in Role))

# Tenant-level object permissions (django-guardian) granted to an operator on their tenant.
# Never per memory entry: access to a member's memory goes through an inspection.
TENANT_PERMISSIONS: dict[str, str] = {
    "view_console": "Open the operator console",
    "request_inspection": "Request a justified inspection of a member's memory",
    "work_data_rights": "Work the data-rights queue",
    "verify_audit": "Verify the audit chain",
    "manage_tenant": "Manage operators and surface clients",
}

ROLE_PERMISSIONS: dict[Role, frozenset[str]] = {
    Role.SUPPORT: frozenset({"view_console", "request_inspection"}),
    Role.ADMIN: frozenset({"view_console", "request_inspection", "verify_audit", "manage_tenant"}),
    Role.LEGAL: frozenset(
        {"view_console", "request_inspection", "work_data_rights", "verify_audit"}
    ),
    Role.TRUST_AND_SAFETY: frozenset({"view_console", "request_inspection", "verify_audit"}),
}
