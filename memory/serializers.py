"""The memory wire contract: camelCase, enum values as the spec spells them, RFC 3339 UTC.

Input serializers check shape and type and name the field and rule of every error; the
services re-check the rules, so pages and jobs get the same answers. Output serializers
render a stored revision as the spec's MemoryEntry, plus `revisionId` (the id that a later
revision's `supersedes` names; see docs/decisions/memory.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.settings import api_settings

from consent.enums import SURFACES, AdapterScope, Category, ConsentSource
from governance.fields import (
    EnumField,
    IdentifierField,
    InstantField,
    SharedFieldsInput,
    StrictInput,
)
from governance.text import TextRuleError, check_identifier_text, safe_field_name
from memory.enums import (
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
    MemoryEntry,
    OffTheRecord,
)
from memory.recall.pipeline import entry_to_wire, rfc3339
from memory.rules.masking import RELATIONSHIP_NOTE_MAX_LENGTH
from memory.rules.scopes import ScopeRuleError, validate_scope
from memory.selectors import candidate_of
from memory.services import (
    CONFLICT_ANSWERS,
    ActorMention,
    Correction,
    MemoryDraft,
    ProvenanceRef,
    SuppressionMarker,
)

# ------------------------------------------------------------------------------ fields


class Rfc3339Field(InstantField):
    """RFC 3339 in and out: an offset is required on input (`governance.fields.InstantField`);
    output is UTC with `Z`."""

    # DRF's own DateTimeField also answers None for None; the stubs declare `-> str`.
    def to_representation(self, value: datetime | None) -> str | None:  # type: ignore[override]
        return None if value is None else rfc3339(value)


def _scope_variant(kind: ScopeKind) -> dict[str, Any]:
    names = SCOPE_IDENTIFIERS[kind]
    return {
        "type": "object",
        "title": f"{kind.value} scope",
        "properties": {
            "kind": {"type": "string", "enum": [kind.value]},
            **{name: {"type": "string", "maxLength": 128} for name in names},
        },
        "required": ["kind", *names],
        "additionalProperties": False,
    }


# One variant per kind, each with exactly the identifiers that kind needs (`userId` is
# always the member; `tenantId` the member's tenant).
SCOPE_SCHEMA: dict[str, Any] = {
    "oneOf": [_scope_variant(kind) for kind in ScopeKind],
    "description": "The scope's kind and exactly the identifiers it needs: "
    + "; ".join(f"`{k.value}`: {', '.join(SCOPE_IDENTIFIERS[k])}" for k in ScopeKind)
    + ". `userId` is the member; `tenantId` the member's tenant.",
}


@extend_schema_field(SCOPE_SCHEMA)
class ScopeField(serializers.Field):
    """`{kind, ...identifiers}`; errors name `scope.<identifier>` and the rule."""

    def to_internal_value(self, data: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("scope must be an object.", code="invalid")
        kind = data.get("kind")
        identifiers = {k: v for k, v in data.items() if k != "kind"}
        allowed = [k.value for k in ScopeKind]
        if kind not in allowed:
            message = f"Not an allowed value; allowed values: {', '.join(allowed)}."
            raise serializers.ValidationError(
                {"kind": [ErrorDetail(message, code="invalid_choice")]}
            )
        try:
            validate_scope(kind, identifiers)
        except ScopeRuleError as exc:
            # An unexpected key is the caller's text: named back only when it looks like a
            # field name.
            name = safe_field_name(exc.field)
            message = f"{name}: {exc.rule}" if name else f"A scope identifier: {exc.rule}"
            raise serializers.ValidationError(
                {name or api_settings.NON_FIELD_ERRORS_KEY: [ErrorDetail(message, code=exc.rule)]}
            ) from None
        for name, value in identifiers.items():
            try:
                check_identifier_text(value)
            except TextRuleError as exc:
                raise serializers.ValidationError(
                    {name: [ErrorDetail(exc.message, code=exc.rule)]}
                ) from None
        return kind, identifiers

    def to_representation(self, value: Any) -> dict[str, Any]:
        kind, identifiers = value
        return {"kind": kind, **identifiers}


# ------------------------------------------------------------------------------ output


def _choices(values: Any) -> list[str]:
    return [str(v) for v in values]


class SuppressionOut(serializers.Serializer):
    reason = serializers.ChoiceField(_choices(SuppressionReason), source="suppression_reason")
    startedAt = Rfc3339Field(source="suppression_started_at")  # noqa: N815
    endsAt = Rfc3339Field(source="suppression_ends_at", allow_null=True)  # noqa: N815
    notes = serializers.CharField(source="suppression_notes")


class MultiActorOut(serializers.Serializer):
    actorHandle = serializers.CharField(source="actor_handle")  # noqa: N815
    relationshipNote = serializers.CharField(source="relationship_note")  # noqa: N815
    sensitiveInteraction = serializers.BooleanField(source="sensitive_interaction")  # noqa: N815


# The stored ConsentEntry and provenance dicts already hold their moments as RFC 3339 text,
# which DRF's DateTimeField hands through unchanged; the schema still says `date-time`.


class ConsentEntryOut(serializers.Serializer):
    category = serializers.ChoiceField(_choices(Category))
    grantedAt = serializers.DateTimeField()  # noqa: N815
    revokedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815
    # DRF moves declared fields off the class; the stubs see Field.source (str | None).
    source = serializers.ChoiceField(_choices(ConsentSource))  # type: ignore[assignment]


class ProvenanceLinkOut(serializers.Serializer):
    kind = serializers.ChoiceField(_choices(ProvenanceKind))
    ref = serializers.CharField()
    capturedAt = serializers.DateTimeField()  # noqa: N815


class MemoryEntryOut(serializers.Serializer):
    """One revision as the spec's MemoryEntry. `userId` comes from the context's member
    when given (no query per row)."""

    id = serializers.UUIDField(source="entry_id")
    revisionId = serializers.UUIDField(source="revision_id")  # noqa: N815
    tenantId = serializers.UUIDField(source="tenant_id")  # noqa: N815
    userId = serializers.SerializerMethodField()  # noqa: N815
    scope = serializers.SerializerMethodField()
    scopeKey = serializers.CharField(source="scope_key")  # noqa: N815
    category = serializers.ChoiceField(_choices(Category))
    body = serializers.CharField()
    subject = serializers.SerializerMethodField()
    origin = serializers.ChoiceField(_choices(Origin))
    lifecycle = serializers.ChoiceField(_choices(Lifecycle))
    suppression = serializers.SerializerMethodField()
    multiActor = serializers.SerializerMethodField()  # noqa: N815
    consents = ConsentEntryOut(many=True)
    provenanceChain = ProvenanceLinkOut(source="provenance_chain", many=True)  # noqa: N815
    referenceCount = serializers.IntegerField(source="reference_count")  # noqa: N815
    lastReferencedAt = Rfc3339Field(source="last_referenced_at", allow_null=True)  # noqa: N815
    createdAt = Rfc3339Field(source="created_at")  # noqa: N815
    updatedAt = Rfc3339Field(source="updated_at")  # noqa: N815
    revision = serializers.IntegerField()
    supersedes = serializers.UUIDField(allow_null=True)

    def get_userId(self, entry: MemoryEntry) -> str:  # noqa: N802
        member = self.context.get("member")
        if member is not None and member.pk == entry.member_id:
            return str(member.public_id)
        return str(entry.member.public_id)

    @extend_schema_field(ScopeField)
    def get_scope(self, entry: MemoryEntry) -> dict[str, Any]:
        return {"kind": entry.scope_kind, **entry.scope_identifiers}

    def get_subject(self, entry: MemoryEntry) -> str | None:
        return entry.subject or None

    @extend_schema_field(SuppressionOut(allow_null=True))
    def get_suppression(self, entry: MemoryEntry) -> dict[str, Any] | None:
        return None if entry.suppression_reason is None else SuppressionOut(entry).data

    @extend_schema_field(MultiActorOut(allow_null=True))
    def get_multiActor(self, entry: MemoryEntry) -> dict[str, Any] | None:  # noqa: N802
        return None if entry.actor_handle is None else MultiActorOut(entry).data


def entry_contract(entry: MemoryEntry, *, member: Any = None) -> dict[str, Any]:
    """One revision as the wire's MemoryEntry: `memory.recall.pipeline.entry_to_wire`, the
    one function that writes the shape for every route, over the revision as recall sees it
    (`MemoryEntryOut` above stays the schema; tested equal in
    tests/memory/test_roundtrip_fixture.py). Rendered by hand because every write answers
    with one and the serializer's per-call field copies cost more than the write's own
    queries."""
    if member is not None and member.pk == entry.member_id:
        user_id = str(member.public_id)
    else:
        user_id = str(entry.member.public_id)
    return entry_to_wire(candidate_of(entry, user_id=user_id), envelope_external=False)


class MemoryPageOut(serializers.Serializer):
    results = MemoryEntryOut(many=True)
    next = serializers.CharField(allow_null=True)


class PromotionOut(serializers.Serializer):
    allowed = serializers.BooleanField()
    reason = serializers.CharField()
    distinctSessions = serializers.IntegerField(allow_null=True)  # noqa: N815


class NotWrittenOut(serializers.Serializer):
    """A write that stored nothing, and why."""

    written = serializers.BooleanField()
    reason = serializers.CharField()
    entry = MemoryEntryOut(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())
    promotion = PromotionOut(allow_null=True)


class ForgottenOut(serializers.Serializer):
    id = serializers.UUIDField()
    revision = serializers.IntegerField()
    lifecycle = serializers.CharField()


class ActorsForgottenOut(serializers.Serializer):
    actorHandle = serializers.CharField(allow_null=True)  # noqa: N815
    forgottenEntryIds = serializers.ListField(child=serializers.UUIDField())  # noqa: N815
    handleRemoved = serializers.BooleanField()  # noqa: N815


class OffTheRecordOut(serializers.Serializer):
    active = serializers.BooleanField()
    sessionId = serializers.CharField(allow_null=True)  # noqa: N815
    surface = serializers.CharField(allow_null=True)
    since = Rfc3339Field(allow_null=True)


def off_the_record_contract(
    row: OffTheRecord | None, *, session_id: str | None, surface: str | None
) -> dict[str, Any]:
    return {
        "active": row is not None,
        "sessionId": (row.session_id or None) if row else session_id,
        "surface": (row.surface or None) if row else surface,
        "since": rfc3339(row.since) if row else None,
    }


# ------------------------------------------------------------------------------- input


class UserIdIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    userId = serializers.UUIDField(required=False)  # noqa: N815


class GovernedIn(UserIdIn):
    """What a mutating call may tell the governance kernel about itself."""

    runId = serializers.UUIDField(required=False)  # noqa: N815
    approvalId = serializers.UUIDField(required=False)  # noqa: N815
    canPause = serializers.BooleanField(required=False)  # noqa: N815

    def governance_context(self) -> dict[str, Any]:
        data = self.validated_data
        context: dict[str, Any] = {}
        if data.get("runId"):
            context["run_id"] = str(data["runId"])
        if data.get("approvalId"):
            context["approval_id"] = str(data["approvalId"])
        if "canPause" in data:
            context["can_pause"] = data["canPause"]
        return context


class MultiActorIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    actorName = serializers.CharField(required=False, max_length=200, write_only=True)  # noqa: N815
    actorHandle = serializers.CharField(required=False, max_length=40)  # noqa: N815
    relationshipNote = serializers.CharField(  # noqa: N815
        required=False, allow_blank=True, default="", max_length=RELATIONSHIP_NOTE_MAX_LENGTH
    )
    sensitiveInteraction = serializers.BooleanField(required=False, default=False)  # noqa: N815

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("actorName" in data) == ("actorHandle" in data):
            raise serializers.ValidationError(
                {
                    "actorName": [
                        ErrorDetail(
                            "Send exactly one of actorName and actorHandle.",
                            code="one-of-actorName-actorHandle",
                        )
                    ]
                }
            )
        return data

    def to_mention(self, data: dict[str, Any]) -> ActorMention:
        return ActorMention(
            relationship_note=data.get("relationshipNote", ""),
            sensitive_interaction=data.get("sensitiveInteraction", False),
            actor_name=data.get("actorName"),
            actor_handle=data.get("actorHandle"),
        )


class SuppressionIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    reason = EnumField([r.value for r in SuppressionReason])
    startedAt = Rfc3339Field()  # noqa: N815
    endsAt = Rfc3339Field(required=False, allow_null=True, default=None)  # noqa: N815
    notes = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=SUPPRESSION_NOTES_MAX_LENGTH
    )


class ProvenanceLinkIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    kind = EnumField([k.value for k in ProvenanceKind])
    ref = serializers.CharField(max_length=200)
    capturedAt = Rfc3339Field()  # noqa: N815


class MemoryWriteIn(GovernedIn):
    scope = ScopeField()
    adapterScope = EnumField([a.value for a in AdapterScope], required=False)  # noqa: N815
    category = EnumField([c.value for c in Category])
    body = serializers.CharField(max_length=BODY_MAX_LENGTH)
    subject = serializers.CharField(required=False, max_length=SUBJECT_MAX_LENGTH)
    origin = EnumField([o.value for o in Origin])
    sessionId = IdentifierField(required=False, max_length=SESSION_ID_MAX_LENGTH)  # noqa: N815
    multiActor = MultiActorIn(required=False, allow_null=True)  # noqa: N815
    suppression = SuppressionIn(required=False, allow_null=True)
    # `many_init` is what `many=True` calls; the stubs do not let a serializer take the
    # list's max_length directly.
    provenanceChain = ProvenanceLinkIn.many_init(required=False, max_length=50)  # noqa: N815

    def to_draft(self) -> MemoryDraft:
        data = self.validated_data
        kind, identifiers = data["scope"]
        mention = None
        if data.get("multiActor"):
            mention = MultiActorIn().to_mention(data["multiActor"])
        suppression = None
        if data.get("suppression"):
            s = data["suppression"]
            suppression = SuppressionMarker(
                reason=s["reason"], started_at=s["startedAt"], ends_at=s["endsAt"], notes=s["notes"]
            )
        return MemoryDraft(
            scope_kind=kind,
            scope_identifiers=identifiers,
            category=data["category"],
            body=data["body"],
            origin=data["origin"],
            subject=data.get("subject"),
            adapter_scope=data.get("adapterScope"),
            session_id=data.get("sessionId"),
            multi_actor=mention,
            suppression=suppression,
            provenance_chain=[
                ProvenanceRef(kind=p["kind"], ref=p["ref"], captured_at=p["capturedAt"])
                for p in data.get("provenanceChain", [])
            ],
        )


class MultiActorPatchIn(StrictInput, serializers.Serializer):
    relationshipNote = serializers.CharField(  # noqa: N815
        required=False, allow_blank=True, max_length=RELATIONSHIP_NOTE_MAX_LENGTH
    )
    sensitiveInteraction = serializers.BooleanField(required=False)  # noqa: N815


class MemoryCorrectIn(GovernedIn):
    body = serializers.CharField(required=False, max_length=BODY_MAX_LENGTH)
    subject = serializers.CharField(required=False, max_length=SUBJECT_MAX_LENGTH)
    category = EnumField([c.value for c in Category], required=False)
    multiActor = MultiActorPatchIn(required=False)  # noqa: N815

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not ({"body", "subject", "category"} & set(data) or data.get("multiActor")):
            raise serializers.ValidationError(
                {"body": [ErrorDetail("Send at least one field to correct.", code="required")]}
            )
        return data

    def to_correction(self) -> Correction:
        data = self.validated_data
        actor = data.get("multiActor") or {}
        return Correction(
            body=data.get("body"),
            subject=data.get("subject"),
            category=data.get("category"),
            relationship_note=actor.get("relationshipNote"),
            sensitive_interaction=actor.get("sensitiveInteraction"),
        )


class MemoryPauseIn(GovernedIn):
    endsAt = Rfc3339Field(required=False, allow_null=True, default=None)  # noqa: N815
    notes = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=SUPPRESSION_NOTES_MAX_LENGTH
    )


class MemoryScopeIn(GovernedIn):
    scope = ScopeField()


class ConflictAnswerIn(GovernedIn):
    answer = EnumField(CONFLICT_ANSWERS)


class ActorsForgetIn(GovernedIn):
    actorName = serializers.CharField(required=False, max_length=200)  # noqa: N815
    actorHandle = serializers.CharField(required=False, max_length=40)  # noqa: N815

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("actorName" in data) == ("actorHandle" in data):
            raise serializers.ValidationError(
                {
                    "actorName": [
                        ErrorDetail(
                            "Send exactly one of actorName and actorHandle.",
                            code="one-of-actorName-actorHandle",
                        )
                    ]
                }
            )
        return data


class OffTheRecordIn(GovernedIn):
    sessionId = IdentifierField(required=False, max_length=SESSION_ID_MAX_LENGTH)  # noqa: N815
    surface = EnumField(SURFACES, required=False)


class MemoryListIn(UserIdIn):
    scope = serializers.CharField(required=False, max_length=800)
    category = EnumField([c.value for c in Category], required=False)
    lifecycle = EnumField([lc.value for lc in Lifecycle], required=False)
    cursor = serializers.CharField(required=False, max_length=400)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)
