"""Scope policies: every adapter scope under every consent, opt-out and consumer case.

The expectations are written out here, independently of `consent.policy.BLUEPRINTS`,
so a change to a blueprint has to change this table too.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from consent.enums import CONSENT_TYPES, AdapterScope, ConsentType, Consumer, OptOutCategory
from consent.policy import (
    BLUEPRINTS,
    MemoryTier,
    ScopeBlueprint,
    ScopeMode,
    evaluate_scope_policies,
    scope_policy,
)

P, S, SD = ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE, ConsentType.SENSITIVE_DATA
OPT = OptOutCategory
SURFACES = {"assistant", "tara", "arete", "veritas", "nyx", "nisaba", "metis", "studio"}
OPERATORS = {"admin", "support"}

# scope: (label, required consents, opt-outs, runs without storage, consumers,
#         admin reviewable, governance review)
EXPECTED = {
    AdapterScope.ASSISTANT_PROFILE: (
        "Assistant profile memory",
        {P, S},
        {OPT.PERSONALIZATION, OPT.LONG_TERM_MEMORY},
        False,
        SURFACES,
        True,
        False,
    ),
    AdapterScope.SESSION: (
        "Session memory",
        {P},
        {OPT.SESSION_MEMORY},
        True,
        SURFACES,
        False,
        False,
    ),
    AdapterScope.SCENE: (
        "Scene memory",
        {P},
        {OPT.EMBODIED_MEMORY},
        True,
        {"assistant", "studio"},
        False,
        False,
    ),
    AdapterScope.POSE: (
        "Pose memory",
        {P, S, SD},
        {OPT.EMBODIED_MEMORY},
        False,
        {"assistant", "studio"},
        False,
        True,
    ),
    AdapterScope.CONVERSATION: (
        "Conversation history",
        {P, S},
        {OPT.LONG_TERM_MEMORY},
        False,
        SURFACES,
        True,
        False,
    ),
    AdapterScope.DOMAIN: (
        "Domain memory",
        {P, S},
        {OPT.PERSONALIZATION, OPT.LONG_TERM_MEMORY},
        False,
        SURFACES,
        True,
        False,
    ),
    AdapterScope.CROSS_DOMAIN: (
        "Cross-domain memory",
        {P, S},
        {OPT.PERSONALIZATION, OPT.LONG_TERM_MEMORY},
        False,
        SURFACES,
        True,
        True,
    ),
    AdapterScope.NOTEBOOK: (
        "Notebook memory",
        {P, S},
        {OPT.LONG_TERM_MEMORY},
        False,
        SURFACES,
        True,
        False,
    ),
    AdapterScope.OPERATOR_COPILOT: (
        "Operator copilot memory",
        {P, S},
        {OPT.OPERATOR_COPILOT},
        False,
        OPERATORS,
        True,
        True,
    ),
    AdapterScope.TENANT: (
        "Tenant memory",
        {P, S},
        {OPT.TENANT_SHARING},
        False,
        SURFACES | {"admin"},
        True,
        True,
    ),
    AdapterScope.ADMIN_REVIEW: (
        "Admin review",
        {P, S},
        set(),
        False,
        OPERATORS,
        True,
        True,
    ),
}

ALL_SCOPES = list(AdapterScope)
ALL_GRANTED = frozenset(CONSENT_TYPES)
NONE = frozenset[str]()

CONSENT_WORDS = {P: "data processing", S: "data storage", SD: "sensitive data"}
OPT_OUT_WORDS = {
    OPT.PERSONALIZATION: "personalization",
    OPT.SESSION_MEMORY: "session memory",
    OPT.LONG_TERM_MEMORY: "long-term memory",
    OPT.CROSS_DEVICE_SYNC: "cross-device sync",
    OPT.EMBODIED_MEMORY: "embodied memory",
    OPT.OPERATOR_COPILOT: "operator copilot",
    OPT.TENANT_SHARING: "tenant sharing",
}


def label(scope: AdapterScope) -> str:
    return EXPECTED[scope][0]


def required(scope: AdapterScope) -> set[ConsentType]:
    return EXPECTED[scope][1]


def ephemeral_capable(scope: AdapterScope) -> bool:
    return EXPECTED[scope][3]


def test_the_table_covers_every_adapter_scope() -> None:
    assert set(EXPECTED) == set(AdapterScope) == set(BLUEPRINTS)
    assert len(ALL_SCOPES) == 11


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_blueprint_metadata_matches_the_table(scope: AdapterScope) -> None:
    _, req, opt_outs, no_storage, consumers, reviewable, governance = EXPECTED[scope]
    bp = BLUEPRINTS[scope]
    assert bp.label == label(scope)
    assert set(bp.required_consents) == req
    assert set(bp.opt_out_categories) == opt_outs
    assert bp.runs_without_storage is no_storage
    assert {str(c) for c in bp.allowed_consumers} == consumers
    assert bp.admin_reviewable is reviewable
    assert bp.requires_governance_review is governance
    assert bp.canonical_tiers and set(bp.canonical_tiers) <= set(MemoryTier)


def test_spec_governance_review_scopes() -> None:
    gated = {s for s, bp in BLUEPRINTS.items() if bp.requires_governance_review}
    assert gated == {
        AdapterScope.OPERATOR_COPILOT,
        AdapterScope.TENANT,
        AdapterScope.CROSS_DOMAIN,
        AdapterScope.POSE,
        AdapterScope.ADMIN_REVIEW,
    }


def test_spec_pose_requires_processing_storage_and_sensitive_data() -> None:
    assert set(BLUEPRINTS[AdapterScope.POSE].required_consents) == {P, S, SD}


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_nothing_granted_suppresses_every_scope_and_names_each_missing_consent(
    scope: AdapterScope,
) -> None:
    policy = scope_policy(scope, active_consents=NONE, opted_out=NONE)
    assert policy.scope == scope
    assert policy.enabled is False
    assert policy.mode == ScopeMode.SUPPRESSED
    expected_notes = {
        f"{label(scope)} requires {CONSENT_WORDS[c]} consent." for c in required(scope)
    }
    assert set(policy.notes) == expected_notes
    assert len(policy.notes) == len(expected_notes)


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_everything_granted_makes_every_scope_durable_without_notes(
    scope: AdapterScope,
) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED, opted_out=NONE)
    assert (policy.enabled, policy.mode, policy.notes) == (True, ScopeMode.DURABLE, ())


@pytest.mark.parametrize("scope", ALL_SCOPES)
@pytest.mark.parametrize("consumer", sorted(Consumer))
def test_allowed_consumers_get_the_scope_and_others_are_refused(
    scope: AdapterScope, consumer: Consumer
) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED, opted_out=NONE, consumer=consumer)
    if str(consumer) in EXPECTED[scope][4]:
        assert (policy.enabled, policy.mode, policy.notes) == (True, ScopeMode.DURABLE, ())
    else:
        assert policy.enabled is False
        assert policy.mode == ScopeMode.SUPPRESSED
        assert policy.notes == (f"Consumer {consumer} is not allowed to use this scope.",)


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_an_unknown_consumer_is_refused(scope: AdapterScope) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED, opted_out=NONE, consumer="crm")
    assert policy.mode == ScopeMode.SUPPRESSED
    assert policy.notes == ("Consumer crm is not allowed to use this scope.",)


def test_spec_example_support_is_refused_the_profile() -> None:
    policy = scope_policy(
        AdapterScope.ASSISTANT_PROFILE,
        active_consents=ALL_GRANTED,
        opted_out=NONE,
        consumer="support",
    )
    assert policy.notes == ("Consumer support is not allowed to use this scope.",)


@pytest.mark.parametrize(
    ("scope", "missing"),
    [(s, c) for s in ALL_SCOPES for c in sorted(EXPECTED[s][1]) if c != S],
)
def test_each_missing_required_consent_suppresses_the_scope(
    scope: AdapterScope, missing: ConsentType
) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED - {missing}, opted_out=NONE)
    assert policy.enabled is False
    assert policy.mode == ScopeMode.SUPPRESSED
    assert policy.notes == (f"{label(scope)} requires {CONSENT_WORDS[missing]} consent.",)


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_missing_storage_makes_capable_scopes_ephemeral_and_suppresses_the_rest(
    scope: AdapterScope,
) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED - {S}, opted_out=NONE)
    if ephemeral_capable(scope):
        assert policy.enabled is True
        assert policy.mode == ScopeMode.EPHEMERAL
        assert policy.notes == (
            f"{label(scope)} runs ephemerally: nothing is stored without data storage consent.",
        )
    else:
        assert policy.enabled is False
        assert policy.mode == ScopeMode.SUPPRESSED
        assert policy.notes == (f"{label(scope)} requires data storage consent.",)


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_processing_alone_runs_only_the_ephemeral_scopes(scope: AdapterScope) -> None:
    policy = scope_policy(scope, active_consents=frozenset({P}), opted_out=NONE)
    expected = ScopeMode.EPHEMERAL if ephemeral_capable(scope) else ScopeMode.SUPPRESSED
    assert policy.mode == expected
    assert policy.enabled is (expected == ScopeMode.EPHEMERAL)


@pytest.mark.parametrize("scope", ALL_SCOPES)
@pytest.mark.parametrize("category", list(OptOutCategory))
def test_each_opt_out_suppresses_exactly_the_scopes_that_list_it(
    scope: AdapterScope, category: OptOutCategory
) -> None:
    policy = scope_policy(scope, active_consents=ALL_GRANTED, opted_out=frozenset({category}))
    if category in EXPECTED[scope][2]:
        assert policy.enabled is False
        assert policy.mode == ScopeMode.SUPPRESSED
        assert policy.notes == (
            f"{label(scope)} is suppressed because the member opted out of "
            f"{OPT_OUT_WORDS[category]}.",
        )
    else:
        assert (policy.enabled, policy.mode, policy.notes) == (True, ScopeMode.DURABLE, ())


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_notes_list_every_reason_in_order_consents_opt_outs_consumer(
    scope: AdapterScope,
) -> None:
    policy = scope_policy(
        scope,
        active_consents=NONE,
        opted_out=frozenset(OptOutCategory),
        consumer="nobody",
    )
    bp = BLUEPRINTS[scope]
    consent_notes = [
        f"{label(scope)} requires {CONSENT_WORDS[c]} consent." for c in bp.required_consents
    ]
    opt_out_notes = [
        f"{label(scope)} is suppressed because the member opted out of {OPT_OUT_WORDS[c]}."
        for c in bp.opt_out_categories
    ]
    assert policy.notes == (
        *consent_notes,
        *opt_out_notes,
        "Consumer nobody is not allowed to use this scope.",
    )


def test_evaluate_returns_every_scope_in_enum_order() -> None:
    policies = evaluate_scope_policies(active_consents=ALL_GRANTED, opted_out=NONE)
    assert list(policies) == ALL_SCOPES
    assert all(p.mode == ScopeMode.DURABLE for p in policies.values())


def test_evaluate_agrees_with_scope_policy_for_a_mixed_member() -> None:
    granted = frozenset({"data_processing", "sensitive_data"})
    off = frozenset({"embodied_memory"})
    policies = evaluate_scope_policies(active_consents=granted, opted_out=off, consumer="tara")
    for scope, policy in policies.items():
        assert policy == scope_policy(
            scope, active_consents=granted, opted_out=off, consumer="tara"
        )
    assert policies[AdapterScope.SESSION].mode == ScopeMode.EPHEMERAL
    assert policies[AdapterScope.SCENE].notes == (
        "Scene memory is suppressed because the member opted out of embodied memory.",
        "Consumer tara is not allowed to use this scope.",
    )


def test_plain_strings_and_enums_are_interchangeable() -> None:
    as_strings = scope_policy(
        "session", active_consents=frozenset({"data_processing"}), opted_out=frozenset()
    )
    as_enums = scope_policy(
        AdapterScope.SESSION, active_consents=frozenset({P}), opted_out=frozenset()
    )
    assert as_strings == as_enums


def test_unknown_scope_is_an_error() -> None:
    with pytest.raises(ValueError):
        scope_policy("everything", active_consents=ALL_GRANTED, opted_out=NONE)


def test_policies_are_immutable() -> None:
    policy = scope_policy(AdapterScope.SESSION, active_consents=ALL_GRANTED, opted_out=NONE)
    with pytest.raises(FrozenInstanceError):
        policy.enabled = False


@pytest.mark.parametrize(
    ("required_consents", "runs_without_storage"),
    [
        ((S,), False),  # no processing consent
        ((P,), False),  # neither storage required nor ephemeral
        ((P, S), True),  # storage required and ephemeral at once
    ],
)
def test_blueprint_refuses_incoherent_storage_rules(
    required_consents: tuple[ConsentType, ...], runs_without_storage: bool
) -> None:
    with pytest.raises(ValueError):
        ScopeBlueprint(
            scope=AdapterScope.SESSION,
            label="x",
            required_consents=required_consents,
            opt_out_categories=(),
            canonical_tiers=(MemoryTier.WORKING,),
            admin_reviewable=False,
            requires_governance_review=False,
            allowed_consumers=frozenset(),
            runs_without_storage=runs_without_storage,
        )
