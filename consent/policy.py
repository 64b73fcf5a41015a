"""Scope policies: which adapter scopes a member's consents and opt-outs switch on.

Spec: "Per-scope governance metadata". Each of the 11 adapter scopes has a blueprint
(required consents, the opt-outs that suppress it, the memory tiers it spans, whether
operators may inspect it, whether it sits behind governance review, and who may read it).
`evaluate_scope_policies` weighs the blueprints against the member's live consents and
opt-outs and says, per scope, whether it is enabled and in which mode:

- **durable**: the scope is on and its memory may be stored (under its retention envelope);
- **ephemeral**: the scope is on for the live context only. Nothing is written to storage
  and nothing stored is read back. This happens only for scopes that can run without
  storage (`runs_without_storage`: session and scene) when data processing is granted but
  data storage is not;
- **suppressed**: the scope is off. Any missing required consent, any matching opt-out or
  a consumer outside the allow-list suppresses it; the notes name every reason.

Durable operation always needs data storage consent: a scope that cannot run without
storage lists `data_storage` among its required consents, and a scope that can lists it
nowhere (its absence only downgrades the mode). `__post_init__` keeps that true.

Notes explain a suppression or a downgrade, in plain English, in a fixed order
(consents, then opt-outs, then consumer), so pages and audit read the same every time.
A durable scope has no notes. The pure rules here import no Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from consent.enums import AdapterScope, ConsentType, Consumer, OptOutCategory


class MemoryTier(StrEnum):
    """The memory tiers a scope spans (the spec's canonicalTiers)."""

    CORE = "core"
    WORKING = "working"
    ARCHIVAL = "archival"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"


class ScopeMode(StrEnum):
    DURABLE = "durable"
    EPHEMERAL = "ephemeral"
    SUPPRESSED = "suppressed"


@dataclass(frozen=True)
class ScopeBlueprint:
    scope: AdapterScope
    label: str  # how notes name the scope, e.g. "Session memory"
    required_consents: tuple[ConsentType, ...]
    opt_out_categories: tuple[OptOutCategory, ...]
    canonical_tiers: tuple[MemoryTier, ...]
    admin_reviewable: bool
    requires_governance_review: bool
    allowed_consumers: frozenset[Consumer]
    runs_without_storage: bool = False

    def __post_init__(self) -> None:
        # Without processing consent nothing may touch the member's data at all.
        if ConsentType.DATA_PROCESSING not in self.required_consents:
            raise ValueError(f"{self.scope}: every scope requires data processing consent")
        # A scope either needs storage to exist or degrades to ephemeral without it.
        needs_storage = ConsentType.DATA_STORAGE in self.required_consents
        if needs_storage == self.runs_without_storage:
            raise ValueError(
                f"{self.scope}: list data_storage as required or mark runs_without_storage"
            )


@dataclass(frozen=True)
class ScopePolicy:
    scope: AdapterScope
    enabled: bool
    mode: ScopeMode
    notes: tuple[str, ...]


_SURFACES = frozenset(
    {
        Consumer.ASSISTANT,
        Consumer.TARA,
        Consumer.ARETE,
        Consumer.VERITAS,
        Consumer.NYX,
        Consumer.NISABA,
        Consumer.METIS,
        Consumer.STUDIO,
    }
)
_OPERATORS = frozenset({Consumer.ADMIN, Consumer.SUPPORT})
# Embodied memory is read only by the surfaces that render scenes.
_EMBODIED_SURFACES = frozenset({Consumer.ASSISTANT, Consumer.STUDIO})

_PROCESS = (ConsentType.DATA_PROCESSING,)
_PROCESS_AND_STORE = (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE)

BLUEPRINTS: dict[AdapterScope, ScopeBlueprint] = {
    b.scope: b
    for b in (
        ScopeBlueprint(
            scope=AdapterScope.ASSISTANT_PROFILE,
            label="Assistant profile memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(
                OptOutCategory.PERSONALIZATION,
                OptOutCategory.LONG_TERM_MEMORY,
            ),
            canonical_tiers=(MemoryTier.CORE, MemoryTier.SEMANTIC),
            admin_reviewable=True,
            requires_governance_review=False,
            allowed_consumers=_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.SESSION,
            label="Session memory",
            required_consents=_PROCESS,
            opt_out_categories=(OptOutCategory.SESSION_MEMORY,),
            canonical_tiers=(MemoryTier.WORKING, MemoryTier.EPISODIC),
            # Live context expires with the session; operators never browse it.
            admin_reviewable=False,
            requires_governance_review=False,
            allowed_consumers=_SURFACES,
            runs_without_storage=True,
        ),
        ScopeBlueprint(
            scope=AdapterScope.SCENE,
            label="Scene memory",
            required_consents=_PROCESS,
            opt_out_categories=(OptOutCategory.EMBODIED_MEMORY,),
            canonical_tiers=(MemoryTier.WORKING, MemoryTier.EPISODIC),
            admin_reviewable=False,
            requires_governance_review=False,
            allowed_consumers=_EMBODIED_SURFACES,
            runs_without_storage=True,
        ),
        ScopeBlueprint(
            scope=AdapterScope.POSE,
            label="Pose memory",
            # Spec: pose requires data_processing, data_storage and sensitive_data.
            required_consents=(*_PROCESS_AND_STORE, ConsentType.SENSITIVE_DATA),
            opt_out_categories=(OptOutCategory.EMBODIED_MEMORY,),
            canonical_tiers=(MemoryTier.WORKING, MemoryTier.EPISODIC),
            # Biometric-derived: exported only as aggregates, never inspected by operators.
            admin_reviewable=False,
            requires_governance_review=True,
            allowed_consumers=_EMBODIED_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.CONVERSATION,
            label="Conversation history",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(OptOutCategory.LONG_TERM_MEMORY,),
            canonical_tiers=(MemoryTier.EPISODIC, MemoryTier.ARCHIVAL),
            admin_reviewable=True,
            requires_governance_review=False,
            allowed_consumers=_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.DOMAIN,
            label="Domain memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(
                OptOutCategory.PERSONALIZATION,
                OptOutCategory.LONG_TERM_MEMORY,
            ),
            canonical_tiers=(MemoryTier.SEMANTIC, MemoryTier.EPISODIC),
            admin_reviewable=True,
            requires_governance_review=False,
            allowed_consumers=_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.CROSS_DOMAIN,
            label="Cross-domain memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(
                OptOutCategory.PERSONALIZATION,
                OptOutCategory.LONG_TERM_MEMORY,
            ),
            canonical_tiers=(MemoryTier.SEMANTIC,),
            admin_reviewable=True,
            requires_governance_review=True,
            allowed_consumers=_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.NOTEBOOK,
            label="Notebook memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(OptOutCategory.LONG_TERM_MEMORY,),
            canonical_tiers=(MemoryTier.SEMANTIC, MemoryTier.ARCHIVAL),
            admin_reviewable=True,
            requires_governance_review=False,
            allowed_consumers=_SURFACES,
        ),
        ScopeBlueprint(
            scope=AdapterScope.OPERATOR_COPILOT,
            label="Operator copilot memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(OptOutCategory.OPERATOR_COPILOT,),
            canonical_tiers=(MemoryTier.WORKING, MemoryTier.EPISODIC),
            admin_reviewable=True,
            requires_governance_review=True,
            allowed_consumers=_OPERATORS,
        ),
        ScopeBlueprint(
            scope=AdapterScope.TENANT,
            label="Tenant memory",
            required_consents=_PROCESS_AND_STORE,
            opt_out_categories=(OptOutCategory.TENANT_SHARING,),
            canonical_tiers=(MemoryTier.SEMANTIC, MemoryTier.ARCHIVAL),
            admin_reviewable=True,
            requires_governance_review=True,
            # Tenant admins manage their tenant's memory; support does not read it.
            allowed_consumers=_SURFACES | {Consumer.ADMIN},
        ),
        ScopeBlueprint(
            scope=AdapterScope.ADMIN_REVIEW,
            label="Admin review",
            required_consents=_PROCESS_AND_STORE,
            # No opt-out: lawful review (a data-rights request, an incident) cannot be
            # switched off by the member; the inspection state machine governs it instead.
            opt_out_categories=(),
            canonical_tiers=(MemoryTier.ARCHIVAL,),
            admin_reviewable=True,
            requires_governance_review=True,
            allowed_consumers=_OPERATORS,
        ),
    )
}

if set(BLUEPRINTS) != set(AdapterScope):  # fail at import, not at the first request
    raise RuntimeError("every adapter scope needs a blueprint")

CONSENT_LABELS: dict[ConsentType, str] = {
    ConsentType.DATA_PROCESSING: "data processing",
    ConsentType.DATA_STORAGE: "data storage",
    ConsentType.SENSITIVE_DATA: "sensitive data",
    ConsentType.CROSS_DEVICE: "cross-device",
    ConsentType.MULTI_ACTOR_SENSITIVE: "multi-actor sensitive",
}

OPT_OUT_LABELS: dict[OptOutCategory, str] = {
    OptOutCategory.PERSONALIZATION: "personalization",
    OptOutCategory.SESSION_MEMORY: "session memory",
    OptOutCategory.LONG_TERM_MEMORY: "long-term memory",
    OptOutCategory.CROSS_DEVICE_SYNC: "cross-device sync",
    OptOutCategory.EMBODIED_MEMORY: "embodied memory",
    OptOutCategory.OPERATOR_COPILOT: "operator copilot",
    OptOutCategory.TENANT_SHARING: "tenant sharing",
}


def blueprint(scope: AdapterScope | str) -> ScopeBlueprint:
    return BLUEPRINTS[AdapterScope(scope)]


def scope_policy(
    scope: AdapterScope | str,
    *,
    active_consents: Iterable[str],
    opted_out: Iterable[str],
    consumer: str | None = None,
) -> ScopePolicy:
    """The policy of one scope for a member with these granted consents and opt-outs.

    `active_consents` is the set of consent types whose latest ledger event is a grant
    (`consent.ledger.active_granted`); `opted_out` the opt-out categories in force
    (`consent.ledger.opted_out`). `consumer` is who wants to read; `None` asks about the
    member's own view, where no allow-list applies. An unknown consumer is not allowed.
    """
    bp = blueprint(scope)
    granted = frozenset(active_consents)
    off = frozenset(opted_out)
    notes: list[str] = []

    for consent in bp.required_consents:
        if consent not in granted:
            notes.append(f"{bp.label} requires {CONSENT_LABELS[consent]} consent.")
    for category in bp.opt_out_categories:
        if category in off:
            notes.append(
                f"{bp.label} is suppressed because the member opted out of "
                f"{OPT_OUT_LABELS[category]}."
            )
    if consumer is not None and consumer not in bp.allowed_consumers:
        notes.append(f"Consumer {consumer} is not allowed to use this scope.")

    if notes:
        return ScopePolicy(bp.scope, enabled=False, mode=ScopeMode.SUPPRESSED, notes=tuple(notes))
    if ConsentType.DATA_STORAGE not in granted:
        # Only reachable for runs_without_storage scopes: the others require storage.
        note = f"{bp.label} runs ephemerally: nothing is stored without data storage consent."
        return ScopePolicy(bp.scope, enabled=True, mode=ScopeMode.EPHEMERAL, notes=(note,))
    return ScopePolicy(bp.scope, enabled=True, mode=ScopeMode.DURABLE, notes=())


def evaluate_scope_policies(
    *,
    active_consents: frozenset[str],
    opted_out: frozenset[str],
    consumer: str | None = None,
) -> dict[AdapterScope, ScopePolicy]:
    """Every adapter scope's policy, in the enum's order (spec: buildIrisScopePolicies)."""
    return {
        scope: scope_policy(
            scope, active_consents=active_consents, opted_out=opted_out, consumer=consumer
        )
        for scope in AdapterScope
    }
