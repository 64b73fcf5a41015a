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


class SecretScreen(Check):
    """Classification at the door: a credential is `secret` and never becomes memory.

    The write is refused (`secret-in-memory`, naming the kind, never the value) unless the
    surface declared the screened field secret (`secretFields`), in which case the service
    moves it to the vault with `governance.vault.store_declared_secrets` and the decision
    records that it did (`secret-declared`). `op.text` is the field named by
    `op.attributes["text_field"]` (default "body").
    """

    name = "secret-screen"
    priority = 20
    hooks = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        from governance.secrets_screen import secret_kinds

        if not op.text:
            return None
        kinds = secret_kinds(op.text)
        if not kinds:
            return None
        field = str(op.attributes.get("text_field") or "body")
        declared = op.attributes.get("declared_secret_fields") or ()
        if isinstance(declared, str):  # one name, not a string of letters to search
            declared = (declared,)
        if field in declared:
            return Decision(self.name, Verdict.ALLOW, "secret-declared")
        return Decision(
            self.name,
            Verdict.DENY,
            "secret-in-memory",
            f"The {field} holds what looks like a credential ({', '.join(kinds)}); Iris does "
            f"not keep secrets in memory. Remove it, or declare the field secret "
            f'(secretFields: ["{field}"]) to keep it in the vault.',
        )


def register_kernel_checks() -> None:
    register(TenantBoundary())
    register(OwnerOnly())
    register(SecretScreen())
    # Effects and approvals, the side-effect ledger, taint, run limits, the egress gate.
    from governance import approvals, effects, egress, runs

    for module in (effects, runs, approvals, egress):
        module.register_checks()
