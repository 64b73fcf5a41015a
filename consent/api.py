"""Consent over REST: the member's events, recording one, and the derived current set.

A surface acts for a member of its own tenant (`userId`); a member's own session may omit
it. Operators get 404: they reach a member's data only through an inspection. JSON names
follow the wire contract (camelCase, enum values as in the spec).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from consent import selectors, services
from consent.enums import (
    CONSENT_TYPES,
    CaptureMethod,
    ConsentStatus,
    LegalBasis,
    OptOutCategory,
    OptOutStatus,
)
from consent.ledger import SOURCE_OF_CAPTURE, LedgerEvent
from consent.models import ConsentEvent
from consent.terms import TERMS, version_of_hash
from governance.acting import acting_for
from governance.errors import ValidationFailed
from governance.fields import EnumField, InstantField, StrictInput
from governance.idempotency import idempotent
from governance.principal import principal_of

# Everything a POST may name as `type`: consent types and opt-out categories (disjoint).
RECORDABLE_TYPES: tuple[str, ...] = (*CONSENT_TYPES, *(c.value for c in OptOutCategory))
STATUSES: tuple[str, ...] = (*(s.value for s in ConsentStatus), *(s.value for s in OptOutStatus))
OPT_OUT_TYPES = frozenset(c.value for c in OptOutCategory)

# Service argument names -> the wire names a client sent, for error bodies.
WIRE_FIELDS: dict[str, str] = {
    "kind": "type",
    "consent_type": "type",
    "legal_basis": "legalBasis",
    "capture_method": "captureMethod",
    "terms_hash": "termsHash",
    "terms_version": "termsVersion",
    "occurred_at": "occurredAt",
}

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Replays return the first answer and write nothing new.",
)


class ConsentEventOutput(serializers.Serializer):
    """One ledger event as stored. An erased event keeps its place in the chain and its
    hashes; its content fields are null and `erased` is true."""

    id = serializers.UUIDField()
    userId = serializers.SerializerMethodField()
    position = serializers.IntegerField()
    kind = serializers.CharField(source="body.kind", allow_null=True)
    type = serializers.CharField(source="body.consent_type", allow_null=True)
    status = serializers.CharField(source="body.status", allow_null=True)
    legalBasis = serializers.CharField(source="body.legal_basis", allow_null=True)
    captureMethod = serializers.CharField(source="body.capture_method", allow_null=True)
    termsHash = serializers.CharField(source="body.terms_hash", allow_null=True)
    termsVersion = serializers.SerializerMethodField()
    witness = serializers.CharField(source="body.witness", allow_null=True)
    occurredAt = serializers.DateTimeField(source="body.occurred_at", allow_null=True)
    recordedAt = serializers.DateTimeField(source="recorded_at")
    recordVersion = serializers.IntegerField(source="record_version")
    fingerprint = serializers.CharField()
    prevHash = serializers.CharField(source="prev_hash")
    chainHash = serializers.CharField(source="chain_hash")
    erased = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.UUID)
    def get_userId(self, row: ConsentEvent) -> str:
        return str(self.context["member"].public_id)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_termsVersion(self, row: ConsentEvent) -> str | None:
        body = selectors.body_of(row)
        return None if body is None else version_of_hash(body.terms_hash)

    def get_erased(self, row: ConsentEvent) -> bool:
        return selectors.body_of(row) is None


class ConsentListApi(APIView):
    """The member's consent events, newest first, a page at a time."""

    class ConsentListQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)
        before = serializers.IntegerField(required=False, min_value=1)
        limit = serializers.IntegerField(
            required=False, min_value=1, max_value=selectors.MAX_PAGE, default=50
        )

    class ConsentListOutput(serializers.Serializer):
        results = ConsentEventOutput(many=True)
        nextBefore = serializers.IntegerField(
            allow_null=True, help_text="Pass as `before` for the next (older) page."
        )

    @extend_schema(parameters=[ConsentListQuery], responses=ConsentListOutput)
    def get(self, request: Request) -> Response:
        query = self.ConsentListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        _, member = acting_for(request, query.validated_data.get("userId"))
        limit = query.validated_data["limit"]
        rows = selectors.member_events(
            tenant_id=member.tenant_id,
            member=member,
            before=query.validated_data.get("before"),
            limit=limit,
        )
        more = len(rows) == limit and rows[-1].position > 1
        return Response(
            {
                "results": ConsentEventOutput(rows, many=True, context={"member": member}).data,
                "nextBefore": rows[-1].position if more else None,
            }
        )


class ConsentRecordApi(APIView):
    """Record one consent event (grant, revoke) or opt-out event (opted-out, opted-in)."""

    class ConsentRecordInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField(required=False)
        type = EnumField(RECORDABLE_TYPES)
        status = EnumField(STATUSES)
        legalBasis = EnumField(tuple(LegalBasis))
        captureMethod = EnumField(tuple(CaptureMethod))
        termsVersion = EnumField(tuple(TERMS), required=False)
        termsHash = serializers.RegexField(r"^[0-9a-f]{64}$", required=False)
        witness = serializers.CharField(required=False, max_length=200)
        occurredAt = InstantField(required=False)

    @extend_schema(
        request=ConsentRecordInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: ConsentEventOutput},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        payload = self.ConsentRecordInput(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        _, member = acting_for(request, data.get("userId"))
        common = {
            "principal": principal_of(request.user),
            "member": member,
            "status": data["status"],
            "legal_basis": data["legalBasis"],
            "capture_method": data["captureMethod"],
            "terms_version": data.get("termsVersion"),
            "terms_hash": data.get("termsHash"),
            "witness": data.get("witness"),
            "occurred_at": data.get("occurredAt"),
        }
        try:
            if data["type"] in OPT_OUT_TYPES:
                row = services.opt_out_record(category=data["type"], **common)
            else:
                row = services.consent_record(consent_type=data["type"], **common)
        except ValidationFailed as exc:
            exc.field = WIRE_FIELDS.get(exc.field or "", exc.field)
            raise
        return Response(ConsentEventOutput(row, context={"member": member}).data, status=201)


class ConsentsApi(ConsentListApi, ConsentRecordApi):
    """`/consents`: GET lists and POST records. One URL routes to one view, so this joins
    the two operations; each keeps its own view class, serializers and schema."""


class ActiveConsentOutput(serializers.Serializer):
    type = serializers.CharField()
    eventId = serializers.UUIDField()
    grantedAt = serializers.DateTimeField()
    # DRF moves declared fields off the class; the stubs see Field.source (str | None).
    source = serializers.CharField()  # type: ignore[assignment]
    captureMethod = serializers.CharField()
    termsVersion = serializers.CharField(allow_null=True)


class ActiveOptOutOutput(serializers.Serializer):
    category = serializers.CharField()
    eventId = serializers.UUIDField()
    optedOutAt = serializers.DateTimeField()


class ConsentEntryOutput(serializers.Serializer):
    category = serializers.CharField()
    grantedAt = serializers.DateTimeField()
    revokedAt = serializers.DateTimeField(allow_null=True)
    # DRF moves declared fields off the class; the stubs see Field.source (str | None).
    source = serializers.CharField()  # type: ignore[assignment]


class ScopePolicyOutput(serializers.Serializer):
    enabled = serializers.BooleanField()
    mode = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())


class ConsentActiveApi(APIView):
    """The derived current set, for a surface's inline consent prompt and the member's
    own session: granted consents, opt-outs in force, the per-category ConsentEntry view,
    and every scope's policy (for a surface, as that surface is allowed to read it)."""

    class ConsentActiveQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    class ConsentActiveOutput(serializers.Serializer):
        consents = ActiveConsentOutput(many=True)
        optOuts = ActiveOptOutOutput(many=True)
        entries = ConsentEntryOutput(many=True)
        scopes = serializers.DictField(child=ScopePolicyOutput())

    @extend_schema(parameters=[ConsentActiveQuery], responses=ConsentActiveOutput)
    def get(self, request: Request) -> Response:
        query = self.ConsentActiveQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        _, member = acting_for(request, query.validated_data.get("userId"))
        principal = principal_of(request.user)
        overview = selectors.consent_overview(
            tenant_id=member.tenant_id, member=member, consumer=principal.surface
        )
        active = {
            "consents": [_active(e) for _, e in sorted(overview.granted.items())],
            "optOuts": [
                {"category": category, "eventId": event.event_id, "optedOutAt": event.occurred_at}
                for category, event in sorted(overview.opted_out.items())
            ],
            # The memory contract's own spelling (consent.ledger.ConsentEntry.as_contract).
            "entries": [entry.as_contract() for entry in overview.entries],
            "scopes": {
                str(scope): {
                    "enabled": policy.enabled,
                    "mode": str(policy.mode),
                    "notes": list(policy.notes),
                }
                for scope, policy in overview.scopes.items()
            },
        }
        return Response(self.ConsentActiveOutput(active).data)


def _active(event: LedgerEvent) -> dict[str, Any]:
    return {
        "type": event.consent_type,
        "eventId": event.event_id,
        "grantedAt": event.occurred_at,
        "source": str(SOURCE_OF_CAPTURE[CaptureMethod(event.capture_method)]),
        "captureMethod": event.capture_method,
        "termsVersion": version_of_hash(event.terms_hash),
    }
