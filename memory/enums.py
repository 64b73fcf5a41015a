"""The memory vocabulary of Iris (spec: "The MemoryEntry Contract"). Each enumeration lives
here once; categories and adapter scopes live in `consent.enums` (consent derives from them).
"""

from __future__ import annotations

from enum import StrEnum

from consent.enums import AdapterScope


class ScopeKind(StrEnum):
    PROFILE = "profile"
    SESSION = "session"
    NOTEBOOK = "notebook"
    OPERATOR_COPILOT = "operator-copilot"
    TENANT = "tenant"
    SCENE = "scene"
    POSE = "pose"
    CRISIS = "crisis"


# Exactly the identifiers each canonical scope needs, in scope-key order.
SCOPE_IDENTIFIERS: dict[ScopeKind, tuple[str, ...]] = {
    ScopeKind.PROFILE: ("userId",),
    ScopeKind.SESSION: ("userId", "sessionId"),
    ScopeKind.NOTEBOOK: ("userId", "notebookId"),
    ScopeKind.OPERATOR_COPILOT: ("tenantId", "operatorId", "userId"),
    ScopeKind.TENANT: ("tenantId", "userId"),
    ScopeKind.SCENE: ("userId", "sessionId", "sceneId"),
    ScopeKind.POSE: ("userId", "sessionId", "sceneId", "poseId"),
    ScopeKind.CRISIS: ("userId", "sessionId"),
}


# The adapter's policy-and-retention scopes mapped onto the canonical storage kinds.
ADAPTER_TO_CANONICAL: dict[AdapterScope, ScopeKind] = {
    AdapterScope.ASSISTANT_PROFILE: ScopeKind.PROFILE,
    AdapterScope.SESSION: ScopeKind.SESSION,
    AdapterScope.SCENE: ScopeKind.SCENE,
    AdapterScope.POSE: ScopeKind.POSE,
    AdapterScope.CONVERSATION: ScopeKind.SESSION,
    AdapterScope.DOMAIN: ScopeKind.PROFILE,
    AdapterScope.CROSS_DOMAIN: ScopeKind.PROFILE,
    AdapterScope.NOTEBOOK: ScopeKind.NOTEBOOK,
    AdapterScope.OPERATOR_COPILOT: ScopeKind.OPERATOR_COPILOT,
    AdapterScope.TENANT: ScopeKind.TENANT,
    AdapterScope.ADMIN_REVIEW: ScopeKind.PROFILE,
}

# The adapter scope a canonical kind is governed by when a write names only the kind.
CANONICAL_DEFAULT_ADAPTER: dict[ScopeKind, AdapterScope] = {
    ScopeKind.PROFILE: AdapterScope.ASSISTANT_PROFILE,
    ScopeKind.SESSION: AdapterScope.SESSION,
    ScopeKind.NOTEBOOK: AdapterScope.NOTEBOOK,
    ScopeKind.OPERATOR_COPILOT: AdapterScope.OPERATOR_COPILOT,
    ScopeKind.TENANT: AdapterScope.TENANT,
    ScopeKind.SCENE: AdapterScope.SCENE,
    ScopeKind.POSE: AdapterScope.POSE,
    ScopeKind.CRISIS: AdapterScope.SESSION,
}


class Origin(StrEnum):
    USER_STATED = "user-stated"
    USER_CONFIRMED = "user-confirmed"
    MODEL_INFERRED = "model-inferred"
    OPERATOR_COPILOT = "operator-copilot"
    SUMMARIZED_FROM_SESSION = "summarized-from-session"
    IMPORTED = "imported"


class Lifecycle(StrEnum):
    DRAFT = "draft"
    ACTIVE = "active"
    PAUSED = "paused"
    SUPERSEDED = "superseded"
    TOMBSTONED = "tombstoned"


class SuppressionReason(StrEnum):
    CRISIS_FRAME = "crisis-frame"
    USER_PAUSE = "user-pause"
    SENSITIVE_CATEGORY = "sensitive-category"
    TENANT_QUARANTINE = "tenant-quarantine"


class ProvenanceKind(StrEnum):
    SESSION_TURN = "session-turn"
    SESSION_SUMMARY = "session-summary"
    PROFILE_PROMOTION = "profile-promotion"
    MANUAL_IMPORT = "manual-import"
    INFERENCE_BATCH = "inference-batch"
    NOTEBOOK_ATTACHMENT = "notebook-attachment"
    SCENE_EVENT = "scene-event"
    POSE_SAMPLE = "pose-sample"


class RecallSurface(StrEnum):
    """Who a recall answer is for; budgets and rationale visibility key on it."""

    ASSISTANT = "assistant"
    SHELL = "shell"
    NOTEBOOK = "notebook"
    ADMIN = "admin"
