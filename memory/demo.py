"""Demo data for `manage.py seed_demo`: a member with a handful of memories."""

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
    return len(DEMO_MEMORIES)
