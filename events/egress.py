"""Governed egress for webhooks (spec 003: `pre_egress` / `post_egress`).

Every POST Iris makes to a webhook passes the kernel before it is sent and after it ends,
and each decision lands in the audit chain. At `pre_egress` this check refuses a URL whose
host left the allow-list (or that lost https) since the endpoint was declared: the list
is read at each delivery, so taking a host off it stops the next attempt.
"""

from __future__ import annotations

from events import conf
from events.rules import check_url
from governance.pipeline import (
    Check,
    Decision,
    Hook,
    Operation,
    Verdict,
    register,
    registered_checks,
)
from governance.rules import RuleError

OPERATION = "events.webhook_post"


class WebhookHostCheck(Check):
    name = "webhook-host-allow-list"
    priority = 72
    hooks = frozenset({Hook.PRE_EGRESS})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        if op.name != OPERATION:
            return None
        try:
            check_url(
                op.attributes.get("url"),
                allowed_hosts=conf.allowed_hosts(),
                http_loopback=conf.http_loopback(),
            )
        except RuleError as exc:
            return Decision(
                self.name, Verdict.DENY, exc.rule, "The webhook's host may not be posted to."
            )
        return None


def register_checks() -> None:
    if not any(c.name == WebhookHostCheck.name for c in registered_checks()):
        register(WebhookHostCheck())
