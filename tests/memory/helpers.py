"""Shared helpers for the memory database and API tests: principals, consents, drafts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from consent import ledger
from consent.enums import CaptureMethod, ConsentType, LegalBasis, category_consent_type
from consent.services import consent_record
from governance.models import AuditEvent, User
from governance.principal import Principal
from memory.models import MemoryEntry
from memory.services import ActorMention, MemoryDraft

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def as_member(member: User) -> Principal:
    return Principal(kind="member", id=member.public_id, tenant_id=member.tenant_id)


def as_surface(member: User, surface: str = "assistant") -> Principal:
    return Principal(kind="surface", id="surface-test", tenant_id=member.tenant_id, surface=surface)


def as_system(member: User) -> Principal:
    return Principal.system("memory-tests", member.tenant_id)


def grant(member: User, *consent_types: str, status: str = "granted") -> None:
    for consent_type in consent_types:
        consent_record(
            principal=as_member(member),
            member=member,
            consent_type=consent_type,
            status=status,
            legal_basis=LegalBasis.EXPLICIT_CONSENT
            if consent_type in ledger.SENSITIVE_CONSENT_TYPES
            else LegalBasis.CONSENT,
            capture_method=CaptureMethod.SETTINGS_TOGGLE,
        )


def grant_storage(member: User) -> None:
    """What durable memory needs for most scopes: processing and storage consent."""
    grant(member, ConsentType.DATA_PROCESSING, ConsentType.DATA_STORAGE)


def grant_category(member: User, category: str) -> None:
    grant(member, category_consent_type(category))


def scope_of(member: User, kind: str = "profile", **identifiers: str) -> dict[str, str]:
    ids = {"userId": str(member.public_id), **identifiers}
    if kind in {"tenant", "operator-copilot"}:
        ids.setdefault("tenantId", str(member.tenant_id))
    return ids


def draft(
    member: User,
    body: str = "My favourite colour is blue",
    *,
    kind: str = "profile",
    category: str = "preference",
    origin: str = "user-stated",
    identifiers: dict[str, str] | None = None,
    **extra: Any,
) -> MemoryDraft:
    return MemoryDraft(
        scope_kind=kind,
        scope_identifiers=identifiers if identifiers is not None else scope_of(member, kind),
        category=category,
        body=body,
        origin=origin,
        **extra,
    )


def mention(name: str, note: str = "my sister", sensitive: bool = False) -> ActorMention:
    return ActorMention(relationship_note=note, sensitive_interaction=sensitive, actor_name=name)


def payload(member: User | None, **overrides: Any) -> dict[str, Any]:
    """A wire write body (profile scope, a preference, stated by the member)."""
    assert member is not None
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scope": {"kind": "profile", "userId": str(member.public_id)},
        "category": "preference",
        "body": "My favourite colour is blue",
        "origin": "user-stated",
    }
    body.update(overrides)
    return body


def memory_audits(prefix: str = "iris.memory.") -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action__startswith=prefix).order_by("seq"))


def memory_actions(prefix: str = "iris.memory.") -> list[str]:
    return [e.action for e in memory_audits(prefix)]


def current(entry_id: Any) -> MemoryEntry:
    return MemoryEntry.objects.get(entry_id=entry_id, is_current=True)


def counts() -> tuple[int, int]:
    """(memory rows, audit events): what "nothing was written" compares."""
    return MemoryEntry.objects.count(), AuditEvent.objects.count()
