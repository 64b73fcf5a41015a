from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.enums import SCOPE_IDENTIFIERS, ScopeKind
from memory.rules.scopes import (
    ScopeRuleError,
    build_scope_key,
    check_scope_change,
    is_reachable_scope,
    parse_scope_key,
    reachable_kinds,
    scope_change_targets,
    validate_scope,
)

K = ScopeKind


def test_scene_key_joins_identifiers_in_contract_order() -> None:
    key = build_scope_key(K.SCENE, {"sceneId": "sc1", "userId": "u1", "sessionId": "s1"})
    assert key == "scene:u1:s1:sc1"


def test_operator_copilot_key_keeps_hyphenated_kind() -> None:
    key = build_scope_key(
        "operator-copilot", {"tenantId": "t1", "operatorId": "op1", "userId": "u1"}
    )
    assert key == "operator-copilot:t1:op1:u1"
    assert parse_scope_key(key) == (
        K.OPERATOR_COPILOT,
        {"tenantId": "t1", "operatorId": "op1", "userId": "u1"},
    )


@pytest.mark.parametrize(
    ("kind", "identifiers", "field", "rule"),
    [
        (K.SESSION, {"userId": "u1"}, "sessionId", "missing"),
        (K.SESSION, {"userId": "u1", "sessionId": ""}, "sessionId", "empty"),
        (K.SESSION, {"userId": "  ", "sessionId": "s1"}, "userId", "empty"),
        (K.PROFILE, {"userId": "u:1"}, "userId", "contains-separator"),
        (K.PROFILE, {"userId": "u1", "sessionId": "s1"}, "sessionId", "unexpected"),
        (K.PROFILE, {"userId": 7}, "userId", "not-a-string"),
        ("galaxy", {"userId": "u1"}, "kind", "unknown-kind"),
    ],
)
def test_validate_scope_names_the_broken_field(
    kind: str, identifiers: dict, field: str, rule: str
) -> None:
    with pytest.raises(ScopeRuleError) as caught:
        validate_scope(kind, identifiers)
    assert (caught.value.field, caught.value.rule) == (field, rule)


@pytest.mark.parametrize(
    "key", ["", "profile", "profile:u1:extra", "session:u1", "nowhere:u1", "profile:"]
)
def test_parse_refuses_keys_it_would_not_build(key: str) -> None:
    with pytest.raises(ScopeRuleError):
        parse_scope_key(key)


_identifier = st.text(min_size=1, max_size=20).filter(lambda s: ":" not in s and s.strip())


@given(
    kind=st.sampled_from(list(ScopeKind)),
    values=st.lists(_identifier, min_size=4, max_size=4),
)
def test_build_and_parse_round_trip(kind: ScopeKind, values: list[str]) -> None:
    identifiers = dict(zip(SCOPE_IDENTIFIERS[kind], values, strict=False))
    key = build_scope_key(kind, identifiers)
    assert parse_scope_key(key) == (kind, identifiers)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (K.PROFILE, {K.PROFILE}),
        (K.SESSION, {K.SESSION, K.PROFILE}),
        (K.SCENE, {K.SCENE, K.SESSION, K.PROFILE}),
        (K.POSE, {K.POSE, K.SCENE, K.SESSION, K.PROFILE}),
        (K.NOTEBOOK, {K.NOTEBOOK, K.PROFILE}),
        (K.TENANT, {K.TENANT}),
        (K.CRISIS, {K.CRISIS, K.SESSION, K.PROFILE}),
        (K.OPERATOR_COPILOT, {K.OPERATOR_COPILOT}),
    ],
)
def test_reachability_table(kind: ScopeKind, expected: set[ScopeKind]) -> None:
    assert reachable_kinds(kind) == expected


def test_notebook_reaches_tenant_only_when_tenant_policy_allows() -> None:
    assert K.TENANT in reachable_kinds(K.NOTEBOOK, tenant_policy_allows=True)
    assert K.TENANT not in reachable_kinds(K.NOTEBOOK)


@pytest.mark.parametrize("kind", [k for k in ScopeKind if k is not K.NOTEBOOK])
def test_tenant_policy_widens_nothing_but_notebook(kind: ScopeKind) -> None:
    assert reachable_kinds(kind, tenant_policy_allows=True) == reachable_kinds(kind)


def test_every_kind_reaches_itself_and_no_consumer_kind_reaches_operator_notes() -> None:
    for kind in ScopeKind:
        reachable = reachable_kinds(kind, tenant_policy_allows=True)
        assert kind in reachable
        if kind is not K.OPERATOR_COPILOT:
            assert K.OPERATOR_COPILOT not in reachable


def test_session_recall_reaches_only_its_own_session_and_member() -> None:
    request = {"userId": "u1", "sessionId": "s1"}
    assert is_reachable_scope(K.SESSION, request, K.SESSION, {"userId": "u1", "sessionId": "s1"})
    assert is_reachable_scope(K.SESSION, request, K.PROFILE, {"userId": "u1"})
    assert not is_reachable_scope(
        K.SESSION, request, K.SESSION, {"userId": "u1", "sessionId": "s2"}
    )
    assert not is_reachable_scope(K.SESSION, request, K.PROFILE, {"userId": "u2"})
    assert not is_reachable_scope(
        K.SESSION, request, K.SCENE, {"userId": "u1", "sessionId": "s1", "sceneId": "x"}
    )


def test_pose_recall_reaches_the_scene_it_sits_in() -> None:
    request = {"userId": "u1", "sessionId": "s1", "sceneId": "a", "poseId": "p"}
    scene = {"userId": "u1", "sessionId": "s1", "sceneId": "a"}
    other_scene = {"userId": "u1", "sessionId": "s1", "sceneId": "b"}
    assert is_reachable_scope(K.POSE, request, K.SCENE, scene)
    assert not is_reachable_scope(K.POSE, request, K.SCENE, other_scene)


def test_notebook_reaches_the_members_tenant_rows_under_policy() -> None:
    request = {"userId": "u1", "notebookId": "n1"}
    tenant_row = {"tenantId": "t1", "userId": "u1"}
    assert not is_reachable_scope(K.NOTEBOOK, request, K.TENANT, tenant_row)
    assert is_reachable_scope(K.NOTEBOOK, request, K.TENANT, tenant_row, tenant_policy_allows=True)


@pytest.mark.parametrize(
    ("source", "target", "allowed", "reason", "copy"),
    [
        (K.SESSION, K.PROFILE, True, "promote-session-to-profile", False),
        (K.SESSION, K.NOTEBOOK, True, "promote-session-to-notebook", False),
        (K.PROFILE, K.NOTEBOOK, True, "demote-profile-to-notebook", False),
        (K.TENANT, K.NOTEBOOK, True, "tenant-read-only-copy", True),
        (K.NOTEBOOK, K.PROFILE, True, "promote-notebook-to-profile", False),
        (K.TENANT, K.PROFILE, False, "tenant-memory-never-consumer-profile", False),
        (K.PROFILE, K.SESSION, False, "scope-change-not-allowed", False),
        (K.PROFILE, K.TENANT, False, "scope-change-not-allowed", False),
        (K.CRISIS, K.PROFILE, False, "scope-change-not-allowed", False),
        (K.OPERATOR_COPILOT, K.PROFILE, False, "scope-change-not-allowed", False),
        (K.NOTEBOOK, K.NOTEBOOK, False, "same-scope", False),
    ],
)
def test_scope_change_rules(
    source: ScopeKind, target: ScopeKind, allowed: bool, reason: str, copy: bool
) -> None:
    change = check_scope_change(source, target)
    assert (change.allowed, change.reason_code, change.copy) == (allowed, reason, copy)


@given(source=st.sampled_from(list(ScopeKind)), target=st.sampled_from(list(ScopeKind)))
def test_no_scope_change_ever_lands_in_profile_from_tenant_or_in_tenant(
    source: ScopeKind, target: ScopeKind
) -> None:
    change = check_scope_change(source, target)
    if target is K.TENANT or (source is K.TENANT and target is not K.NOTEBOOK):
        assert not change.allowed
    if change.copy:
        assert source is K.TENANT


@pytest.mark.parametrize(
    ("source", "targets"),
    [
        (K.SESSION, [K.PROFILE, K.NOTEBOOK]),
        (K.PROFILE, [K.NOTEBOOK]),
        (K.NOTEBOOK, [K.PROFILE]),
        (K.TENANT, [K.NOTEBOOK]),
        (K.CRISIS, []),
        (K.SCENE, []),
        (K.POSE, []),
        (K.OPERATOR_COPILOT, []),
    ],
)
def test_scope_change_targets_list_every_allowed_move_and_only_those(
    source: ScopeKind, targets: list[ScopeKind]
) -> None:
    assert [target for target, _ in scope_change_targets(source)] == targets


@given(source=st.sampled_from(list(ScopeKind)))
def test_scope_change_targets_agree_with_the_rule(source: ScopeKind) -> None:
    offered = {target for target, _ in scope_change_targets(source)}
    assert offered == {t for t in ScopeKind if check_scope_change(source, t).allowed}
