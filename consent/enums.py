"""The consent and category vocabulary of Iris: every enumeration lives here once.

Memory categories sit here rather than in `memory` because consent types are derived
from them and `consent` must not import `memory` (dependencies run one way).
"""

from __future__ import annotations

from enum import StrEnum

# Surface names are the kernel's; re-exported for consent's and memory's readers.
from governance.surfaces import SURFACES  # noqa: F401


class Category(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    GOAL = "goal"
    RELATIONSHIP = "relationship"
    COMMITMENT = "commitment"
    IDENTITY = "identity"
    SPATIAL = "spatial"
    POSE_ALIGNMENT = "pose_alignment"
    BIOMETRIC = "biometric"
    SPIRITUAL = "spiritual"
    MEDICAL = "medical"
    SEXUAL = "sexual"
    FINANCIAL = "financial"
    LEGAL = "legal"
    WORK = "work"
    FAMILY = "family"
    SAFETY = "safety"
    PHYSICAL_HEALTH = "physical_health"
    MENTAL_HEALTH = "mental_health"
    SUBSTANCE_USE = "substance_use"
    SEXUALITY = "sexuality"
    GENDER_IDENTITY = "gender_identity"
    RELIGION_USER_REDACTED = "religion_user_redacted"
    ABUSE_HISTORY = "abuse_history"
    IMMIGRATION_STATUS = "immigration_status"
    FINANCIAL_DISTRESS = "financial_distress"
    RELATIONSHIP_VIOLENCE = "relationship_violence"
    LEGAL_JEOPARDY = "legal_jeopardy"
    OTHER = "other"


SENSITIVE_CATEGORIES: frozenset[Category] = frozenset(
    {
        Category.POSE_ALIGNMENT,
        Category.BIOMETRIC,
        Category.SPIRITUAL,
        Category.MEDICAL,
        Category.SEXUAL,
        Category.FINANCIAL,
        Category.LEGAL,
        Category.SAFETY,
        Category.PHYSICAL_HEALTH,
        Category.MENTAL_HEALTH,
        Category.SUBSTANCE_USE,
        Category.SEXUALITY,
        Category.GENDER_IDENTITY,
        Category.RELIGION_USER_REDACTED,
        Category.ABUSE_HISTORY,
        Category.IMMIGRATION_STATUS,
        Category.FINANCIAL_DISTRESS,
        Category.RELATIONSHIP_VIOLENCE,
        Category.LEGAL_JEOPARDY,
    }
)


def is_sensitive(category: str) -> bool:
    return category in SENSITIVE_CATEGORIES


class ConsentType(StrEnum):
    DATA_PROCESSING = "data_processing"
    DATA_STORAGE = "data_storage"
    SENSITIVE_DATA = "sensitive_data"
    CROSS_DEVICE = "cross_device"
    MULTI_ACTOR_SENSITIVE = "multi_actor_sensitive"


CATEGORY_CONSENT_PREFIX = "category:"


def category_consent_type(category: str) -> str:
    """The consent type that unlocks one sensitive category, e.g. `category:medical`."""
    return f"{CATEGORY_CONSENT_PREFIX}{Category(category).value}"


def category_of_consent_type(consent_type: str) -> Category | None:
    if consent_type.startswith(CATEGORY_CONSENT_PREFIX):
        return Category(consent_type.removeprefix(CATEGORY_CONSENT_PREFIX))
    return None


# Every consent type Iris records: the general ones plus one per sensitive category.
CONSENT_TYPES: tuple[str, ...] = tuple(t.value for t in ConsentType) + tuple(
    category_consent_type(c) for c in sorted(SENSITIVE_CATEGORIES)
)


class ConsentStatus(StrEnum):
    GRANTED = "granted"
    REVOKED = "revoked"


class OptOutStatus(StrEnum):
    OPTED_OUT = "opted-out"
    OPTED_IN = "opted-in"


class OptOutCategory(StrEnum):
    """What a member can switch off without withdrawing consent."""

    PERSONALIZATION = "personalization"
    SESSION_MEMORY = "session_memory"
    LONG_TERM_MEMORY = "long_term_memory"
    CROSS_DEVICE_SYNC = "cross_device_sync"
    EMBODIED_MEMORY = "embodied_memory"
    OPERATOR_COPILOT = "operator_copilot"
    TENANT_SHARING = "tenant_sharing"


class LegalBasis(StrEnum):
    # GDPR Article 6(1)(a)-(f)
    CONSENT = "consent"
    CONTRACT = "contract"
    LEGAL_OBLIGATION = "legal_obligation"
    VITAL_INTERESTS = "vital_interests"
    PUBLIC_TASK = "public_task"
    LEGITIMATE_INTERESTS = "legitimate_interests"
    # GDPR Article 9(2)(a): required for special-category (sensitive) data
    EXPLICIT_CONSENT = "explicit_consent"


class CaptureMethod(StrEnum):
    INLINE_PROMPT = "inline-prompt"
    SETTINGS_TOGGLE = "settings-toggle"
    DSAR_IMPORT = "dsar-import"
    OPERATOR_RECORDED = "operator-recorded"


class ConsentSource(StrEnum):
    """The `source` of a ConsentEntry on a memory (the spec's three)."""

    INLINE_PROMPT = "inline-prompt"
    SETTINGS_TOGGLE = "settings-toggle"
    DSAR_IMPORT = "dsar-import"


class AdapterScope(StrEnum):
    ASSISTANT_PROFILE = "assistant_profile"
    SESSION = "session"
    SCENE = "scene"
    POSE = "pose"
    CONVERSATION = "conversation"
    DOMAIN = "domain"
    CROSS_DOMAIN = "cross_domain"
    NOTEBOOK = "notebook"
    OPERATOR_COPILOT = "operator_copilot"
    TENANT = "tenant"
    ADMIN_REVIEW = "admin_review"


class Consumer(StrEnum):
    """Subsystems that may read memory (allowed consumers of a scope)."""

    ASSISTANT = "assistant"
    TARA = "tara"
    ARETE = "arete"
    VERITAS = "veritas"
    NYX = "nyx"
    NISABA = "nisaba"
    METIS = "metis"
    STUDIO = "studio"
    ADMIN = "admin"
    SUPPORT = "support"
