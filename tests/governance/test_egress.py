"""The egress gate: every classification × tier pair, withheld items counted by reason
(never silently dropped), and the check that refuses an answer nobody filtered."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from governance.classify import Classification, Tier
from governance.egress import (
    EgressGate,
    egress_filter,
    parse_tier,
    tenant_allows_internal_cloud,
    withhold_reason,
)
from governance.kernel_models import TenantEgressPolicy
from governance.models import AuditEvent
from governance.pipeline import Denied, Effect, Hook, Operation, govern
from governance.principal import Principal

# (classification, tier, tenant opted in to internal work on the cloud) -> withheld reason.
TABLE: dict[tuple[str, str, bool], str | None] = {
    ("public", "local", False): None,
    ("public", "local", True): None,
    ("public", "cloud", False): None,
    ("public", "cloud", True): None,
    ("internal", "local", False): None,
    ("internal", "local", True): None,
    ("internal", "cloud", False): "egress-internal-to-cloud",
    ("internal", "cloud", True): None,
    ("personal", "local", False): None,
    ("personal", "local", True): None,
    ("personal", "cloud", False): "egress-personal-to-cloud",
    ("personal", "cloud", True): "egress-personal-to-cloud",
    ("secret", "local", False): "egress-secret-to-local",
    ("secret", "local", True): "egress-secret-to-local",
    ("secret", "cloud", False): "egress-secret-to-cloud",
    ("secret", "cloud", True): "egress-secret-to-cloud",
}


def test_the_table_covers_every_pair() -> None:
    pairs = set(itertools.product(Classification, Tier, (False, True)))
    assert {(Classification(c), Tier(t), o) for c, t, o in TABLE} == pairs


@pytest.mark.parametrize(("key", "reason"), sorted(TABLE.items(), key=str))
def test_every_classification_and_tier(key, reason) -> None:
    classification, tier, opted_in = key
    assert withhold_reason(classification, tier, tenant_opted_in_internal_cloud=opted_in) == reason
    result = egress_filter(
        ["item"],
        tier=tier,
        classification_of=lambda _: classification,
        tenant_opted_in_internal_cloud=opted_in,
    )
    if reason is None:
        assert result.allowed == ("item",) and result.withheld == {}
    else:
        assert result.allowed == () and result.withheld == {reason: 1}


@dataclass(frozen=True)
class Item:
    id: int
    classification: str


def test_withheld_items_are_counted_by_reason_and_order_is_kept() -> None:
    items = [
        Item(1, "personal"),
        Item(2, "public"),
        Item(3, "secret"),
        Item(4, "internal"),
        Item(5, "personal"),
        Item(6, "public"),
        Item(7, "mystery"),
    ]
    result = egress_filter(
        items,
        tier="cloud",
        classification_of=lambda i: i.classification,
        tenant_opted_in_internal_cloud=False,
    )
    assert [i.id for i in result.allowed] == [2, 6]
    assert result.withheld == {
        "egress-personal-to-cloud": 2,
        "egress-secret-to-cloud": 1,
        "egress-internal-to-cloud": 1,
        "egress-unclassified": 1,
    }
    assert len(result.allowed) + result.withheld_total == len(items)
    assert result.envelope() == {
        "tier": "cloud",
        "withheld": {
            "egress-internal-to-cloud": 1,
            "egress-personal-to-cloud": 2,
            "egress-secret-to-cloud": 1,
            "egress-unclassified": 1,
        },
        "withheldTotal": 5,
    }
    local = egress_filter(
        items,
        tier=Tier.LOCAL,
        classification_of=lambda i: i.classification,
        tenant_opted_in_internal_cloud=False,
    )
    assert [i.id for i in local.allowed] == [1, 2, 4, 5, 6]
    assert local.envelope()["withheld"] == {"egress-secret-to-local": 1, "egress-unclassified": 1}


@pytest.mark.parametrize("tier", ["", "Cloud", "edge", None, 1])
def test_an_unknown_tier_is_an_error_not_a_guess(tier) -> None:
    with pytest.raises(ValueError):
        parse_tier(tier)
    with pytest.raises(ValueError):
        egress_filter([], tier=tier, classification_of=str, tenant_opted_in_internal_cloud=False)


# -- the check ---------------------------------------------------------------------------------


def recall_op(member, **attributes) -> Operation:
    return Operation(
        name="memory.recall",
        effect=Effect.READ,
        principal=Principal("member", member.public_id, member.tenant_id),
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        attributes=attributes,
    )


@pytest.mark.django_db
def test_pre_recall_refuses_an_unknown_tier(member) -> None:
    govern(Hook.PRE_RECALL, recall_op(member, egress_tier="local"))
    with pytest.raises(Denied) as caught:
        govern(Hook.PRE_RECALL, recall_op(member, egress_tier="moon"))
    assert caught.value.code == "egress-unknown-tier"
    event = AuditEvent.objects.get(action="iris.governance.decision.deny")
    assert event.payload["decisions"][-1]["check"] == "egress-gate"


@pytest.mark.django_db
def test_post_recall_refuses_an_answer_holding_what_may_not_go(member) -> None:
    with pytest.raises(Denied) as caught:
        govern(
            Hook.POST_RECALL,
            recall_op(member, egress_tier="cloud", classifications=["public", "personal"]),
        )
    assert caught.value.code == "egress-unfiltered"
    assert caught.value.extra["withheld"] == {"egress-personal-to-cloud": 1}
    # Filtered first, the same answer goes.
    govern(Hook.POST_RECALL, recall_op(member, egress_tier="cloud", classifications=["public"]))
    govern(
        Hook.POST_RECALL,
        recall_op(member, egress_tier="local", classifications=["public", "personal"]),
    )


@pytest.mark.django_db
def test_a_call_naming_no_tier_is_treated_as_cloud(member) -> None:
    with pytest.raises(Denied):
        govern(Hook.POST_RECALL, recall_op(member, classifications=["personal"]))
    assert EgressGate().evaluate(Hook.POST_RECALL, recall_op(member)) is None


@pytest.mark.django_db
def test_internal_text_goes_to_the_cloud_only_for_a_tenant_that_opted_in(
    member, other_tenant
) -> None:
    assert not tenant_allows_internal_cloud(member.tenant_id)
    with pytest.raises(Denied):
        govern(
            Hook.POST_RECALL,
            recall_op(member, egress_tier="cloud", classifications=["internal"]),
        )
    TenantEgressPolicy.objects.create(tenant_id=member.tenant_id, internal_to_cloud=True)
    assert tenant_allows_internal_cloud(member.tenant_id)
    assert not tenant_allows_internal_cloud(other_tenant.id)
    govern(Hook.POST_RECALL, recall_op(member, egress_tier="cloud", classifications=["internal"]))
    with pytest.raises(Denied):
        govern(
            Hook.POST_RECALL,
            recall_op(member, egress_tier="cloud", classifications=["personal"]),
        )
