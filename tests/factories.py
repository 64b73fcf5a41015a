"""The tests' shared builders: principals, consents, drafts, memory writes, wire bodies,
and the recall pipeline's plain inputs (a request, a candidate).

Plain functions, not fixtures, so property tests and helpers call them as well as tests
do; they hold no state, so every pytest-xdist worker has its own copy and nothing leaks
between tests. The personas (and `ready`, a member ready to write) are fixtures in
tests/conftest.py, since they need the database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from consent import ledger
from consent.enums import (
    CaptureMethod,
    Category,
    ConsentType,
    LegalBasis,
    category_consent_type,
)
from consent.services import consent_record
from governance.models import AuditEvent, User
from governance.principal import Principal
from memory.enums import Lifecycle, Origin, ProvenanceKind, RecallSurface, ScopeKind
from memory.models import MemoryEntry
from memory.recall.pipeline import Candidate, ProvenanceLink, RecallRequest
from memory.services import ActorMention, MemoryDraft, WriteOutcome, memory_write
from tests.log_guard import plant

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
    plant(body)
    return MemoryDraft(
        scope_kind=kind,
        scope_identifiers=identifiers if identifiers is not None else scope_of(member, kind),
        category=category,
        body=body,
        origin=origin,
        **extra,
    )


def write(
    member: User,
    body: str = "My favourite colour is blue",
    *,
    principal: Principal | None = None,
    now: datetime | None = None,
    **draft_fields: Any,
) -> WriteOutcome:
    """One memory write (by the member unless `principal` says otherwise), as `draft` builds
    it; the outcome, whatever it was."""
    return memory_write(
        principal=principal or as_member(member),
        member=member,
        draft=draft(member, body, **draft_fields),
        now=now,
    )


def written(member: User, body: str = "My favourite colour is blue", **fields: Any) -> MemoryEntry:
    """`write` that must have stored a revision; the revision."""
    outcome = write(member, body, **fields)
    assert outcome.written, outcome.reason
    assert outcome.entry is not None
    return outcome.entry


def summary_of(member: User, source: MemoryEntry, body: str = "Summary: rides a red Brompton"):
    """A session summary that quotes `source` (its provenance names the source's revision)."""
    from memory.services import ProvenanceRef

    return written(
        member,
        body,
        origin="summarized-from-session",
        subject="weekly summary",
        provenance_chain=[
            ProvenanceRef("session-summary", str(source.revision_id), source.created_at)
        ],
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
    if isinstance(body.get("body"), str):
        plant(body["body"])
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


# -- recall pipeline inputs (plain values, no database) -------------------------------------

RECALL_TENANT = "t-1"
RECALL_MEMBER = "u-1"


def recall_request(*, now: datetime = NOW, **fields: Any) -> RecallRequest:
    """A request in the member's first session, for "coffee", in a general context."""
    values: dict[str, Any] = {
        "tenant_id": RECALL_TENANT,
        "user_id": RECALL_MEMBER,
        "scope_kind": ScopeKind.SESSION,
        "scope_key": f"session:{RECALL_MEMBER}:s-1",
        "query": "coffee",
        "surface": RecallSurface.ASSISTANT,
        "context": "general",
        "crisis_frame": False,
        "safety_critical_context": False,
        "consented_categories": frozenset(),
        "multi_actor_sensitive_consent": False,
        "dsar_fulfillment": False,
        "limit": None,
        "now": now,
    }
    values.update(fields)
    return RecallRequest(**values)


def recall_candidate(entry_id: str = "e-1", *, now: datetime = NOW, **fields: Any) -> Candidate:
    """An active profile preference the member stated ten days before `now`, last changed
    the day before."""
    values: dict[str, Any] = {
        "entry_id": entry_id,
        "tenant_id": RECALL_TENANT,
        "user_id": RECALL_MEMBER,
        "scope_kind": ScopeKind.PROFILE,
        "scope_key": f"profile:{RECALL_MEMBER}",
        "category": Category.PREFERENCE,
        "body": "likes coffee in the morning",
        "subject": None,
        "origin": Origin.USER_STATED,
        "lifecycle": Lifecycle.ACTIVE,
        "suppression": None,
        "multi_actor": None,
        "provenance_chain": (
            ProvenanceLink(ProvenanceKind.SESSION_TURN, "turn-1", now - timedelta(days=1)),
        ),
        "reference_count": 0,
        "last_referenced_at": None,
        "created_at": now - timedelta(days=10),
        "updated_at": now - timedelta(days=1),
        "revision": 1,
        "external": False,
    }
    values.update(fields)
    return Candidate(**values)
