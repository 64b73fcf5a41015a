"""The kernel's own checks. Apps register theirs in their AppConfig.ready()."""

from __future__ import annotations

from governance.pipeline import Check, Decision, Hook, Operation, Verdict, register
from governance.secrets_screen import FieldFinding, screen_fields


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

    Every stored free-text field of the write (`op.texts`, or the single `op.text` named
    by `attributes["text_field"]`, default "body") goes through the one screen
    (`governance.secrets_screen.screen_fields`). The write is refused
    (`secret-in-memory`, naming the field and the kind, never the value) unless the
    surface declared that field secret (`secretFields`), in which case the service moves
    it to the vault with `governance.vault.store_declared_secrets` and the decision
    records that it did (`secret-declared`).
    """

    name = "secret-screen"
    priority = 20
    hooks = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        texts = dict(op.texts)
        if op.text:
            texts.setdefault(str(op.attributes.get("text_field") or "body"), op.text)
        declared = op.attributes.get("declared_secret_fields") or ()
        if isinstance(declared, str):  # one name, not a string of letters to search
            declared = (declared,)
        found = screen_fields(texts, declared=declared)
        if found is None:
            vaulted = {name: text for name, text in texts.items() if name in declared}
            if screen_fields(vaulted) is not None:
                return Decision(self.name, Verdict.ALLOW, "secret-declared")
            return None
        return secret_denial(self.name, found)


def secret_denial(check: str, found: FieldFinding) -> Decision:
    """The refusal of a credential in a stored field: the same code, shape and wording for
    every field of every write, naming the field and the kind, never the value."""
    detail = (
        f"The {found.field} holds what looks like a credential ({', '.join(found.kinds)}); "
        "Iris does not keep secrets in memory. Remove it, or declare the field secret "
        f'(secretFields: ["{found.field}"]) to keep it in the vault.'
    )
    return Decision(
        check,
        Verdict.DENY,
        "secret-in-memory",
        detail,
        extra={"errors": [{"field": found.field, "rule": "secret-in-memory", "message": detail}]},
    )


def register_kernel_checks() -> None:
    register(TenantBoundary())
    register(OwnerOnly())
    register(SecretScreen())
    # Effects and approvals, the side-effect ledger, taint, run limits, the egress gate.
    from governance import approvals, effects, egress, runs

    for module in (effects, runs, approvals, egress):
        module.register_checks()
