"""Memory use cases: the only code that writes memory rows.

Each public function is keyword-only, takes the acting principal, validates its input
(nothing is written for bad input), asks the governance kernel (`govern`, outside the
transaction so a refusal stays on record), then opens one durable transaction in which it
writes the revision rows and their audit events. The rules themselves live in the pure
modules: scopes, conflicts, promotion, masking.

Revisions are immutable (DESIGN invariant 2): a change inserts a new revision and flips
its predecessor to `superseded`, which is the only update an old revision ever gets.
`tombstoned` is terminal. Audit events carry ids, revision numbers, codes and keyed
SHA-256 fingerprints; never a body, a note or a name. Like the consent ledger, they do not
name a sensitive category either (that a member has health memory is health data).

Callers resolve `member` first (`governance.selectors.member_for`), so every function
here works inside one tenant and one member.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from consent.enums import (
    SURFACES,
    AdapterScope,
    Category,
    ConsentType,
    category_consent_type,
    is_sensitive,
)
from consent.policy import ScopeMode, blueprint
from consent.selectors import consent_overview
from governance import keys, plainsql
from governance.audit import audit_record, one_insert
from governance.effects import run_destructive
from governance.errors import Conflict, NotFound, ValidationFailed
from governance.idempotency import forget_subject
from governance.models import User
from governance.pipeline import (
    Check,
    Decision,
    Effect,
    Hook,
    Operation,
    Verdict,
    govern,
    record_pending,
)
from governance.principal import Principal
from governance.runs import content_fingerprint, runs_forget_content
from memory import controls, screening, selectors
from memory.enums import (
    ADAPTER_TO_CANONICAL,
    CANONICAL_DEFAULT_ADAPTER,
    SCOPE_IDENTIFIERS,
    Lifecycle,
    Origin,
    ProvenanceKind,
    ScopeKind,
    SuppressionReason,
)
from memory.models import (
    BODY_MAX_LENGTH,
    SESSION_ID_MAX_LENGTH,
    SUBJECT_MAX_LENGTH,
    SUPPRESSION_NOTES_MAX_LENGTH,
    ActorHandle,
    ActorNamespace,
    ForgottenValue,
    InferenceObservation,
    MemoryEntry,
    OffTheRecord,
    PendingConflict,
)
from memory.recall.pipeline import rfc3339
from memory.rules.conflicts import (
    Authority,
    ConflictResolution,
    ConflictSide,
    authority_of,
    conflict_key,
    derive_subject,
    normalise_subject,
    resolve_conflict,
    same_value,
)
from memory.rules.masking import (
    MultiActorRuleError,
    actor_handle,
    normalise_actor_name,
    validate_actor_handle,
    validate_relationship_note,
)
from memory.rules.promotion import (
    PromotionDecision,
    PromotionReason,
    count_distinct_sessions,
    evaluate_promotion,
    promoted_origin,
)
from memory.rules.scopes import ScopeRuleError, check_scope_change, validate_scope
from memory.selectors import conflict_fingerprint as _conflict_fingerprint
from memory.selectors import text_fingerprint, value_fingerprint

POLICY_ID = "iris-memory-v1"
# How long a conflict question waits for the member before the proposal is dropped.
CONFLICT_TTL = timedelta(days=7)
IDENTIFIER_MAX_LENGTH = 128
PROVENANCE_REF_MAX_LENGTH = 200
PROVENANCE_MAX_LINKS = 50
ACTOR_NAME_MAX_LENGTH = 200

# The member's own word (stated or confirmed), as the conflict ladder weighs origins.
MEMBER_WORD_ORIGINS = frozenset(
    o for o in Origin if authority_of(o) in (Authority.EXPLICIT, Authority.CONFIRMED)
)
# Derived text (inference, summary, import): such a write never re-creates a value the
# member forgot or refused (DESIGN invariant 2).
REPLAYED_ORIGINS = frozenset(o for o in Origin if authority_of(o) is Authority.INFERRED)


CONFLICT_ANSWERS: tuple[str, ...] = ("update", "keep")


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ActorMention:
    """A person the memory mentions. Send the name (never stored: it becomes a handle in
    the member's namespace) or a handle the namespace already holds, not both."""

    relationship_note: str = ""
    sensitive_interaction: bool = False
    actor_name: str | None = None
    actor_handle: str | None = None


@dataclass(frozen=True)
class SuppressionMarker:
    reason: str
    started_at: datetime
    ends_at: datetime | None = None
    notes: str = ""


@dataclass(frozen=True)
class ProvenanceRef:
    kind: str
    ref: str
    captured_at: datetime


@dataclass(frozen=True)
class MemoryDraft:
    """What a surface or a page asks Iris to remember (the write half of the contract).

    `adapter_scope` picks the policy-and-retention scope; it defaults to the kind's
    default adapter scope and must map onto `scope_kind`. `session_id` is the session the
    write came from (defaults to the scope's `sessionId`): off-the-record and inference
    counting key on it. `subject` defaults to `derive_subject(body)`.
    """

    scope_kind: str
    scope_identifiers: Mapping[str, Any]
    category: str
    body: str
    origin: str
    subject: str | None = None
    adapter_scope: str | None = None
    session_id: str | None = None
    multi_actor: ActorMention | None = None
    suppression: SuppressionMarker | None = None
    provenance_chain: Sequence[ProvenanceRef] = ()


@dataclass(frozen=True)
class Correction:
    """A member's correction; `None` leaves a field as it is."""

    body: str | None = None
    subject: str | None = None
    category: str | None = None
    relationship_note: str | None = None
    sensitive_interaction: bool | None = None


# ---------------------------------------------------------------------------- outcomes

WriteStatus = Literal["written", "conflict", "not-written"]


@dataclass(frozen=True)
class WriteOutcome:
    """What a write did. `written`: `entry` is the new current revision. `conflict`: the
    member must answer `conflict` first (HTTP 409). `not-written`: nothing was stored, for
    `reason`; `entry` is the stored memory the write met, if any."""

    status: WriteStatus
    reason: str
    entry: MemoryEntry | None = None
    conflict: PendingConflict | None = None
    question: str | None = None
    notes: tuple[str, ...] = ()
    promotion: PromotionDecision | None = None
    distinct_sessions: int | None = None

    @property
    def written(self) -> bool:
        return self.status == "written"


@dataclass(frozen=True)
class HardDeleteResult:
    entry_ids: tuple[uuid.UUID, ...]
    revision_count: int
    remaining: bool  # more entries matched than `limit` allowed; call again

    @property
    def counts(self) -> dict[str, int]:
        """What the side-effect ledger records for the call."""
        return {"entries": len(self.entry_ids), "revisions": self.revision_count}


@dataclass(frozen=True)
class ActorsForgetResult:
    actor_handle: str
    entry_ids: tuple[uuid.UUID, ...]
    handle_removed: bool

    @property
    def counts(self) -> dict[str, int]:
        return {"entries": len(self.entry_ids), "handles": int(self.handle_removed)}


# --------------------------------------------------------------------- the write gate


@dataclass(frozen=True)
class WriteGate:
    """The facts the memory write gate decides on, computed once per write."""

    adapter_scope: AdapterScope
    scope_enabled: bool
    scope_mode: str
    scope_notes: tuple[str, ...]
    consumer_allowed: bool
    sensitive: bool
    sensitive_consent: bool

    def as_attributes(self) -> dict[str, Any]:
        return {
            "adapterScope": self.adapter_scope.value,
            "scopeEnabled": self.scope_enabled,
            "scopeMode": self.scope_mode,
            "scopeNotes": list(self.scope_notes),
            "consumerAllowed": self.consumer_allowed,
            "sensitive": self.sensitive,
            "sensitiveConsent": self.sensitive_consent,
        }


class MemoryWriteGate(Check):
    """Spec: scope enabled for this member, allowed consumer, then the sensitive-category
    storage gate. Registered by `memory.apps`; decides only operations that carry a
    `memoryGate` attribute (built by the services below)."""

    name = "memory-write-gate"
    priority = 20
    hooks: ClassVar[frozenset[Hook]] = frozenset({Hook.PRE_WRITE})

    def evaluate(self, hook: Hook, op: Operation) -> Decision | None:
        gate = op.attributes.get("memoryGate")
        if gate is None:
            return None
        if not gate["scopeEnabled"]:
            detail = " ".join(gate["scopeNotes"]) or "This memory scope is switched off."
            return Decision(
                self.name,
                Verdict.DENY,
                "scope-suppressed",
                detail,
                extra={"notes": list(gate["scopeNotes"])},
            )
        if not gate["consumerAllowed"]:
            return Decision(
                self.name,
                Verdict.DENY,
                "consumer-not-allowed",
                "This surface is not allowed to use this memory scope.",
            )
        if gate["sensitive"] and not gate["sensitiveConsent"]:
            return Decision(
                self.name,
                Verdict.DENY,
                "sensitive-category-without-consent",
                "Sensitive memory needs the member's explicit, current consent for it.",
            )
        return None


def _consumer_allowed(principal: Principal, adapter: AdapterScope) -> bool:
    allowed = blueprint(adapter).allowed_consumers
    if principal.kind == "surface":
        return principal.surface in allowed
    if principal.kind == "member":
        # A member writes through the product: any scope a product surface may use.
        return any(surface in allowed for surface in SURFACES)
    return principal.kind == "system"


@dataclass(frozen=True)
class _ConsentView:
    granted: frozenset[str]
    entries: tuple[dict[str, Any], ...]


def _consents(member: User) -> tuple[_ConsentView, Any]:
    overview = consent_overview(tenant_id=member.tenant_id, member=member)
    view = _ConsentView(
        granted=frozenset(overview.granted),
        entries=tuple(entry.as_contract() for entry in overview.entries),
    )
    return view, overview.scopes


def _gate(
    *,
    principal: Principal,
    member: User,
    adapter: AdapterScope,
    category: str,
    sensitive_interaction: bool,
) -> tuple[WriteGate, _ConsentView]:
    consents, policies = _consents(member)
    policy = policies[adapter]
    sensitive = is_sensitive(category) or sensitive_interaction
    consented = True
    if is_sensitive(category) and category_consent_type(category) not in consents.granted:
        consented = False
    if sensitive_interaction and ConsentType.MULTI_ACTOR_SENSITIVE not in consents.granted:
        consented = False
    gate = WriteGate(
        adapter_scope=adapter,
        scope_enabled=policy.enabled,
        scope_mode=str(policy.mode),
        scope_notes=tuple(policy.notes),
        consumer_allowed=_consumer_allowed(principal, adapter),
        sensitive=sensitive,
        sensitive_consent=consented,
    )
    return gate, consents


def _snapshot(consents: _ConsentView, category: str) -> list[dict[str, Any]]:
    """The ConsentEntry list a revision carries: the consent its category stands on."""
    return [dict(entry) for entry in consents.entries if entry["category"] == category]


# What a caller may pass on to the governance kernel about the call itself (not about the
# memory): the surface's run, an approval being claimed, whether the lane can wait, and the
# ledger row of a crashed call being completed (see governance.approvals / effects / runs).
GOVERNANCE_CONTEXT_KEYS = frozenset({"run_id", "approval_id", "can_pause", "side_effect_id"})


def _govern(
    hook: Hook,
    *,
    name: str,
    effect: Effect,
    principal: Principal,
    member: User,
    context: Mapping[str, Any] | None,
    subject_ids: Iterable[Any] = (),
    arguments: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
    text: str | None = None,
    texts: Mapping[str, str] | None = None,
    pending: list[dict[str, Any]] | None = None,
) -> Operation:
    """Ask the kernel (outside any transaction); returns the allowed operation. With
    `pending`, an allow is queued there for `record_pending` in the caller's transaction.

    `arguments` are what the call needs to be issued again (ids and codes only): with
    `subject_ids` they make its fingerprint for approvals, the ledger and loop detection.
    """
    merged = {k: v for k, v in (context or {}).items() if k in GOVERNANCE_CONTEXT_KEYS}
    merged.update(attributes or {})
    if arguments is not None:
        merged["arguments"] = dict(arguments)
    op = Operation(
        name=name,
        effect=effect,
        principal=principal,
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        subject_ids=tuple(str(s) for s in subject_ids),
        attributes=merged,
        text=text,
        texts=texts or {},
    )
    govern(hook, op, pending=pending)
    return op


# -------------------------------------------------------------------------- validation


def _invalid(
    field_name: str, rule: str, detail: str, allowed: Iterable[str] | None = None
) -> ValidationFailed:
    return ValidationFailed(detail, field=field_name, rule=rule, allowed=allowed)


def _enum(value: Any, enum: Any, field_name: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = [member.value for member in enum]
        raise _invalid(
            field_name, "invalid_choice", f"{field_name} is not an allowed value.", allowed
        ) from None


def _body(value: Any, field_name: str = "body") -> str:
    if not isinstance(value, str):
        raise _invalid(field_name, "invalid", f"{field_name} must be text.")
    body = value.strip()
    if not body:
        raise _invalid(field_name, "blank", f"{field_name} must not be empty.")
    if len(body) > BODY_MAX_LENGTH:
        raise _invalid(
            field_name, "max_length", f"{field_name} must be at most {BODY_MAX_LENGTH} characters."
        )
    return body


def _subject(value: str | None, body: str) -> str:
    if value is None:
        return derive_subject(body)
    if not isinstance(value, str):
        raise _invalid("subject", "invalid", "subject must be text.")
    subject = normalise_subject(value)
    if len(subject) > SUBJECT_MAX_LENGTH:
        raise _invalid(
            "subject", "max_length", f"subject must be at most {SUBJECT_MAX_LENGTH} characters."
        )
    return subject or derive_subject(body)


def _session_id(value: Any, field_name: str = "sessionId") -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise _invalid(field_name, "blank", f"{field_name} must be a non-empty id.")
    if len(value) > SESSION_ID_MAX_LENGTH:
        raise _invalid(
            field_name,
            "max_length",
            f"{field_name} must be at most {SESSION_ID_MAX_LENGTH} characters.",
        )
    return value


def _validated_scope(
    member: User, kind: Any, identifiers: Mapping[str, Any]
) -> tuple[ScopeKind, dict[str, str], str]:
    """The scope kind, its identifiers (ids canonical) and its key, or ValidationFailed.

    The identifiers must be exactly the kind's (`memory.rules.scopes.validate_scope`); `userId`
    must be this member and `tenantId` the member's tenant; `operatorId` must name an
    operator of the tenant.
    """
    try:
        scope_kind = validate_scope(kind, identifiers)
    except ScopeRuleError as exc:
        allowed = [k.value for k in ScopeKind] if exc.field == "kind" else None
        rule = "invalid_choice" if exc.rule == "unknown-kind" else exc.rule
        raise _invalid(
            f"scope.{exc.field}", rule, f"scope.{exc.field}: {exc.rule}", allowed
        ) from None
    clean: dict[str, str] = {}
    for name, value in identifiers.items():
        if len(value) > IDENTIFIER_MAX_LENGTH:
            raise _invalid(
                f"scope.{name}",
                "max_length",
                f"scope.{name} is longer than {IDENTIFIER_MAX_LENGTH}.",
            )
        clean[name] = value
    if not _same_uuid(clean["userId"], member.public_id):
        raise _invalid("scope.userId", "must-be-userId", "scope.userId must be the member.")
    clean["userId"] = str(member.public_id)
    if "tenantId" in clean:
        if not _same_uuid(clean["tenantId"], member.tenant_id):
            raise _invalid(
                "scope.tenantId",
                "must-be-own-tenant",
                "scope.tenantId must be the member's tenant.",
            )
        clean["tenantId"] = str(member.tenant_id)
    if "operatorId" in clean:
        operator = _uuid_or_none(clean["operatorId"])
        if (
            operator is None
            or not User.objects.filter(
                tenant_id=member.tenant_id, public_id=operator, kind=User.Kind.OPERATOR
            ).exists()
        ):
            raise _invalid(
                "scope.operatorId", "unknown-operator", "scope.operatorId is not an operator here."
            )
        clean["operatorId"] = str(operator)
    key = ":".join([scope_kind.value, *(clean[name] for name in _identifier_order(scope_kind))])
    return scope_kind, clean, key


def _identifier_order(kind: ScopeKind) -> tuple[str, ...]:
    return SCOPE_IDENTIFIERS[kind]


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _same_uuid(value: Any, expected: uuid.UUID) -> bool:
    return _uuid_or_none(value) == expected


def _aware(value: Any, field_name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise _invalid(field_name, "timezone-required", f"{field_name} must carry a UTC offset.")
    return value


def _provenance(links: Sequence[ProvenanceRef]) -> list[dict[str, str]]:
    if len(links) > PROVENANCE_MAX_LINKS:
        raise _invalid(
            "provenanceChain", "max_length", f"At most {PROVENANCE_MAX_LINKS} provenance links."
        )
    chain = []
    for index, link in enumerate(links):
        prefix = f"provenanceChain[{index}]"
        kind = _enum(link.kind, ProvenanceKind, f"{prefix}.kind")
        if not isinstance(link.ref, str) or not link.ref.strip():
            raise _invalid(f"{prefix}.ref", "blank", "A provenance link needs a ref.")
        if len(link.ref) > PROVENANCE_REF_MAX_LENGTH:
            raise _invalid(f"{prefix}.ref", "max_length", "The provenance ref is too long.")
        captured = _aware(link.captured_at, f"{prefix}.capturedAt")
        chain.append({"kind": kind.value, "ref": link.ref, "capturedAt": rfc3339(captured)})
    return chain


def _suppression(marker: SuppressionMarker | None) -> dict[str, Any]:
    if marker is None:
        return _NO_SUPPRESSION
    reason = _enum(marker.reason, SuppressionReason, "suppression.reason")
    if reason is SuppressionReason.USER_PAUSE:
        # A pause is the member's act with its own audit event: POST memories/{id}/pause.
        raise _invalid(
            "suppression.reason",
            "set-by-pause-only",
            "user-pause is set by pausing a memory, not by a write.",
            [r.value for r in SuppressionReason if r is not SuppressionReason.USER_PAUSE],
        )
    started = _aware(marker.started_at, "suppression.startedAt")
    ends = None if marker.ends_at is None else _aware(marker.ends_at, "suppression.endsAt")
    if ends is not None and ends < started:
        raise _invalid("suppression.endsAt", "before-start", "endsAt is before startedAt.")
    notes = marker.notes or ""
    if len(notes) > SUPPRESSION_NOTES_MAX_LENGTH:
        raise _invalid(
            "suppression.notes",
            "max_length",
            f"suppression.notes must be at most {SUPPRESSION_NOTES_MAX_LENGTH} characters.",
        )
    return {
        "suppression_reason": reason.value,
        "suppression_started_at": started,
        "suppression_ends_at": ends,
        "suppression_notes": notes,
    }


_NO_SUPPRESSION: dict[str, Any] = {
    "suppression_reason": None,
    "suppression_started_at": None,
    "suppression_ends_at": None,
    "suppression_notes": "",
}


def _mention(mention: ActorMention | None) -> ActorMention | None:
    if mention is None:
        return None
    try:
        validate_relationship_note(mention.relationship_note or "")
    except MultiActorRuleError as exc:
        raise _invalid(
            f"multiActor.{exc.field}", "max_length", "relationshipNote is at most 500 characters."
        ) from None
    has_name = mention.actor_name is not None
    has_handle = mention.actor_handle is not None
    if has_name == has_handle:
        raise _invalid(
            "multiActor.actorName",
            "one-of-actorName-actorHandle",
            "Send exactly one of multiActor.actorName and multiActor.actorHandle.",
        )
    if has_name:
        name = mention.actor_name or ""
        if len(name) > ACTOR_NAME_MAX_LENGTH or not normalise_actor_name(name):
            raise _invalid("multiActor.actorName", "invalid", "multiActor.actorName is not usable.")
    else:
        try:
            validate_actor_handle(mention.actor_handle or "")
        except MultiActorRuleError:
            raise _invalid(
                "multiActor.actorHandle", "malformed", "multiActor.actorHandle is malformed."
            ) from None
    return mention


@dataclass(frozen=True)
class _Write:
    """A validated draft: every field checked, ids canonical; the handle not yet resolved."""

    scope_kind: ScopeKind
    scope_identifiers: dict[str, str]
    scope_key: str
    adapter_scope: AdapterScope
    category: Category
    body: str
    subject: str
    origin: Origin
    session_id: str
    mention: ActorMention | None
    suppression: dict[str, Any]
    provenance: list[dict[str, str]]


def _validate(member: User, draft: MemoryDraft) -> _Write:
    scope_kind, identifiers, key = _validated_scope(
        member, draft.scope_kind, draft.scope_identifiers
    )
    if draft.adapter_scope is None:
        adapter = CANONICAL_DEFAULT_ADAPTER[scope_kind]
    else:
        adapter = _enum(draft.adapter_scope, AdapterScope, "adapterScope")
        if ADAPTER_TO_CANONICAL[adapter] is not scope_kind:
            raise _invalid(
                "adapterScope",
                "does-not-map-to-scope-kind",
                "adapterScope does not map onto the scope's kind.",
                [a.value for a, k in ADAPTER_TO_CANONICAL.items() if k is scope_kind],
            )
    category = _enum(draft.category, Category, "category")
    origin = _enum(draft.origin, Origin, "origin")
    body = _body(draft.body)
    session = _session_id(draft.session_id) or identifiers.get("sessionId", "")
    return _Write(
        scope_kind=scope_kind,
        scope_identifiers=identifiers,
        scope_key=key,
        adapter_scope=adapter,
        category=category,
        body=body,
        subject=_subject(draft.subject, body),
        origin=origin,
        session_id=session,
        mention=_mention(draft.multi_actor),
        suppression=_suppression(draft.suppression),
        provenance=_provenance(draft.provenance_chain),
    )


# --------------------------------------------------------------------- shared helpers


def _audited_category(category: str) -> str:
    """The category as the audit may name it: sensitive ones are only "sensitive"."""
    return "sensitive" if is_sensitive(category) else category


def _revision_payload(entry: MemoryEntry, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "entryId": str(entry.entry_id),
        "revisionId": str(entry.revision_id),
        "revision": entry.revision,
        "supersedes": str(entry.supersedes) if entry.supersedes else None,
        "category": _audited_category(entry.category),
        "scopeKind": entry.scope_kind,
        "adapterScope": entry.adapter_scope,
        "origin": entry.origin,
        "lifecycle": entry.lifecycle,
        "bodyFingerprint": entry.body_fingerprint,
        "multiActor": entry.actor_handle is not None,
        "sensitiveInteraction": entry.sensitive_interaction,
    }
    payload.update(extra)
    return payload


def _audit(
    principal: Principal,
    member: User,
    action: str,
    *,
    subject_ids: Iterable[Any] = (),
    reason_code: str = "",
    payload: Mapping[str, Any] | None = None,
    severity: str = "info",
) -> None:
    audit_record(
        actor=principal.actor,
        action=action,
        tenant_id=member.tenant_id,
        policy_id=POLICY_ID,
        severity=severity,
        reason_code=reason_code,
        subject_ids=[member.public_id, *subject_ids],
        payload=payload,
    )


def _lock_member(member: User) -> None:
    """Serialise one member's memory writers, so that two writes of the same fact cannot
    both see "nothing stored yet" (PostgreSQL row lock; SQLite serialises writers)."""
    if not transaction.get_connection().features.has_select_for_update:
        return
    with plainsql.cursor() as cursor:
        cursor.execute(_LOCK_MEMBER_SQL, [member.pk])
        if cursor.fetchone() is None:
            raise NotFound("No such member.")


_LOCK_MEMBER_SQL = f"SELECT id FROM {User._meta.db_table} WHERE id = %s FOR UPDATE"  # noqa: S608


_CONTENT_FIELDS = (
    "tenant_id",
    "member_id",
    "scope_kind",
    "scope_key",
    "scope_identifiers",
    "adapter_scope",
    "category",
    "body",
    "body_fingerprint",
    "subject",
    "origin",
    "lifecycle",
    "suppression_reason",
    "suppression_started_at",
    "suppression_ends_at",
    "suppression_notes",
    "suppression_set_by",
    "actor_handle",
    "relationship_note",
    "sensitive_interaction",
    "consents",
    "provenance_chain",
    "read_only_copy_of",
    "reference_count",
    "last_referenced_at",
)


def _carried(prev: MemoryEntry) -> dict[str, Any]:
    return {name: getattr(prev, name) for name in _CONTENT_FIELDS}


def _insert_revision(
    *, prev: MemoryEntry | None, now: datetime, fields: Mapping[str, Any]
) -> MemoryEntry:
    """Write the next revision of `prev` (or the first revision of a new entry).

    The predecessor flips to superseded first (the partial unique index allows one
    current revision per entry); if it is no longer current, someone else changed the
    entry since it was read and this change is refused rather than lost.
    """
    values = _carried(prev) if prev is not None else {}
    values.update(fields)
    values["body_fingerprint"] = text_fingerprint(values["body"])
    if prev is not None:
        flipped = MemoryEntry.objects.filter(pk=prev.pk, is_current=True).update(
            lifecycle=Lifecycle.SUPERSEDED, is_current=False
        )
        if flipped != 1:
            raise Conflict(
                "The memory changed while this change was being made; read it again.",
                code="memory-changed",
            )
    entry = MemoryEntry(
        entry_id=prev.entry_id if prev is not None else uuid.uuid4(),
        revision=prev.revision + 1 if prev is not None else 1,
        supersedes=prev.revision_id if prev is not None else None,
        is_current=True,
        created_at=prev.created_at if prev is not None else now,
        updated_at=now,
        **values,
    )
    # Every write inserts one: plain SQL (see governance.plainsql), no signals are used.
    plainsql.insert(MemoryEntry, [entry])
    # With the hybrid ranker on, each revision's vector is computed at write time.
    from memory.recall.service import store_embeddings

    store_embeddings([entry], now=now, fresh=True)
    return entry


def _current(
    principal: Principal, member: User, entry_id: uuid.UUID | str, *, lock: bool = True
) -> MemoryEntry:
    """The current revision of one of the member's entries that `principal` may act on."""
    key = _uuid_or_none(entry_id)
    if key is None:
        raise NotFound("No such memory.")
    rows = selectors.actionable_entries(principal, member).filter(entry_id=key, is_current=True)
    if lock:
        rows = rows.select_for_update()
    entry = rows.first()
    if entry is None:
        raise NotFound("No such memory.")
    return entry


def _relocked(principal: Principal, member: User, entry_id: uuid.UUID) -> MemoryEntry:
    """Inside the change's transaction: take the member's lock, read the entry again (it
    may have changed since it was governed) and refuse a forgotten one."""
    _lock_member(member)
    entry = _current(principal, member, entry_id)
    _refuse_tombstoned(entry)
    return entry


def _refuse_tombstoned(entry: MemoryEntry) -> None:
    if entry.lifecycle == Lifecycle.TOMBSTONED:
        raise Conflict(
            "This memory was forgotten; it cannot be changed or brought back.",
            code="entry-tombstoned",
        )


def _refuse_read_only(entry: MemoryEntry) -> None:
    if entry.read_only_copy_of is not None:
        raise Conflict(
            "This is a read-only copy of tenant memory; it cannot be changed.",
            code="read-only-copy",
        )


def _namespace_key(member: User, *, create: bool) -> bytes | None:
    row = ActorNamespace.objects.filter(tenant_id=member.tenant_id, member=member).first()
    if row is None:
        if not create:
            return None
        token = keys.multifernet().encrypt(secrets.token_bytes(32)).decode()
        try:
            with transaction.atomic():
                row = ActorNamespace.objects.create(
                    tenant_id=member.tenant_id, member=member, encrypted_key=token
                )
        except IntegrityError:  # created concurrently: use that one
            row = ActorNamespace.objects.get(tenant_id=member.tenant_id, member=member)
    return keys.multifernet().decrypt(row.encrypted_key.encode())


def _handle_of(member: User, name: str, *, create: bool) -> str | None:
    key = _namespace_key(member, create=create)
    return None if key is None else actor_handle(key, name)


def _resolve_mention(member: User, mention: ActorMention | None) -> str | None:
    """The handle a write is tagged with, registered in the member's namespace."""
    if mention is None:
        return None
    if mention.actor_name is not None:
        handle = _handle_of(member, mention.actor_name, create=True)
        assert handle is not None
        ActorHandle.objects.get_or_create(tenant_id=member.tenant_id, member=member, handle=handle)
        return handle
    handle = mention.actor_handle or ""
    if not ActorHandle.objects.filter(
        tenant_id=member.tenant_id, member=member, handle=handle
    ).exists():
        raise _invalid(
            "multiActor.actorHandle",
            "unknown-handle",
            "This handle is not in the member's namespace; send actorName instead.",
        )
    return handle


def _entry_conflict_key(entry: MemoryEntry) -> str:
    return conflict_key(entry.category, entry.actor_handle, entry.subject)


def _forget_traces(
    member: User, entries: Iterable[MemoryEntry], *, now: datetime, reason: str
) -> None:
    """What forgetting an entry removes besides its rows: open questions that quote it,
    inference counts of its key, and stored API answers; it records the keyed value
    fingerprints that stop a silent re-creation."""
    entries = list(entries)
    if not entries:
        return
    entry_ids = {e.entry_id for e in entries}
    PendingConflict.objects.filter(
        tenant_id=member.tenant_id, member=member, entry_id__in=entry_ids
    ).delete()
    conflict_fps = {_conflict_fingerprint(_entry_conflict_key(e)) for e in entries}
    InferenceObservation.objects.filter(
        tenant_id=member.tenant_id, member=member, conflict_fingerprint__in=conflict_fps
    ).delete()
    seen: set[tuple[uuid.UUID, str]] = set()
    rows = []
    for entry in entries:
        fp = value_fingerprint(entry.body)
        if (entry.entry_id, fp) in seen:
            continue
        seen.add((entry.entry_id, fp))
        rows.append(
            ForgottenValue(
                tenant_id=member.tenant_id,
                member=member,
                entry_id=entry.entry_id,
                value_fingerprint=fp,
                reason=reason,
                created_at=now,
            )
        )
    ForgottenValue.objects.bulk_create(rows)
    # Stored idempotent answers may quote what was just forgotten.
    forget_subject(member.public_id)
    # So may the runs' loop histories, as fingerprints of the texts each write governed.
    runs_forget_content(
        tenant_id=member.tenant_id,
        fingerprints={fp for e in entries for fp in _governed_text_fingerprints(e)},
    )


def _governed_text_fingerprints(entry: MemoryEntry) -> set[str]:
    """Fingerprints of the texts a write of this revision was governed with (`op.text`)."""
    texts = {entry.body, _screened_text(entry.body, entry.relationship_note)}
    if entry.suppression_notes:
        texts.add(entry.suppression_notes)
    return {content_fingerprint(text) for text in texts}


def _all_revisions(member: User, entry_ids: Iterable[uuid.UUID]) -> list[MemoryEntry]:
    return list(
        MemoryEntry.objects.filter(
            tenant_id=member.tenant_id, member=member, entry_id__in=set(entry_ids)
        ).order_by("entry_id", "revision")
    )


def _tombstone(
    principal: Principal, member: User, entry: MemoryEntry, *, now: datetime, reason_code: str
) -> MemoryEntry:
    """A tombstone revision: terminal. Its text stays (with every earlier revision's) only
    for the soft-delete grace window; the purge job then hard-deletes the rows."""
    tombstone = _insert_revision(prev=entry, now=now, fields={"lifecycle": Lifecycle.TOMBSTONED})
    _forget_traces(
        member,
        _all_revisions(member, [entry.entry_id]),
        now=now,
        reason=ForgottenValue.Reason.FORGOTTEN,
    )
    _audit(
        principal,
        member,
        "iris.memory.entry.forgotten",
        subject_ids=[tombstone.entry_id, tombstone.revision_id],
        reason_code=reason_code,
        payload=_revision_payload(tombstone),
    )
    return tombstone


# ------------------------------------------------------------------------ the write path


def memory_write(
    *,
    principal: Principal,
    member: User,
    draft: MemoryDraft,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Remember something (spec: the write path).

    In order: validation (ValidationFailed, 400); off the record (nothing written, not even
    an audit event); governance with the write gate (scope enabled for this member,
    allowed consumer, sensitive consent: Denied, 403); an ephemeral scope stores nothing;
    then, under the member's lock, inference gating and conflict resolution against the
    current entry with the same conflict key in the same scope.
    """
    now = now or timezone.now()
    w = _validate(member, draft)
    if selectors.off_the_record_for(
        member=member, session_id=w.session_id, surface=principal.surface
    ):
        return WriteOutcome("not-written", "off-the-record")
    sensitive_interaction = bool(w.mention and w.mention.sensitive_interaction)
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=w.adapter_scope,
        category=w.category,
        sensitive_interaction=sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.write",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        arguments={
            "category": w.category.value,
            "scopeKind": w.scope_kind.value,
            "origin": w.origin.value,
        },
        attributes={"memoryGate": gate.as_attributes()},
        text=_screened_text(w.body, w.mention.relationship_note if w.mention else ""),
        texts=screening.write_texts(
            body=w.body,
            subject=draft.subject or w.subject,  # as sent: normalising may hide a key
            session_id=w.session_id,
            scope_identifiers=w.scope_identifiers,
            relationship_note=w.mention.relationship_note if w.mention else "",
            suppression_notes=w.suppression["suppression_notes"],
            provenance=w.provenance,
        ),
        pending=decided,
    )
    # The allow is on record in the same commit, and the same INSERT, as what it allowed.
    with transaction.atomic(durable=True), one_insert():
        record_pending(decided)
        if gate.scope_mode == ScopeMode.EPHEMERAL:
            return WriteOutcome("not-written", "scope-ephemeral", notes=gate.scope_notes)
        _lock_member(member)
        handle = _resolve_mention(member, w.mention)
        fields = {
            "tenant_id": member.tenant_id,
            "member_id": member.pk,
            "scope_kind": w.scope_kind.value,
            "scope_key": w.scope_key,
            "scope_identifiers": w.scope_identifiers,
            "adapter_scope": w.adapter_scope.value,
            "category": w.category.value,
            "body": w.body,
            "subject": w.subject,
            "origin": w.origin.value,
            "actor_handle": handle,
            "relationship_note": w.mention.relationship_note if w.mention else "",
            "sensitive_interaction": sensitive_interaction,
            "consents": _snapshot(consents, w.category),
            "provenance_chain": w.provenance,
            "read_only_copy_of": None,
            **w.suppression,
        }
        if (
            w.origin in REPLAYED_ORIGINS
            and ForgottenValue.objects.filter(
                tenant_id=member.tenant_id,
                member=member,
                value_fingerprint=value_fingerprint(w.body),
            ).exists()
        ):
            _audit(
                principal,
                member,
                "iris.memory.write.dropped",
                reason_code="forgotten-not-recreated",
                payload={"origin": w.origin.value, "bodyFingerprint": text_fingerprint(w.body)},
            )
            return WriteOutcome("not-written", "forgotten-not-recreated")
        current = _current_for_key(
            member,
            w.scope_key,
            w.category,
            handle,
            w.subject,
            adapter_scopes=_readable_adapter_scopes(principal),
        )
        if w.origin is Origin.MODEL_INFERRED:
            return _write_inference(principal, member, w, fields, current, gate, now)
        return _write_assertion(principal, member, w, fields, current, now)


def _screened_text(body: str, note: str) -> str:
    return body if not note else f"{body}\n{note}"


_LIVE_ORDER = {Lifecycle.ACTIVE: 0, Lifecycle.PAUSED: 0, Lifecycle.DRAFT: 1}
_CURRENT_FOR_KEY_WHERE = (
    "tenant_id = %s AND member_id = %s AND is_current AND scope_key = %s AND category = %s"
    " AND subject = %s AND read_only_copy_of IS NULL AND lifecycle IN (%s, %s, %s)"
)


def _readable_adapter_scopes(principal: Principal) -> frozenset[str] | None:
    """The adapter scopes a surface may read; None for callers that read all of them."""
    if principal.kind == "surface":
        return selectors.surface_adapter_scopes(principal.surface)
    return None


def _current_for_key(
    member: User,
    scope_key: str,
    category: str,
    handle: str | None,
    subject: str,
    *,
    adapter_scopes: frozenset[str] | None,
) -> MemoryEntry | None:
    """The live entry a write with this conflict key meets in this scope, if any.

    Conflicts are resolved within one scope key: a session's "where I am today" and the
    profile's "where I live" are different facts, and recall's dedupe settles overlaps
    across scopes at read time. A subject-less write meets nothing. Read-only copies are
    not written through. With `adapter_scopes` (a surface's), only entries in those: a
    conflict quotes the prior body, so a surface meets only what it could recall.
    """
    if not subject:
        return None
    where = _CURRENT_FOR_KEY_WHERE + (
        " AND actor_handle = %s" if handle else " AND actor_handle IS NULL"
    )
    params: list[Any] = [
        plainsql.prep(MemoryEntry, "tenant", member.tenant_id),
        member.pk,
        scope_key,
        category,
        subject,
        *_LIVE_ORDER,
        *([handle] if handle else []),
    ]
    if adapter_scopes is not None:
        if not adapter_scopes:
            return None
        where += f" AND adapter_scope IN ({', '.join(['%s'] * len(adapter_scopes))})"
        params.extend(sorted(adapter_scopes))
    # Every write asks this, under the member's lock: plain SQL (see governance.plainsql).
    rows = plainsql.select(MemoryEntry, where, params, lock=True)
    if not rows:
        return None
    rows.sort(key=lambda e: (_LIVE_ORDER[Lifecycle(e.lifecycle)], -e.updated_at.timestamp()))
    return rows[0]


def _side(origin: str, body: str, at: datetime) -> ConflictSide:
    return ConflictSide(origin=Origin(origin), body=body, updated_at=at)


def _written(
    principal: Principal,
    member: User,
    entry: MemoryEntry,
    *,
    reason: str,
    action: str = "iris.memory.entry.written",
    **extra: Any,
) -> WriteOutcome:
    _audit(
        principal,
        member,
        action,
        subject_ids=[entry.entry_id, entry.revision_id],
        reason_code=reason,
        payload=_revision_payload(entry, **extra),
    )
    return WriteOutcome("written", reason, entry=entry)


def _write_assertion(
    principal: Principal,
    member: User,
    w: _Write,
    fields: dict[str, Any],
    current: MemoryEntry | None,
    now: datetime,
) -> WriteOutcome:
    """A write that is not a model inference: stated, confirmed, operator, summary, import."""
    if current is None:
        entry = _insert_revision(
            prev=None, now=now, fields={**fields, "lifecycle": Lifecycle.ACTIVE}
        )
        return _written(principal, member, entry, reason="created")

    if same_value(current.body, w.body):
        # Restating a stored value changes nothing, unless the member's word now stands
        # behind what was only inferred: that is a confirmation, worth a revision.
        upgrade = (
            w.origin in MEMBER_WORD_ORIGINS and Origin(current.origin) not in MEMBER_WORD_ORIGINS
        )
        if not upgrade:
            return WriteOutcome("not-written", "already-known", entry=current)

    resolution = resolve_conflict(
        _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
    )
    if resolution.ask_member:
        return _raise_conflict(principal, member, current, w, fields, resolution, now)
    if resolution.winner == "prior":
        _audit(
            principal,
            member,
            "iris.memory.conflict.resolved",
            subject_ids=[current.entry_id, current.revision_id],
            reason_code=resolution.rule.value,
            payload=_conflict_payload(current, w.origin.value, w.body, resolution),
        )
        return WriteOutcome("not-written", f"kept-existing:{resolution.rule.value}", entry=current)
    entry = _insert_revision(
        prev=current, now=now, fields={**fields, **_lifecycle_after(current, fields)}
    )
    return _written(
        principal,
        member,
        entry,
        reason=resolution.rule.value,
        conflict={"rule": resolution.rule.value, "priorOrigin": current.origin},
    )


def _lifecycle_after(prev: MemoryEntry, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A new value keeps the member's pause (and its suppression); otherwise it is active."""
    if prev.lifecycle == Lifecycle.PAUSED:
        return {
            "lifecycle": Lifecycle.PAUSED,
            "suppression_reason": prev.suppression_reason,
            "suppression_started_at": prev.suppression_started_at,
            "suppression_ends_at": prev.suppression_ends_at,
            "suppression_notes": prev.suppression_notes,
        }
    return {"lifecycle": Lifecycle.ACTIVE}


def _conflict_payload(
    prior: MemoryEntry, incoming_origin: str, incoming_body: str, resolution: ConflictResolution
) -> dict[str, Any]:
    return {
        "entryId": str(prior.entry_id),
        "prior": {
            "revisionId": str(prior.revision_id),
            "revision": prior.revision,
            "origin": prior.origin,
            "bodyFingerprint": prior.body_fingerprint,
        },
        "incoming": {"origin": incoming_origin, "bodyFingerprint": text_fingerprint(incoming_body)},
        "rule": resolution.rule.value,
        "ladderWinner": resolution.winner,
        "askMember": resolution.ask_member,
        "category": _audited_category(prior.category),
    }


def _proposal(w: _Write, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The proposed write, JSON-safe, to be applied if the member says "update"."""
    suppression = None
    if fields.get("suppression_reason"):
        ends = fields["suppression_ends_at"]
        suppression = {
            "reason": fields["suppression_reason"],
            "startedAt": rfc3339(fields["suppression_started_at"]),
            "endsAt": rfc3339(ends) if ends else None,
            "notes": fields["suppression_notes"],
        }
    return {
        "body": w.body,
        "origin": w.origin.value,
        "category": w.category.value,
        "subject": w.subject,
        "adapterScope": w.adapter_scope.value,
        "actorHandle": fields["actor_handle"],
        "relationshipNote": fields["relationship_note"],
        "sensitiveInteraction": fields["sensitive_interaction"],
        "provenanceChain": fields["provenance_chain"],
        "suppression": suppression,
    }


def _raise_conflict(
    principal: Principal,
    member: User,
    current: MemoryEntry,
    w: _Write,
    fields: Mapping[str, Any],
    resolution: ConflictResolution,
    now: datetime,
) -> WriteOutcome:
    # One open question per entry: a newer contradiction replaces the older question.
    PendingConflict.objects.filter(entry_id=current.entry_id, status="open").update(
        status=PendingConflict.Status.REPLACED, proposal={}, closed_at=now
    )
    conflict = PendingConflict.objects.create(
        tenant_id=member.tenant_id,
        member=member,
        entry_id=current.entry_id,
        prior_revision_id=current.revision_id,
        rule=resolution.rule.value,
        ladder_winner=resolution.winner,
        proposal=_proposal(w, fields),
        proposal_fingerprint=text_fingerprint(w.body),
        created_at=now,
        expires_at=now + CONFLICT_TTL,
    )
    _audit(
        principal,
        member,
        "iris.memory.conflict.raised",
        subject_ids=[current.entry_id, conflict.id],
        reason_code=resolution.rule.value,
        payload=_conflict_payload(current, w.origin.value, w.body, resolution),
    )
    return WriteOutcome(
        "conflict",
        "memory-conflict",
        entry=current,
        conflict=conflict,
        question=selectors.conflict_question(prior_body=current.body, proposed_body=w.body),
    )


def _observe(member: User, key: str, body: str, session_id: str, now: datetime) -> int:
    """Record that the model inferred this value in this session; return in how many
    distinct sessions it has been inferred. A write without a session counts for none."""
    conflict_fp, value_fp = _conflict_fingerprint(key), value_fingerprint(body)
    if session_id:
        InferenceObservation.objects.get_or_create(
            tenant_id=member.tenant_id,
            member=member,
            conflict_fingerprint=conflict_fp,
            value_fingerprint=value_fp,
            session_id=session_id,
            defaults={"seen_at": now},
        )
    sessions = InferenceObservation.objects.filter(
        tenant_id=member.tenant_id,
        member=member,
        conflict_fingerprint=conflict_fp,
        value_fingerprint=value_fp,
    ).values_list("session_id", flat=True)
    return count_distinct_sessions(sessions)


def _write_inference(
    principal: Principal,
    member: User,
    w: _Write,
    fields: dict[str, Any],
    current: MemoryEntry | None,
    gate: WriteGate,
    now: datetime,
) -> WriteOutcome:
    """A model inference earns durability (spec: "Inference vs Confirmation Policy").

    It is stored as a draft (never recalled) and becomes active only once the same value
    has been inferred in PROMOTION_THRESHOLD distinct sessions, or when the member
    confirms it; a sensitive inference only by confirmation. Against the member's own word
    it is never stored: it becomes a question instead.
    """
    if current is not None and Origin(current.origin) in MEMBER_WORD_ORIGINS:
        if same_value(current.body, w.body):
            return WriteOutcome("not-written", "already-known", entry=current)
        resolution = resolve_conflict(
            _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
        )
        return _raise_conflict(principal, member, current, w, fields, resolution, now)

    key = conflict_key(w.category, fields["actor_handle"], w.subject)
    distinct = _observe(member, key, w.body, w.session_id, now)
    decision = evaluate_promotion(
        requested=True, explicit=False, distinct_sessions=distinct, sensitive=gate.sensitive
    )
    if current is None:
        lifecycle = Lifecycle.ACTIVE if decision.allowed else Lifecycle.DRAFT
        entry = _insert_revision(prev=None, now=now, fields={**fields, "lifecycle": lifecycle})
        outcome = _written(
            principal,
            member,
            entry,
            reason=decision.reason.value,
            promotionReason=decision.reason.value,
            distinctSessions=distinct,
        )
        return _with_promotion(outcome, decision, distinct)

    if same_value(current.body, w.body) and current.lifecycle != Lifecycle.DRAFT:
        return WriteOutcome("not-written", "already-known", entry=current)
    if current.lifecycle == Lifecycle.DRAFT:
        if not decision.allowed and same_value(current.body, w.body):
            _audit_observed(principal, member, current, decision, distinct)
            return _with_promotion(
                WriteOutcome("not-written", "inference-observed", entry=current), decision, distinct
            )
        lifecycle = Lifecycle.ACTIVE if decision.allowed else Lifecycle.DRAFT
        entry = _insert_revision(prev=current, now=now, fields={**fields, "lifecycle": lifecycle})
        action = "iris.memory.entry.promoted" if decision.allowed else "iris.memory.entry.written"
        outcome = _written(
            principal,
            member,
            entry,
            reason=decision.reason.value,
            action=action,
            promotionReason=decision.reason.value,
            distinctSessions=distinct,
        )
        return _with_promotion(outcome, decision, distinct)
    # The stored fact is itself an inference (or an operator's or a summary's): a different
    # inferred value replaces it only once it has earned durability on its own.
    if not decision.allowed:
        _audit_observed(principal, member, current, decision, distinct)
        return _with_promotion(
            WriteOutcome("not-written", "inference-observed", entry=current), decision, distinct
        )
    resolution = resolve_conflict(
        _side(current.origin, current.body, current.updated_at), _side(w.origin, w.body, now)
    )
    if resolution.winner == "prior":
        return WriteOutcome("not-written", f"kept-existing:{resolution.rule.value}", entry=current)
    entry = _insert_revision(
        prev=current, now=now, fields={**fields, **_lifecycle_after(current, fields)}
    )
    outcome = _written(
        principal,
        member,
        entry,
        reason=decision.reason.value,
        action="iris.memory.entry.promoted",
        conflict={"rule": resolution.rule.value, "priorOrigin": current.origin},
        promotionReason=decision.reason.value,
        distinctSessions=distinct,
    )
    return _with_promotion(outcome, decision, distinct)


def _with_promotion(
    outcome: WriteOutcome, decision: PromotionDecision, distinct: int
) -> WriteOutcome:
    return WriteOutcome(
        outcome.status,
        outcome.reason,
        entry=outcome.entry,
        promotion=decision,
        distinct_sessions=distinct,
    )


def _audit_observed(
    principal: Principal,
    member: User,
    entry: MemoryEntry,
    decision: PromotionDecision,
    distinct: int,
) -> None:
    _audit(
        principal,
        member,
        "iris.memory.inference.observed",
        subject_ids=[entry.entry_id],
        reason_code=decision.reason.value,
        payload={"distinctSessions": distinct, "category": _audited_category(entry.category)},
    )


# ------------------------------------------------------------------ answering a conflict


def memory_conflict_answer(
    *,
    principal: Principal,
    member: User,
    conflict_id: uuid.UUID | str,
    answer: str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member's answer to "you mentioned X earlier — should I update it?".

    `update` applies the proposed write as a new revision (an inference the member
    accepts becomes `user-confirmed`); `keep` drops it, and an inference the member
    refused is not proposed again. Either way the proposal's text is erased from the
    question row; the audit records prior state, new state, rule and answer as ids and
    fingerprints. A question that expired, was replaced, or whose memory changed since is
    a 409 and changes nothing but its own closing.
    """
    now = now or timezone.now()
    if answer not in CONFLICT_ANSWERS:
        raise _invalid(
            "answer", "invalid_choice", "answer must be update or keep.", CONFLICT_ANSWERS
        )
    key = _uuid_or_none(conflict_id)
    conflict = (
        PendingConflict.objects.filter(tenant_id=member.tenant_id, member=member, id=key).first()
        if key
        else None
    )
    readable = _readable_adapter_scopes(principal)
    if conflict is not None and readable is not None:
        # A question about an entry the surface may not read does not exist for it.
        prior = MemoryEntry.objects.filter(
            tenant_id=member.tenant_id, member=member, revision_id=conflict.prior_revision_id
        ).first()
        if prior is None or prior.adapter_scope not in readable:
            conflict = None
    if conflict is None:
        raise NotFound("No such question.")
    proposal = conflict.proposal
    attributes: dict[str, Any] = {"answer": answer}
    text = None
    if answer == "update" and conflict.status == PendingConflict.Status.OPEN and proposal:
        gate, _ = _gate(
            principal=principal,
            member=member,
            adapter=AdapterScope(proposal["adapterScope"]),
            category=proposal["category"],
            sensitive_interaction=bool(proposal["sensitiveInteraction"]),
        )
        attributes["memoryGate"] = gate.as_attributes()
        text = _screened_text(proposal["body"], proposal["relationshipNote"])
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.conflict_answer",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[conflict.id, conflict.entry_id],
        arguments={"conflictId": str(conflict.id), "answer": answer},
        attributes=attributes,
        text=text,
        pending=decided,
        texts=screening.proposal_texts(proposal) if text is not None else None,
    )
    refusal: Conflict | None = None
    outcome: WriteOutcome
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        _lock_member(member)
        conflict = PendingConflict.objects.select_for_update().get(pk=conflict.pk)
        current = (
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id,
                member=member,
                entry_id=conflict.entry_id,
                is_current=True,
            )
            .select_for_update()
            .first()
        )
        if conflict.status != PendingConflict.Status.OPEN:
            raise Conflict("This question was already closed.", code="conflict-closed")
        if conflict.expires_at <= now:
            _close(conflict, PendingConflict.Status.EXPIRED, now)
            refusal = Conflict(
                "This question expired; nothing was changed.", code="conflict-expired"
            )
        elif current is None or current.revision_id != conflict.prior_revision_id:
            _close(conflict, PendingConflict.Status.EXPIRED, now)
            refusal = Conflict(
                "The memory changed since the question was asked; nothing was changed.",
                code="conflict-stale",
            )
        else:
            proposal = conflict.proposal
            payload = {
                "answer": answer,
                "rule": conflict.rule,
                "ladderWinner": conflict.ladder_winner,
                "prior": {
                    "revisionId": str(current.revision_id),
                    "revision": current.revision,
                    "origin": current.origin,
                    "bodyFingerprint": current.body_fingerprint,
                },
                "proposed": {
                    "origin": proposal["origin"],
                    "bodyFingerprint": conflict.proposal_fingerprint,
                },
            }
            if answer == "update":
                entry = _apply_proposal(member, current, proposal, now)
                payload["result"] = {
                    "revisionId": str(entry.revision_id),
                    "revision": entry.revision,
                    "origin": entry.origin,
                }
                outcome = WriteOutcome("written", "conflict-answered-update", entry=entry)
            else:
                if Origin(proposal["origin"]) in REPLAYED_ORIGINS:
                    ForgottenValue.objects.create(
                        tenant_id=member.tenant_id,
                        member=member,
                        entry_id=current.entry_id,
                        value_fingerprint=value_fingerprint(proposal["body"]),
                        reason=ForgottenValue.Reason.REJECTED,
                        created_at=now,
                    )
                outcome = WriteOutcome("not-written", "conflict-answered-keep", entry=current)
            conflict.answer = answer
            _close(conflict, PendingConflict.Status.ANSWERED, now)
            # The stored 409 answers quoted the proposal; they go with it.
            forget_subject(member.public_id)
            _audit(
                principal,
                member,
                "iris.memory.conflict.answered",
                subject_ids=[conflict.entry_id, conflict.id],
                reason_code=conflict.rule,
                payload=payload,
            )
            if outcome.entry is not None and outcome.written:
                _audit(
                    principal,
                    member,
                    "iris.memory.entry.written",
                    subject_ids=[outcome.entry.entry_id, outcome.entry.revision_id],
                    reason_code="conflict-answered-update",
                    payload=_revision_payload(outcome.entry),
                )
    if refusal is not None:
        raise refusal
    return outcome


def _close(conflict: PendingConflict, status: str, now: datetime) -> None:
    conflict.status = status
    conflict.proposal = {}
    conflict.closed_at = now
    conflict.save(update_fields=["status", "answer", "proposal", "closed_at"])


def _apply_proposal(
    member: User, current: MemoryEntry, proposal: Mapping[str, Any], now: datetime
) -> MemoryEntry:
    confirmed = promoted_origin(
        PromotionDecision(True, PromotionReason.EXPLICIT_PROMOTION), proposal["origin"]
    )
    suppression = dict(_NO_SUPPRESSION)
    if proposal.get("suppression"):
        s = proposal["suppression"]
        suppression = {
            "suppression_reason": s["reason"],
            "suppression_started_at": datetime.fromisoformat(s["startedAt"]),
            "suppression_ends_at": datetime.fromisoformat(s["endsAt"]) if s["endsAt"] else None,
            "suppression_notes": s["notes"],
        }
    fields = {
        "body": proposal["body"],
        "origin": confirmed.value,
        "category": proposal["category"],
        "subject": proposal["subject"],
        "adapter_scope": proposal["adapterScope"],
        "actor_handle": proposal["actorHandle"],
        "relationship_note": proposal["relationshipNote"],
        "sensitive_interaction": proposal["sensitiveInteraction"],
        "provenance_chain": proposal["provenanceChain"],
        **suppression,
    }
    fields.update(_lifecycle_after(current, fields))
    return _insert_revision(prev=current, now=now, fields=fields)


def pending_conflicts_expire(
    *, principal: Principal, tenant_id: uuid.UUID, now: datetime | None = None, batch: int = 500
) -> int:
    """Close open questions past their expiry and erase their proposals (for a job).

    Governed per member like any write; returns how many questions were closed.
    """
    now = now or timezone.now()
    due = list(
        PendingConflict.objects.filter(tenant_id=tenant_id, status="open", expires_at__lte=now)
        .select_related("member")
        .order_by("expires_at")[:batch]
    )
    closed = 0
    for member_id in sorted({c.member_id for c in due}):
        member = next(c.member for c in due if c.member_id == member_id)
        ids = [c.id for c in due if c.member_id == member_id]
        _govern(
            Hook.PRE_WRITE,
            name="memory.conflicts_expire",
            effect=Effect.WRITE,
            principal=principal,
            member=member,
            context=None,
            subject_ids=ids,
        )
        with transaction.atomic(durable=True):
            count = PendingConflict.objects.filter(id__in=ids, status="open").update(
                status=PendingConflict.Status.EXPIRED, proposal={}, closed_at=now
            )
            if count:
                forget_subject(member.public_id)
                _audit(
                    principal,
                    member,
                    "iris.memory.conflict.expired",
                    subject_ids=ids,
                    payload={"count": count},
                )
            closed += count
    return closed


# ------------------------------------------------------------------- member operations


def memory_correct(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    correction: Correction,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member corrects a memory: a new revision in the member's own words
    (`user-stated`). A draft inference the member corrects becomes active. A forgotten
    memory is 409 `entry-tombstoned`; a read-only copy 409 `read-only-copy`."""
    now = now or timezone.now()
    body = None if correction.body is None else _body(correction.body)
    category = (
        None if correction.category is None else _enum(correction.category, Category, "category")
    )
    if correction.relationship_note is not None:
        try:
            validate_relationship_note(correction.relationship_note)
        except MultiActorRuleError:
            raise _invalid(
                "multiActor.relationshipNote", "max_length", "relationshipNote is at most 500."
            ) from None
    if all(
        value is None
        for value in (
            correction.body,
            correction.subject,
            correction.category,
            correction.relationship_note,
            correction.sensitive_interaction,
        )
    ):
        raise _invalid("body", "required", "Send at least one field to correct.")
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    _refuse_read_only(entry)
    if entry.actor_handle is None and (
        correction.relationship_note is not None or correction.sensitive_interaction
    ):
        raise _invalid(
            "multiActor", "no-actor", "This memory mentions nobody; there is no note to correct."
        )
    new_body = body if body is not None else entry.body
    new_category = category.value if category is not None else entry.category
    sensitive_interaction = (
        entry.sensitive_interaction
        if correction.sensitive_interaction is None
        else bool(correction.sensitive_interaction)
    )
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=AdapterScope(entry.adapter_scope),
        category=new_category,
        sensitive_interaction=sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.correct",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        # No text in the arguments: a held correction is not resumed from storage; the
        # caller repeats it with the approval id, and the fingerprint ties the two.
        arguments={"entryId": str(entry.entry_id), "bodyFingerprint": text_fingerprint(new_body)},
        attributes={
            "memoryGate": gate.as_attributes(),
            "previous_fingerprint": content_fingerprint(entry.body),
        },
        text=_screened_text(new_body, correction.relationship_note or ""),
        pending=decided,
        texts=screening.correct_texts(
            body=new_body,
            subject=correction.subject,
            relationship_note=correction.relationship_note,
        ),
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        fields: dict[str, Any] = {
            "body": new_body,
            "category": new_category,
            "subject": _subject(correction.subject, new_body)
            if correction.subject is not None or body is not None
            else entry.subject,
            "origin": Origin.USER_STATED.value,
            "sensitive_interaction": sensitive_interaction,
            "relationship_note": entry.relationship_note
            if correction.relationship_note is None
            else correction.relationship_note,
            "consents": _snapshot(consents, new_category),
        }
        unchanged = all(
            getattr(entry, name) == value for name, value in fields.items() if name != "consents"
        )
        if unchanged:
            return WriteOutcome("not-written", "unchanged", entry=entry)
        fields.update(_lifecycle_after(entry, fields))
        revision = _insert_revision(prev=entry, now=now, fields=fields)
        # A correction answers any open question about this memory.
        PendingConflict.objects.filter(entry_id=entry.entry_id, status="open").update(
            status=PendingConflict.Status.REPLACED, proposal={}, closed_at=now
        )
        return _written(
            principal,
            member,
            revision,
            reason="member-correction",
            action="iris.memory.entry.corrected",
        )


def memory_confirm(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """The member confirms an inference (spec: "explicit-promotion"): a draft becomes
    active, and any inferred origin becomes `user-confirmed`."""
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    gate, _ = _gate(
        principal=principal,
        member=member,
        adapter=AdapterScope(entry.adapter_scope),
        category=entry.category,
        sensitive_interaction=entry.sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.confirm",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        attributes={"memoryGate": gate.as_attributes()},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        decision = evaluate_promotion(
            requested=True, explicit=True, distinct_sessions=0, sensitive=gate.sensitive
        )
        origin = promoted_origin(decision, entry.origin)
        lifecycle = Lifecycle.ACTIVE if entry.lifecycle == Lifecycle.DRAFT else entry.lifecycle
        if origin.value == entry.origin and lifecycle == entry.lifecycle:
            return WriteOutcome("not-written", "already-confirmed", entry=entry)
        revision = _insert_revision(
            prev=entry, now=now, fields={"origin": origin.value, "lifecycle": lifecycle}
        )
        outcome = _written(
            principal,
            member,
            revision,
            reason=decision.reason.value,
            action="iris.memory.entry.promoted",
        )
        return _with_promotion(outcome, decision, 0)


def memory_forget(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    reason_code: str = "member-request",
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> MemoryEntry:
    """Forget one memory: a terminal tombstone revision (spec: "Forget flow").

    Open questions about it and its inference counts go now, with any stored API answer
    that quoted it; the text of its revisions stays only for the soft-delete grace window
    (`memory.rules.retention.SOFT_DELETE_GRACE`), after which the purge job hard-deletes the
    rows (`memory_hard_delete`). Surfaces no longer see it at all; the member sees it as
    forgotten until the purge. A value forgotten here is never silently re-created.
    """
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.forget",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id), "reasonCode": reason_code},
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        return _tombstone(principal, member, entry, now=now, reason_code=reason_code)


def memory_pause(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    ends_at: datetime | None = None,
    notes: str = "",
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Pause a memory (suppression `user-pause`): kept, but never recalled until resumed
    or until `ends_at`. Only an active memory pauses; pausing a paused one changes nothing."""
    now = now or timezone.now()
    if ends_at is not None and _aware(ends_at, "endsAt") <= now:
        raise _invalid("endsAt", "not-in-future", "endsAt must be in the future.")
    if len(notes) > SUPPRESSION_NOTES_MAX_LENGTH:
        raise _invalid("notes", "max_length", "notes must be at most 500 characters.")
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.pause",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        text=notes or None,
        pending=decided,
        texts={"notes": notes},
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        if entry.lifecycle == Lifecycle.PAUSED:
            return WriteOutcome("not-written", "already-paused", entry=entry)
        if entry.lifecycle != Lifecycle.ACTIVE:
            raise Conflict("Only an active memory can be paused.", code="not-active")
        revision = _insert_revision(
            prev=entry,
            now=now,
            fields={
                "lifecycle": Lifecycle.PAUSED,
                "suppression_reason": SuppressionReason.USER_PAUSE.value,
                "suppression_started_at": now,
                "suppression_ends_at": ends_at,
                "suppression_notes": notes,
                "suppression_set_by": controls.lifter_of(principal),
            },
        )
        return _written(
            principal, member, revision, reason="user-pause", action="iris.memory.entry.paused"
        )


def memory_resume(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Lift a pause: the memory is active again, without suppression.

    The member lifts any pause on their memory; a surface only one it set itself
    (`memory.controls`: refused 403, on record as a deny)."""
    now = now or timezone.now()
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    attributes: dict[str, Any] = {}
    if entry.lifecycle == Lifecycle.PAUSED:
        attributes[controls.SET_BY_ATTRIBUTE] = entry.suppression_set_by
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.resume",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={"entryId": str(entry.entry_id)},
        attributes=attributes,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        if entry.lifecycle == Lifecycle.ACTIVE:
            return WriteOutcome("not-written", "not-paused", entry=entry)
        if entry.lifecycle != Lifecycle.PAUSED:
            raise Conflict("Only a paused memory can be resumed.", code="not-paused")
        # Paused again by someone else since governance read it: the same refusal.
        reason = controls.refusal(entry.suppression_set_by, principal)
        if reason is not None:
            raise controls.refused(reason)
        revision = _insert_revision(
            prev=entry,
            now=now,
            fields={"lifecycle": Lifecycle.ACTIVE, **_NO_SUPPRESSION, "suppression_set_by": None},
        )
        reason_code = "user-resume" if principal.kind == "member" else f"{principal.kind}-resume"
        return _written(
            principal, member, revision, reason=reason_code, action="iris.memory.entry.resumed"
        )


def memory_change_scope(
    *,
    principal: Principal,
    member: User,
    entry_id: uuid.UUID | str,
    scope_kind: str,
    scope_identifiers: Mapping[str, Any],
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Move a memory to another scope at the member's request (`memory.rules.scopes`).

    session → profile is an explicit promotion (an inference becomes `user-confirmed`, a
    draft active, with a `profile-promotion` provenance link); session → notebook and
    profile → notebook move the entry (a new revision in the new scope). tenant →
    notebook leaves the tenant row alone and writes the member a read-only copy (a new
    entry). Anything else is 409 with the rule's reason code; a different fact with the
    same conflict key already in the target scope is 409 `scope-change-conflict`.
    """
    now = now or timezone.now()
    target_kind, identifiers, key = _validated_scope(member, scope_kind, scope_identifiers)
    entry = _current(principal, member, entry_id, lock=False)
    _refuse_tombstoned(entry)
    _refuse_read_only(entry)
    change = check_scope_change(entry.scope_kind, target_kind)
    if not change.allowed:
        raise Conflict(
            "This memory cannot move to that scope.",
            code=change.reason_code,
            field="scope.kind",
            rule=change.reason_code,
        )
    adapter = CANONICAL_DEFAULT_ADAPTER[target_kind]
    gate, consents = _gate(
        principal=principal,
        member=member,
        adapter=adapter,
        category=entry.category,
        sensitive_interaction=entry.sensitive_interaction,
    )
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.change_scope",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=[entry.entry_id],
        arguments={
            "entryId": str(entry.entry_id),
            "from": entry.scope_kind,
            "to": target_kind.value,
            "reasonCode": change.reason_code,
        },
        attributes={
            "memoryGate": gate.as_attributes(),
        },
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        entry = _relocked(principal, member, entry.entry_id)
        clash = _current_for_key(
            member,
            key,
            entry.category,
            entry.actor_handle,
            entry.subject,
            adapter_scopes=_readable_adapter_scopes(principal),
        )
        if clash is not None and clash.entry_id != entry.entry_id:
            raise Conflict(
                "The target scope already holds a memory about this; correct or forget one.",
                code="scope-change-conflict",
                extra={"conflictingEntryId": str(clash.entry_id)},
            )
        scope_fields = {
            "scope_kind": target_kind.value,
            "scope_key": key,
            "scope_identifiers": identifiers,
            "adapter_scope": adapter.value,
            "consents": _snapshot(consents, entry.category),
        }
        link = None
        if change.copy:
            link = {
                "kind": ProvenanceKind.NOTEBOOK_ATTACHMENT.value,
                "ref": str(entry.revision_id),
                "capturedAt": rfc3339(now),
            }
            values = _carried(entry)
            values.update(scope_fields)
            values.update(
                {
                    "lifecycle": Lifecycle.ACTIVE,
                    "read_only_copy_of": entry.entry_id,
                    "provenance_chain": [*entry.provenance_chain, link],
                    "reference_count": 0,
                    "last_referenced_at": None,
                    **_NO_SUPPRESSION,
                }
            )
            copy = _insert_revision(prev=None, now=now, fields=values)
            return _written(
                principal,
                member,
                copy,
                reason=change.reason_code,
                action="iris.memory.entry.scope_changed",
                sourceEntryId=str(entry.entry_id),
            )
        fields = dict(scope_fields)
        promotion = None
        if target_kind is ScopeKind.PROFILE:
            promotion = evaluate_promotion(
                requested=True, explicit=True, distinct_sessions=0, sensitive=gate.sensitive
            )
            fields["origin"] = promoted_origin(promotion, entry.origin).value
            fields["provenance_chain"] = [
                *entry.provenance_chain,
                {
                    "kind": ProvenanceKind.PROFILE_PROMOTION.value,
                    "ref": str(entry.revision_id),
                    "capturedAt": rfc3339(now),
                },
            ]
            if entry.lifecycle == Lifecycle.DRAFT:
                fields["lifecycle"] = Lifecycle.ACTIVE
        revision = _insert_revision(prev=entry, now=now, fields=fields)
        extra: dict[str, Any] = {"fromScopeKind": entry.scope_kind}
        if promotion is not None:
            extra["promotionReason"] = promotion.reason.value
        return _written(
            principal,
            member,
            revision,
            reason=change.reason_code,
            action="iris.memory.entry.scope_changed",
            **extra,
        )


def off_the_record_set(
    *,
    principal: Principal,
    member: User,
    enabled: bool,
    session_id: str | None = None,
    surface: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> OffTheRecord | None:
    """Switch off-the-record on or off for one session (or, without a session, for every
    session) and one surface (or every surface). While on, memory writes that match store
    nothing at all. Returns the toggle row while on, None once off. Idempotent.

    The member switches off any toggle of theirs; a surface only one it switched on itself
    (`memory.controls`: refused 403, on record as a deny)."""
    now = now or timezone.now()
    session = _session_id(session_id)
    if surface is not None and surface not in SURFACES:
        raise _invalid("surface", "invalid_choice", "surface is not a known surface.", SURFACES)

    def toggles() -> Any:
        return OffTheRecord.objects.filter(
            tenant_id=member.tenant_id, member=member, session_id=session, surface=surface or ""
        )

    attributes: dict[str, Any] = {}
    if not enabled:
        existing = toggles().first()
        if existing is not None:
            attributes[controls.SET_BY_ATTRIBUTE] = existing.set_by
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.off_the_record",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        arguments={
            "enabled": enabled,
            "sessionId": session or None,
            "surface": surface,
        },
        attributes=attributes,
        pending=decided,
        texts={"sessionId": session},
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        _lock_member(member)
        rows = toggles()
        row = rows.first()
        if enabled and row is None:
            row = OffTheRecord.objects.create(
                tenant_id=member.tenant_id,
                member=member,
                session_id=session,
                surface=surface or "",
                since=now,
                set_by=controls.lifter_of(principal),
            )
            changed = True
        elif not enabled and row is not None:
            # Switched on again by someone else since governance read it: the same refusal.
            reason = controls.refusal(row.set_by, principal)
            if reason is not None:
                raise controls.refused(reason)
            rows.delete()
            row, changed = None, True
        else:
            changed = False
        if changed:
            _audit(
                principal,
                member,
                "iris.memory.off_the_record.enabled"
                if enabled
                else "iris.memory.off_the_record.disabled",
                payload={"allSessions": not session, "surface": surface or "*"},
            )
        return row


# ------------------------------------------------------------------------- multi-actor


def actor_handle_for(
    *, principal: Principal, member: User, name: str, context: Mapping[str, Any] | None = None
) -> str:
    """The opaque handle `name` gets in the member's namespace (the name is not stored).

    Creates the member's namespace key on first use; registers nothing else.
    """
    if (
        not isinstance(name, str)
        or len(name) > ACTOR_NAME_MAX_LENGTH
        or not normalise_actor_name(name)
    ):
        raise _invalid("actorName", "invalid", "actorName is not usable.")
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.actor_handle",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        handle = _handle_of(member, name, create=True)
    assert handle is not None
    return handle


def actors_forget(
    *,
    principal: Principal,
    member: User,
    actor_name: str | None = None,
    actor_handle: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> ActorsForgetResult:
    """Forget every mention of a person (spec: "Right to be forgotten by association").

    Tombstones every live entry of the member tagged with the person's handle and removes
    the handle from the member's namespace. Destructive: governed at `pre_destructive`,
    where the owner's approval is asked for (HeldForApproval, HTTP 202) and the call gets
    its side-effect ledger row before it runs. A name is turned into its handle first, so
    the approval and the ledger hold only the handle. Forgetting someone never mentioned
    forgets nothing and says so.
    """
    if (actor_name is None) == (actor_handle is None):
        raise _invalid(
            "actorName",
            "one-of-actorName-actorHandle",
            "Send exactly one of actorName and actorHandle.",
        )
    if actor_handle is not None:
        try:
            handle = validate_actor_handle(actor_handle)
        except MultiActorRuleError:
            raise _invalid("actorHandle", "malformed", "actorHandle is malformed.") from None
    else:
        name = actor_name or ""
        if len(name) > ACTOR_NAME_MAX_LENGTH or not normalise_actor_name(name):
            raise _invalid("actorName", "invalid", "actorName is not usable.")
        # The namespace key is created if missing (a random key, no member data), so that a
        # name always has a handle and the call can be approved and resumed by handle.
        with transaction.atomic():
            handle = _handle_of(member, name, create=True) or ""
    op = _govern(
        Hook.PRE_DESTRUCTIVE,
        name="memory.actors_forget",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        member=member,
        context=context,
        arguments={"actorHandle": handle},
    )
    return run_destructive(op, _actors_forget, principal, member, handle, now or timezone.now())


def _actors_forget(
    principal: Principal, member: User, handle: str, now: datetime
) -> ActorsForgetResult:
    with transaction.atomic(durable=True):
        _lock_member(member)
        live = list(
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id, member=member, actor_handle=handle, is_current=True
            )
            .exclude(lifecycle=Lifecycle.TOMBSTONED)
            .select_for_update()
            .order_by("created_at", "entry_id")
        )
        for entry in live:
            _tombstone(principal, member, entry, now=now, reason_code="actor-forgotten")
        # Questions whose proposal would tag the person again go as well.
        open_ids = [
            c.id
            for c in PendingConflict.objects.filter(
                tenant_id=member.tenant_id, member=member, status="open"
            )
            if c.proposal.get("actorHandle") == handle
        ]
        PendingConflict.objects.filter(id__in=open_ids).delete()
        removed, _ = ActorHandle.objects.filter(
            tenant_id=member.tenant_id, member=member, handle=handle
        ).delete()
        forget_subject(member.public_id)
        _audit(
            principal,
            member,
            "iris.memory.actor.forgotten",
            subject_ids=[e.entry_id for e in live],
            reason_code="forget-all-mentions",
            payload={
                "actorHandle": handle,
                "entryCount": len(live),
                "handleRemoved": bool(removed),
            },
        )
    return ActorsForgetResult(
        actor_handle=handle,
        entry_ids=tuple(e.entry_id for e in live),
        handle_removed=bool(removed),
    )


# ------------------------------------------------------------------------- hard delete


def memory_hard_delete(
    *,
    principal: Principal,
    member: User,
    entry_ids: Iterable[uuid.UUID | str] | None = None,
    category: str | None = None,
    sensitive_interactions: bool = False,
    include_derived: bool = True,
    reason_code: str = "member-request",
    limit: int | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> HardDeleteResult:
    """Remove entries for good: every revision row, now (DESIGN invariant 7).

    Selects the member's entries named in `entry_ids`, every entry any revision of which
    is in `category`, and (with `sensitive_interactions`) every entry any revision of
    which records a sensitive interaction; with `include_derived`, also every entry whose
    provenance names one of those (a summary of them), transitively. Their open
    questions, inference counts and stored API answers go too; keyed fingerprints of the
    values stay so that nothing re-creates them silently, and the audit keeps ids,
    revision counts and fingerprints. Ids that are not this member's are ignored.

    Destructive: governed at `pre_destructive` (a member's or a surface's call waits for
    the owner's approval; Iris's own jobs, as a system principal, do not) and run behind
    its side-effect ledger row. For jobs: `limit` bounds one call (one transaction) and
    `remaining` says to call again; a second call finds nothing and deletes nothing.
    Used by the consent-revocation cascade (`reason_code="consent-revoked"`) and the
    soft-delete purge (`reason_code="soft-delete-grace-expired"`).
    """
    ids: set[uuid.UUID] = set()
    for value in entry_ids or ():
        key = _uuid_or_none(value)
        if key is None:
            raise _invalid("entryIds", "invalid", "entryIds must be UUIDs.")
        ids.add(key)
    if category is not None:
        category = _enum(category, Category, "category").value
    if not ids and category is None and not sensitive_interactions:
        raise _invalid(
            "entryIds", "required", "Name entries, a category or sensitive interactions."
        )
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise _invalid("limit", "min_value", "limit must be at least 1.")
    arguments = {
        "entryIds": sorted(str(i) for i in ids),
        "category": category,
        "sensitiveInteractions": sensitive_interactions,
        "includeDerived": include_derived,
        "reasonCode": reason_code,
        "limit": limit,
    }
    op = _govern(
        Hook.PRE_DESTRUCTIVE,
        name="memory.hard_delete",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        member=member,
        context=context,
        subject_ids=sorted(str(i) for i in ids),
        arguments=arguments,
    )
    return run_destructive(
        op,
        _hard_delete,
        principal,
        member,
        ids=ids,
        category=category,
        sensitive_interactions=sensitive_interactions,
        include_derived=include_derived,
        reason_code=reason_code,
        limit=limit,
        now=now or timezone.now(),
    )


def _hard_delete(
    principal: Principal,
    member: User,
    *,
    ids: set[uuid.UUID],
    category: str | None,
    sensitive_interactions: bool,
    include_derived: bool,
    reason_code: str,
    limit: int | None,
    now: datetime,
) -> HardDeleteResult:
    with transaction.atomic(durable=True):
        _lock_member(member)
        mine = MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member)
        selection = Q(entry_id__in=ids) if ids else Q(pk__in=[])
        if category is not None:
            selection |= Q(category=category)
        if sensitive_interactions:
            selection |= Q(sensitive_interaction=True)
        targets = set(mine.filter(selection).values_list("entry_id", flat=True))
        if include_derived and targets:
            targets |= _derived_from(member, targets)
        ordered = sorted(targets)
        batch = ordered if limit is None else ordered[:limit]
        revisions = _all_revisions(member, batch)
        if revisions:
            _forget_traces(member, revisions, now=now, reason=ForgottenValue.Reason.HARD_DELETED)
            by_entry: dict[uuid.UUID, list[MemoryEntry]] = {}
            for revision in revisions:
                by_entry.setdefault(revision.entry_id, []).append(revision)
            for entry_id, rows in by_entry.items():
                _audit(
                    principal,
                    member,
                    "iris.memory.entry.hard_deleted",
                    subject_ids=[entry_id, *(r.revision_id for r in rows)],
                    reason_code=reason_code,
                    payload={
                        "entryId": str(entry_id),
                        "revisionCount": len(rows),
                        "category": _audited_category(rows[-1].category),
                        "bodyFingerprints": sorted({r.body_fingerprint for r in rows}),
                    },
                )
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id, member=member, entry_id__in=batch
            ).delete()
    return HardDeleteResult(
        entry_ids=tuple(batch),
        revision_count=len(revisions),
        remaining=len(ordered) > len(batch),
    )


def _derived_from(member: User, sources: set[uuid.UUID]) -> set[uuid.UUID]:
    """Entries whose provenance names (by entry id or revision id) one of `sources` or one
    of their revisions, followed transitively: summaries of deleted memory go with it."""
    rows = list(
        MemoryEntry.objects.filter(tenant_id=member.tenant_id, member=member).values_list(
            "entry_id", "revision_id", "provenance_chain"
        )
    )
    revisions_of: dict[uuid.UUID, set[str]] = {}
    for entry_id, revision_id, _chain in rows:
        revisions_of.setdefault(entry_id, set()).add(str(revision_id))
    refs_of: dict[uuid.UUID, set[str]] = {}
    for entry_id, _revision_id, chain in rows:
        refs_of.setdefault(entry_id, set()).update(
            str(link.get("ref", "")) for link in chain or () if isinstance(link, dict)
        )
    found = set(sources)
    frontier = set(sources)
    while frontier:
        names: set[str] = set()
        for entry_id in frontier:
            names.add(str(entry_id))
            names |= revisions_of.get(entry_id, set())
        frontier = {e for e, refs in refs_of.items() if e not in found and refs & names}
        found |= frontier
    return found - sources


__all__ = [
    "CONFLICT_ANSWERS",
    "ActorMention",
    "ActorsForgetResult",
    "Correction",
    "HardDeleteResult",
    "MemoryDraft",
    "MemoryWriteGate",
    "ProvenanceRef",
    "SuppressionMarker",
    "WriteGate",
    "WriteOutcome",
    "actor_handle_for",
    "actors_forget",
    "memory_change_scope",
    "memory_confirm",
    "memory_conflict_answer",
    "memory_correct",
    "memory_forget",
    "memory_hard_delete",
    "memory_pause",
    "memory_resume",
    "memory_write",
    "off_the_record_set",
    "pending_conflicts_expire",
]
