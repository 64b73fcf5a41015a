"""Demo data for `manage.py seed_demo`: a member with a handful of memories, among them a
guess to confirm or reject, a question to answer, a conversation's memory and a notebook
(so that every action of the memory pages has something to act on)."""

from __future__ import annotations

from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.selectors import active_consent_types
from consent.services import consent_record
from governance.models import Tenant, User
from governance.principal import Principal
from memory.models import MemoryEntry
from memory.services import MemoryDraft, memory_write

DEMO_MEMORIES = (
    ("preference", "I take my coffee black, no sugar"),
    ("fact", "I live in Lisbon"),
    ("goal", "I am training for a half marathon in the spring"),
    ("work", "I work as a bakery manager"),
    ("family", "My sister Ana lives in Porto"),
)


# (scope kind, extra identifiers, category, body, origin): written after DEMO_MEMORIES.
DEMO_EXTRAS: tuple[tuple[str, dict[str, str], str, str, str], ...] = (
    ("profile", {}, "preference", "You seem to enjoy jazz in the evenings", "model-inferred"),
    (
        "session",
        {"sessionId": "demo-chat"},
        "goal",
        "We talked about a trip to Rome",
        "user-stated",
    ),
    ("notebook", {"notebookId": "travel"}, "goal", "Visit Kyoto in the autumn", "user-stated"),
    ("profile", {}, "preference", "My favourite colour is blue", "user-stated"),
    # Same fact, other value: Iris asks the member which one stands.
    ("profile", {}, "preference", "My favourite colour is green", "user-stated"),
)


def seed(*, tenant: Tenant, member: User) -> int:
    """Grant the consents durable profile memory needs and write the demo memories once.

    The consents are recorded by Iris itself (system, an import), not as the member's own
    act on the consent page: the member never pressed those buttons, and their history
    says so.
    """
    principal = Principal(kind="member", id=member.public_id, tenant_id=tenant.id)
    seeder = Principal.system("seed_demo", tenant.id)
    granted = active_consent_types(tenant_id=tenant.id, member=member)
    for consent_type in (ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE):
        if consent_type not in granted:
            consent_record(
                principal=seeder,
                member=member,
                consent_type=consent_type,
                status="granted",
                legal_basis=LegalBasis.CONSENT,
                capture_method=CaptureMethod.DSAR_IMPORT,
            )
    if MemoryEntry.objects.filter(tenant=tenant, member=member).exists():
        return 0
    for category, body in DEMO_MEMORIES:
        memory_write(
            principal=principal,
            member=member,
            draft=MemoryDraft(
                scope_kind="profile",
                scope_identifiers={"userId": str(member.public_id)},
                category=category,
                body=body,
                origin="user-stated",
            ),
        )
    for kind, extra, category, body, origin in DEMO_EXTRAS:
        memory_write(
            principal=principal,
            member=member,
            draft=MemoryDraft(
                scope_kind=kind,
                scope_identifiers={"userId": str(member.public_id), **extra},
                category=category,
                body=body,
                origin=origin,
            ),
        )
    return len(DEMO_MEMORIES) + len(DEMO_EXTRAS)
