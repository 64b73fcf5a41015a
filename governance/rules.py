"""The one error Iris's pure rules raise (no Django here).

A rule module (scopes, masking, the consent ledger, continuation tokens) knows which input
broke which rule but not how a request reports it. It raises `RuleError` with the field's
wire name, a stable rule code and, where the rule is a fixed list, the allowed values;
`governance.errors.invalid` turns it into the 400 problem every caller answers with.
"""

from __future__ import annotations

from collections.abc import Iterable


class RuleError(ValueError):
    """A value broke a rule. `field` is the wire name (a dotted path where nested), `rule` a
    stable code, `allowed` the accepted values when there is a fixed list, `message` safe
    to show (it never repeats the value)."""

    def __init__(
        self,
        field: str,
        rule: str,
        message: str | None = None,
        allowed: Iterable[str] | None = None,
    ) -> None:
        self.field = field
        self.rule = rule
        self.allowed: tuple[str, ...] = tuple(str(a) for a in allowed or ())
        if message is None:
            message = f"{field}: {rule}"
            if self.allowed:
                message += f" (allowed: {', '.join(self.allowed)})"
        self.message = message
        super().__init__(message)
