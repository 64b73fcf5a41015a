"""Scope keys, recall reachability and scope-change rules (spec: "Memory Scope Hierarchy").

Pure rules: no Django, no database. A scope key is its kind followed by exactly the
identifiers that kind needs, colon-joined in `SCOPE_IDENTIFIERS` order, e.g.
`scene:<userId>:<sessionId>:<sceneId>`. The decisions behind the tables below are written
down in docs/decisions/memory.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from governance.rules import RuleError
from memory.enums import SCOPE_IDENTIFIERS, ScopeKind

SEPARATOR = ":"


class ScopeRuleError(RuleError):
    """A scope or its identifiers break the contract; `field` names the culprit (wire name)."""


def _kind(kind: ScopeKind | str) -> ScopeKind:
    try:
        return ScopeKind(kind)
    except ValueError:
        raise ScopeRuleError("kind", "unknown-kind", allowed=[k.value for k in ScopeKind]) from None


def validate_scope(kind: ScopeKind | str, identifiers: Mapping[str, str]) -> ScopeKind:
    """Check that `identifiers` are exactly the ones `kind` needs, each a usable key part.

    Returns the kind as a `ScopeKind`. Extra identifiers are refused rather than ignored:
    a caller that sends `sessionId` with a profile scope has misunderstood the scope, and
    silently dropping it would store the memory somewhere the caller did not mean.
    """
    scope_kind = _kind(kind)
    expected = SCOPE_IDENTIFIERS[scope_kind]
    for name in expected:
        if name not in identifiers:
            raise ScopeRuleError(name, "missing")
        value = identifiers[name]
        if not isinstance(value, str):
            raise ScopeRuleError(name, "not-a-string")
        if not value.strip():
            raise ScopeRuleError(name, "empty")
        # A colon inside an identifier would make the key parse back differently.
        if SEPARATOR in value:
            raise ScopeRuleError(name, "contains-separator")
    for name in sorted(set(identifiers) - set(expected)):
        raise ScopeRuleError(name, "unexpected")
    return scope_kind


def build_scope_key(kind: ScopeKind | str, identifiers: Mapping[str, str]) -> str:
    scope_kind = validate_scope(kind, identifiers)
    parts = [scope_kind.value, *(identifiers[name] for name in SCOPE_IDENTIFIERS[scope_kind])]
    return SEPARATOR.join(parts)


def key_from(kind: ScopeKind | str, identifiers: Mapping[str, str]) -> str:
    """The key of `kind` from a set of identifiers that may hold more than it needs (a
    recall's identifiers give the keys of every scope it reaches). Raises KeyError for a
    missing one; the caller has validated the values."""
    scope_kind = _kind(kind)
    parts = [scope_kind.value, *(identifiers[name] for name in SCOPE_IDENTIFIERS[scope_kind])]
    return SEPARATOR.join(parts)


def parse_scope_key(
    key: str, kind: ScopeKind | str | None = None
) -> tuple[ScopeKind, dict[str, str]]:
    """The inverse of `build_scope_key`; refuses anything it would not have built, and a
    key of another kind than `kind` when one is expected."""
    if not isinstance(key, str) or not key:
        raise ScopeRuleError("scopeKey", "malformed")
    kind_text, *values = key.split(SEPARATOR)
    scope_kind = _kind(kind_text)
    if kind is not None and scope_kind is not _kind(kind):
        raise ScopeRuleError("scopeKey", "kind-mismatch")
    names = SCOPE_IDENTIFIERS[scope_kind]
    if len(values) != len(names):
        raise ScopeRuleError("scopeKey", "malformed")
    identifiers = dict(zip(names, values, strict=True))
    validate_scope(scope_kind, identifiers)
    return scope_kind, identifiers


# Which stored kinds a recall in a given kind may see (spec gate 2, "scope reachability").
# Narrower scopes see the wider scopes they sit inside, never the other way round.
# Decisions beyond the spec's list (see docs/decisions/memory.md):
# - crisis sees crisis + session + profile; the crisis gate then narrows it to safety facts.
# - operator-copilot sees only operator-copilot: consumer memory reaches an operator only
#   through the inspection regime, and no consumer recall ever sees operator notes.
# - tenant sees only tenant; notebook sees tenant only when the tenant's policy allows.
REACHABLE_KINDS: Mapping[ScopeKind, frozenset[ScopeKind]] = MappingProxyType(
    {
        ScopeKind.PROFILE: frozenset({ScopeKind.PROFILE}),
        ScopeKind.SESSION: frozenset({ScopeKind.SESSION, ScopeKind.PROFILE}),
        ScopeKind.SCENE: frozenset({ScopeKind.SCENE, ScopeKind.SESSION, ScopeKind.PROFILE}),
        ScopeKind.POSE: frozenset(
            {ScopeKind.POSE, ScopeKind.SCENE, ScopeKind.SESSION, ScopeKind.PROFILE}
        ),
        # + ScopeKind.TENANT (same tenant, same member) when the tenant policy allows it.
        ScopeKind.NOTEBOOK: frozenset({ScopeKind.NOTEBOOK, ScopeKind.PROFILE}),
        ScopeKind.TENANT: frozenset({ScopeKind.TENANT}),
        ScopeKind.CRISIS: frozenset({ScopeKind.CRISIS, ScopeKind.SESSION, ScopeKind.PROFILE}),
        ScopeKind.OPERATOR_COPILOT: frozenset({ScopeKind.OPERATOR_COPILOT}),
    }
)


def reachable_kinds(
    kind: ScopeKind | str, *, tenant_policy_allows: bool = False
) -> frozenset[ScopeKind]:
    scope_kind = _kind(kind)
    reachable = REACHABLE_KINDS[scope_kind]
    if scope_kind is ScopeKind.NOTEBOOK and tenant_policy_allows:
        reachable = reachable | {ScopeKind.TENANT}
    return reachable


def is_reachable_scope(
    request_kind: ScopeKind | str,
    request_identifiers: Mapping[str, str],
    entry_kind: ScopeKind | str,
    entry_identifiers: Mapping[str, str],
    *,
    tenant_policy_allows: bool = False,
) -> bool:
    """Kind reachability plus identity: every identifier the two scopes share must match.

    A session recall reaches profile rows of the same `userId` and session rows of the same
    `sessionId`, not every session. Identifiers the request does not carry (a notebook
    request has no `tenantId`) are left to the tenant-boundary gate, which runs first.
    """
    if _kind(entry_kind) not in reachable_kinds(
        request_kind, tenant_policy_allows=tenant_policy_allows
    ):
        return False
    shared = set(request_identifiers) & set(entry_identifiers)
    return all(request_identifiers[name] == entry_identifiers[name] for name in shared)


@dataclass(frozen=True)
class ScopeChange:
    """Whether a member may move a memory between scopes.

    `copy` means the original stays where it is and the target gets a read-only copy.
    """

    allowed: bool
    reason_code: str
    copy: bool = False


# The member's scope-change flow (spec: "Customer Memory UX Flows"). Anything not listed
# is refused: crisis, scene, pose and operator-copilot memory do not move at a member's
# request, and nothing is promoted into tenant scope (that would share it with a tenant).
_ALLOWED_CHANGES: dict[tuple[ScopeKind, ScopeKind], ScopeChange] = {
    (ScopeKind.SESSION, ScopeKind.PROFILE): ScopeChange(True, "promote-session-to-profile"),
    (ScopeKind.SESSION, ScopeKind.NOTEBOOK): ScopeChange(True, "promote-session-to-notebook"),
    (ScopeKind.PROFILE, ScopeKind.NOTEBOOK): ScopeChange(True, "demote-profile-to-notebook"),
    # The way back: a demotion the member regrets is undone by the member's own move.
    (ScopeKind.NOTEBOOK, ScopeKind.PROFILE): ScopeChange(True, "promote-notebook-to-profile"),
    # The tenant keeps governing its row; the member gets a copy they can read, not edit.
    (ScopeKind.TENANT, ScopeKind.NOTEBOOK): ScopeChange(True, "tenant-read-only-copy", True),
}


def check_scope_change(from_kind: ScopeKind | str, to_kind: ScopeKind | str) -> ScopeChange:
    source, target = _kind(from_kind), _kind(to_kind)
    if source is target:
        return ScopeChange(False, "same-scope")
    if source is ScopeKind.TENANT and target is ScopeKind.PROFILE:
        return ScopeChange(False, "tenant-memory-never-consumer-profile")
    return _ALLOWED_CHANGES.get((source, target), ScopeChange(False, "scope-change-not-allowed"))


def scope_change_targets(from_kind: ScopeKind | str) -> tuple[tuple[ScopeKind, ScopeChange], ...]:
    """Every kind a member may move a memory of `from_kind` to, with the rule's answer, in
    `ScopeKind` order: what a page offers, read from the same table the service enforces."""
    source = _kind(from_kind)
    found = ((target, check_scope_change(source, target)) for target in ScopeKind)
    return tuple((target, change) for target, change in found if change.allowed)
