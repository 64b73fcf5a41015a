"""What every memory service shares: input validation, the consent gate and the
governance call, revision rows and their audit events, and tombstoning."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import IntegrityError, connection, transaction

from consent.enums import (
    SURFACES,
    AdapterScope,
    Category,
    ConsentType,
    category_consent_type,
    is_sensitive,
)
from consent.policy import blueprint
from consent.selectors import consent_overview
from governance import keys, plainsql
from governance.actions import AuditAction
from governance.audit import audit_record
from governance.errors import Conflict, NotFound, ValidationFailed, invalid
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
)
from governance.principal import Principal
from governance.runs import content_fingerprint, runs_forget_content
from memory import selectors
from memory.enums import (
    ADAPTER_TO_CANONICAL,
    CANONICAL_DEFAULT_ADAPTER,
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
    PendingConflict,
)
from memory.recall.pipeline import rfc3339
from memory.rules.conflicts import (
    conflict_key,
    derive_subject,
    normalise_subject,
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
)
from memory.rules.scopes import ScopeRuleError, key_from, validate_scope
from memory.selectors import conflict_fingerprint as _conflict_fingerprint
from memory.selectors import text_fingerprint, value_fingerprint
from memory.services.types import (
    ACTOR_NAME_MAX_LENGTH,
    IDENTIFIER_MAX_LENGTH,
    POLICY_ID,
    PROVENANCE_MAX_LINKS,
    PROVENANCE_REF_MAX_LENGTH,
    ActorMention,
    MemoryDraft,
    ProvenanceRef,
    SuppressionMarker,
    WriteGate,
    WriteOutcome,
)


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


def _operation(
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
) -> Operation:
    """The operation the kernel is asked about, for this member.

    `arguments` are what the call needs to be issued again (ids and codes only): with
    `subject_ids` they make its fingerprint for approvals, the ledger and loop detection.
    """
    merged = {k: v for k, v in (context or {}).items() if k in GOVERNANCE_CONTEXT_KEYS}
    merged.update(attributes or {})
    if arguments is not None:
        merged["arguments"] = dict(arguments)
    return Operation(
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


def _govern(hook: Hook, *, pending: list[dict[str, Any]] | None = None, **fields: Any) -> Operation:
    """Ask the kernel (outside any transaction) about `_operation(**fields)`; returns the
    allowed operation. The allow is queued in `pending` for `record_pending` in the
    caller's transaction, so that it commits with what it allowed."""
    op = _operation(**fields)
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
        raise invalid(
            exc,
            field=f"scope.{exc.field}",
            rule="invalid_choice" if exc.rule == "unknown-kind" else None,
            detail=f"scope.{exc.field}: {exc.rule}",
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
    return scope_kind, clean, key_from(scope_kind, clean)


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
    action: AuditAction,
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
    """Take the member whole: one at a time among the services that change many of a
    member's rows or check them against each other, and after every memory write in flight
    (`_share_member`). PostgreSQL row lock; SQLite serialises writers."""
    _lock_member_row(member, _LOCK_MEMBER_SQL)


def _share_member(member: User) -> None:
    """Let one member's memory writes go on side by side, while whatever takes the member
    whole (forget, move, correct: `_lock_member`) still waits for the writes in flight,
    and they for it (PostgreSQL FOR SHARE against FOR UPDATE). Writes of one fact then take
    turns with `_lock_fact`."""
    _lock_member_row(member, _SHARE_MEMBER_SQL)


def _lock_member_row(member: User, sql: str) -> None:
    if not transaction.get_connection().features.has_select_for_update:
        return
    with plainsql.cursor() as cursor:
        cursor.execute(sql, [member.pk])
        if cursor.fetchone() is None:
            raise NotFound("No such member.")


def _lock_fact(member: User, key: str) -> None:
    """Serialise the writers of one fact (a conflict key) of one member, so that two of
    them cannot both see "nothing stored yet" (a transaction-level advisory lock; its
    two-number form keeps it apart from the one-number locks, e.g. the audit sealer's)."""
    if not transaction.get_connection().features.has_select_for_update:
        return
    with plainsql.cursor() as cursor:
        cursor.execute(_LOCK_FACT_SQL, [f"{member.tenant_id}:{member.pk}:{key}"])


_LOCK_MEMBER_SQL = f"SELECT id FROM {User._meta.db_table} WHERE id = %s FOR UPDATE"  # noqa: S608
_SHARE_MEMBER_SQL = f"SELECT id FROM {User._meta.db_table} WHERE id = %s FOR SHARE"  # noqa: S608
_LOCK_FACT_SQL = "SELECT pg_advisory_xact_lock(hashtext('iris-memory-write'), hashtext(%s))"


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
    *,
    prev: MemoryEntry | None,
    now: datetime,
    fields: Mapping[str, Any],
    encoded: Mapping[str, bytes] | None = None,
) -> MemoryEntry:
    """Write the next revision of `prev` (or the first revision of a new entry).

    The predecessor flips to superseded first (the partial unique index allows one
    current revision per entry); if it is no longer current, someone else changed the
    entry since it was read and this change is refused rather than lost. `encoded`: the
    body's vector, computed before the member's lock (`recall.service.encode_ahead`).
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
    # With the hybrid ranker on, each revision's vector is computed at write time and
    # written by the revision's own INSERT (plain SQL, see governance.plainsql: every
    # write inserts one, and no signals are used).
    from memory.recall.service import fresh_embeddings, warm_after_change

    vectors = fresh_embeddings([entry], now=now, encoded=encoded)
    plainsql.insert(MemoryEntry, [entry], along=vectors)
    warm_after_change(entry)
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
        AuditAction.MEMORY_ENTRY_FORGOTTEN,
        subject_ids=[tombstone.entry_id, tombstone.revision_id],
        reason_code=reason_code,
        payload=_revision_payload(tombstone),
    )
    return tombstone


def _screened_text(body: str, note: str) -> str:
    return body if not note else f"{body}\n{note}"


_LIVE_ORDER = {Lifecycle.ACTIVE: 0, Lifecycle.PAUSED: 0, Lifecycle.DRAFT: 1}


# The fact's revisions first, by the conflict key's index, then the rest of the
# conditions: left to itself, a planner without fresh statistics walked every current row
# of the member's scope (the scope-key index) at each write, 5,000 rows a write on average
# as one member grew to 10,000 (docs/decisions/memory.md, "The fact's revisions first").
_FACT_REVISIONS = (
    f"SELECT * FROM {MemoryEntry._meta.db_table} "  # noqa: S608
    "WHERE tenant_id = %s AND member_id = %s AND category = %s AND subject = %s"
)
_CURRENT_FOR_KEY_WHERE = (
    "is_current AND scope_key = %s AND read_only_copy_of IS NULL AND lifecycle IN (%s, %s, %s)"
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
        category,
        subject,
        scope_key,
        *_LIVE_ORDER,
        *([handle] if handle else []),
    ]
    if adapter_scopes is not None:
        if not adapter_scopes:
            return None
        where += f" AND adapter_scope IN ({', '.join(['%s'] * len(adapter_scopes))})"
        params.extend(sorted(adapter_scopes))
    # Every write asks this, under the member's lock: plain SQL (see governance.plainsql).
    fence = " OFFSET 0" if connection.vendor == "postgresql" else ""
    rows = plainsql.select(MemoryEntry, where, params, lock=True, source=_FACT_REVISIONS + fence)
    if not rows:
        return None
    rows.sort(key=lambda e: (_LIVE_ORDER[Lifecycle(e.lifecycle)], -e.updated_at.timestamp()))
    return rows[0]


def _written(
    principal: Principal,
    member: User,
    entry: MemoryEntry,
    *,
    reason: str,
    action: AuditAction = AuditAction.MEMORY_ENTRY_WRITTEN,
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
