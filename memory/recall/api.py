"""`POST /api/v1/recall`: what a surface (or the member's own session) may recall this turn.

One view, nested input serializer; `memory.recall.service` does the work.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.acting import acting_for, user_id_in
from governance.fields import EnumField, IdentifierField, SharedFieldsInput, StrictInput
from memory.api import _valid
from memory.enums import SCOPE_IDENTIFIERS, RecallSurface, ScopeKind
from memory.recall import pipeline as recall
from memory.recall import service as recall_service
from memory.serializers import SCOPE_SCHEMA, MemoryEntryOut, ProvenanceLinkOut

TAG = "memory"


@extend_schema_field(SCOPE_SCHEMA)
class RecallScopeField(serializers.DictField):
    """The scope as an object; `RecallIn.validate_scope` checks its identifiers."""


class RecallIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    userId = serializers.UUIDField(required=False)
    scope = RecallScopeField(
        child=IdentifierField(max_length=200),
        required=False,
        help_text="The scope to recall from; send this or scopeKey, not both.",
    )
    scopeKey = serializers.CharField(
        required=False,
        max_length=700,
        help_text="The scope as its key, kind and identifiers colon-joined "
        "(`profile:<userId>`); send this or scope, not both.",
    )
    query = serializers.CharField(allow_blank=True, max_length=4000, trim_whitespace=False)
    surface = EnumField([s.value for s in RecallSurface])
    # DRF moves declared fields off the class; the stubs see Field.context (a mapping).
    context = EnumField(sorted(recall.SURFACING_CONTEXTS))  # type: ignore[assignment]
    crisisFrame = serializers.BooleanField(default=False)
    safetyCriticalContext = serializers.BooleanField(default=False)
    consentedCategories = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=64
    )
    limit = serializers.IntegerField(required=False, min_value=0, max_value=50)
    # Omitted: the surface client's registered tier. Given: it may only narrow it.
    destinationTier = EnumField(["local", "cloud"], required=False)
    runId = serializers.UUIDField(required=False)

    def validate_scope(self, value: dict[str, Any]) -> dict[str, Any]:
        kind = value.get("kind")
        if kind not in {k.value for k in ScopeKind}:
            raise serializers.ValidationError("scope.kind must be a scope kind.")
        # A misspelt identifier must not be dropped silently: the scope would widen.
        names = SCOPE_IDENTIFIERS[ScopeKind(kind)]
        if set(value) - {"kind", *names}:
            raise serializers.ValidationError(
                f"A {kind} scope names only kind and {', '.join(names)}.", code="unknown-field"
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "scope" in attrs and "scopeKey" in attrs:
            raise serializers.ValidationError({"scope": "Give scope or scopeKey, not both."})
        if "scope" not in attrs and "scopeKey" not in attrs:
            raise serializers.ValidationError({"scope": "Name the scope (scope or scopeKey)."})
        return attrs


# The answer's schema. `recall.to_wire` writes the answer (its entries through
# `entry_to_wire`, the memory API's own function); these classes describe it, and
# tests/memory/test_entry_shape.py holds the two together.


class RecalledEntryOut(serializers.Serializer):
    """One surfaced entry: the MemoryEntry exactly as `GET memories/{id}` gives it (third
    party text inside the external-content envelope), and why it surfaced."""

    entry = MemoryEntryOut()
    score = serializers.FloatField()
    surfaceRationale = serializers.CharField(  # noqa: N815
        allow_blank=True, help_text="Empty on surfaces whose budget hides the rationale."
    )
    provenanceChain = ProvenanceLinkOut(many=True)  # noqa: N815


class RecallAuditEnvelopeOut(serializers.Serializer):
    """Counts and ids, never content."""

    scopeKey = serializers.CharField()  # noqa: N815
    returnedIds = serializers.ListField(child=serializers.UUIDField())  # noqa: N815
    suppressionCounts = serializers.DictField(  # noqa: N815
        child=serializers.IntegerField(min_value=1),
        help_text="Candidates dropped, by the reason that dropped them.",
    )
    evaluatedCount = serializers.IntegerField(min_value=0)  # noqa: N815


class RecallOut(serializers.Serializer):
    entries = RecalledEntryOut(many=True)
    auditEnvelope = RecallAuditEnvelopeOut()  # noqa: N815
    destinationTier = serializers.ChoiceField(  # noqa: N815
        ["local", "cloud"],
        help_text="The tier the answer went to: the surface client's registered tier, or the "
        "narrower one the request asked for.",
    )
    withheldByTier = serializers.IntegerField(  # noqa: N815
        min_value=0,
        help_text="Entries withheld because their class may not reach the destination tier "
        "(counted by reason in auditEnvelope.suppressionCounts, the egress-* codes).",
    )


class RecallView(APIView):
    @extend_schema(tags=[TAG], operation_id="recall", request=RecallIn, responses={200: RecallOut})
    def post(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        data = _valid(RecallIn, request.data).validated_data
        scope = dict(data.get("scope") or {})
        kind = scope.pop("kind", None)
        categories = data.get("consentedCategories")
        ask = recall_service.RecallAsk(
            scope_kind=kind,
            scope_identifiers=scope if kind else None,
            scope_key=data.get("scopeKey"),
            query=data["query"],
            surface=data["surface"],
            context=data["context"],
            crisis_frame=data["crisisFrame"],
            safety_critical_context=data["safetyCriticalContext"],
            consented_categories=frozenset(categories) if categories is not None else None,
            limit=data.get("limit"),
            destination_tier=data.get("destinationTier"),
            run_id=str(data["runId"]) if data.get("runId") else None,
        )
        return Response(recall_service.recall_resolve(principal=principal, member=member, ask=ask))
