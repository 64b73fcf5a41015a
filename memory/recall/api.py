"""`POST /api/v1/recall`: what a surface (or the member's own session) may recall this turn.

One view, nested input serializer; `memory.recall.service` does the work.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.fields import EnumField, IdentifierField, SharedFieldsInput, StrictInput
from memory.api import _acting, _valid
from memory.enums import RecallSurface, ScopeKind
from memory.recall import pipeline as recall
from memory.recall import service as recall_service

TAG = "memory"


class RecallIn(StrictInput, SharedFieldsInput, serializers.Serializer):
    userId = serializers.UUIDField(required=False)
    scope = serializers.DictField(child=IdentifierField(max_length=200), required=False)
    scopeKey = serializers.CharField(required=False, max_length=700)
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
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "scope" in attrs and "scopeKey" in attrs:
            raise serializers.ValidationError({"scope": "Give scope or scopeKey, not both."})
        if "scope" not in attrs and "scopeKey" not in attrs:
            raise serializers.ValidationError({"scope": "Name the scope (scope or scopeKey)."})
        return attrs


class RecallView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="recall",
        request=RecallIn,
        responses={
            200: inline_serializer(
                "RecallOut",
                {
                    "entries": serializers.ListField(child=serializers.DictField()),
                    "auditEnvelope": serializers.DictField(),
                    "destinationTier": serializers.ChoiceField(
                        ["local", "cloud"],
                        help_text="The tier the answer went to: the surface client's "
                        "registered tier, or the narrower one the request asked for.",
                    ),
                    "withheldByTier": serializers.IntegerField(
                        min_value=0,
                        help_text="Entries withheld because their class may not reach the "
                        "destination tier (counted by reason in "
                        "auditEnvelope.suppressionCounts, the egress-* codes).",
                    ),
                },
            )
        },
    )
    def post(self, request: Request) -> Response:
        principal, member = _acting(request, request.data)
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
