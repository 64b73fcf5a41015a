"""The egress gate (spec 003, "Data classification and the egress gate").

A recall, or any answer bound for a model, declares its destination tier: ``local`` or
``cloud``. Each item goes only where its classification may go (`governance.classify`'s
table: public anywhere; internal locally, and to the cloud only when the tenant opted in;
personal — every memory body, sensitive categories included — locally only; secret never).
What may not go is withheld and *counted by reason* (``egress-personal-to-cloud``,
``egress-internal-to-cloud``, ``egress-secret-to-local`` …) so that the recall's audit
envelope says what was held back instead of dropping it silently.

How recall uses it::

    result = egress_filter(candidates, tier=tier, classification_of=lambda c: c.classification,
                           tenant_opted_in_internal_cloud=tenant_allows_internal_cloud(tenant_id))
    envelope["egress"] = result.envelope()
    govern(Hook.POST_RECALL, Operation(..., attributes={
        "egress_tier": tier, "classifications": [c.classification for c in result.allowed]}))

The `EgressGate` check makes the gate mandatory rather than advisory: at PRE_RECALL it
refuses an unknown tier; at POST_RECALL, given the classifications of what is about to
leave, it refuses the whole answer if anything in it may not go (`egress-unfiltered`).
A call that names no tier is treated as bound for the cloud: the stricter reading.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from governance.classify import Classification, Tier, may_egress
from governance.kernel_models import TenantEgressPolicy
from governance.pipeline import Check, Decision, Hook, Operation, Verdict

T = TypeVar("T")

TIERS: tuple[str, ...] = tuple(t.value for t in Tier)
DEFAULT_TIER = Tier.CLOUD
UNCLASSIFIED = "egress-unclassified"


def parse_tier(raw: object) -> Tier:
    """A tier from a request value; ValueError for anything but local or cloud."""
    if isinstance(raw, Tier):
        return raw
    if not isinstance(raw, str):
        raise ValueError("tier must be a string")
    return Tier(raw)


def withhold_reason(
    classification: Classification | str, tier: Tier | str, *, tenant_opted_in_internal_cloud: bool
) -> str | None:
    """None if text of this class may reach this tier, else the reason code it is withheld."""
    tier = parse_tier(tier)
    try:
        cls = Classification(classification)
    except ValueError:
        return UNCLASSIFIED  # what we cannot name does not leave
    if may_egress(cls, tier, tenant_opted_in_internal_cloud=tenant_opted_in_internal_cloud):
        return None
    return f"egress-{cls.value}-to-{tier.value}"


@dataclass(frozen=True)
class EgressResult(Generic[T]):
    tier: Tier
    allowed: tuple[T, ...]
    withheld: Mapping[str, int] = field(default_factory=dict)

    @property
    def withheld_total(self) -> int:
        return sum(self.withheld.values())

    def envelope(self) -> dict[str, Any]:
        """For the recall's audit envelope: the tier and the withheld counts by reason."""
        return {
            "tier": self.tier.value,
            "withheld": dict(sorted(self.withheld.items())),
            "withheldTotal": self.withheld_total,
        }


def egress_filter(
    items: Iterable[T],
    *,
    tier: Tier | str,
    classification_of: Callable[[T], Classification | str],
    tenant_opted_in_internal_cloud: bool,
) -> EgressResult[T]:
    """Keep what may go to `tier`, in order; count the rest by reason. Pure: no database."""
    tier = parse_tier(tier)
    allowed: list[T] = []
    withheld: Counter[str] = Counter()
    for item in items:
        reason = withhold_reason(
            classification_of(item),
            tier,
            tenant_opted_in_internal_cloud=tenant_opted_in_internal_cloud,
        )
        if reason is None:
            allowed.append(item)
        else:
            withheld[reason] += 1
    return EgressResult(tier, tuple(allowed), dict(withheld))


def tenant_allows_internal_cloud(tenant_id: uuid.UUID | None) -> bool:
    """Has the tenant opted in to sending internal (non-personal) text to cloud models?"""
    if tenant_id is None:
        return False
    return TenantEgressPolicy.objects.filter(tenant_id=tenant_id, internal_to_cloud=True).exists()


class EgressGate(Check):
    name = "egress-gate"
    priority = 70
    hooks = frozenset({Hook.PRE_RECALL, Hook.POST_RECALL, Hook.PRE_RESPONSE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        raw = op.attributes.get("egress_tier", DEFAULT_TIER.value)
        try:
            tier = parse_tier(raw)
        except ValueError:
            return Decision(
                self.name, Verdict.DENY, "egress-unknown-tier", "The tier must be local or cloud."
            )
        if hook == Hook.PRE_RECALL:
            return None
        classifications = op.attributes.get("classifications")
        if classifications is None:
            return None
        opted_in = op.attributes.get("tenant_opted_in_internal_cloud")
        if not isinstance(opted_in, bool):
            opted_in = tenant_allows_internal_cloud(op.tenant_id)
        reasons = Counter(
            reason
            for c in classifications
            if (reason := withhold_reason(c, tier, tenant_opted_in_internal_cloud=opted_in))
        )
        if reasons:
            worst = sorted(reasons)[0]
            return Decision(
                self.name,
                Verdict.DENY,
                "egress-unfiltered",
                f"The answer holds text that may not go to the {tier.value} tier.",
                extra={"withheld": dict(sorted(reasons.items())), "firstReason": worst},
            )
        return None


def register_checks() -> None:
    from governance.pipeline import register, registered_checks

    if not any(c.name == EgressGate.name for c in registered_checks()):
        register(EgressGate())
