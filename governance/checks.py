"""The kernel's own checks. Apps register theirs in their AppConfig.ready()."""

from __future__ import annotations

from governance.pipeline import Check, Decision, Hook, Operation, Verdict, register


class TenantBoundary(Check):
    """Nobody acts across tenants: the principal's tenant must be the operation's."""

    name = "tenant-boundary"
    priority = 0

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if op.principal.kind == "system" and op.principal.tenant_id is None:
            return None
        if op.tenant_id is None or op.principal.tenant_id != op.tenant_id:
            return Decision(self.name, Verdict.DENY, "tenant-mismatch", "Not found.")
        return None


class OwnerOnly(Check):
    """A member acts only on their own memory."""

    name = "owner-only"
    priority = 1

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if op.principal.kind == "member" and op.member_id is not None:
            if str(op.principal.id) != str(op.member_id):
                return Decision(self.name, Verdict.DENY, "not-owner", "Not found.")
        return None


def register_kernel_checks() -> None:
    register(TenantBoundary())
    register(OwnerOnly())
