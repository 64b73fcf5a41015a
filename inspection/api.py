"""Operator inspection over REST: request access, move it along its state machine, read the
granted snapshot, replay it.

Operators only, inside their own tenant: a member, a surface, or an operator of another
tenant gets 404 for every route, exactly as for an inspection that does not exist. Each
refusal is a problem+json whose `code` is the reason (`self-grant`, `cross-tenant`,
`no-legitimate-interest`, `grant-expired`, ...), and is on record in the audit chain.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.errors import NotFound
from governance.fields import EnumField, StrictInput
from governance.idempotency import idempotent
from governance.principal import Principal, principal_of
from inspection import selectors, services
from inspection.enums import PATHS, InspectionState, Sensitivity
from inspection.models import Inspection
from inspection.selectors import SnapshotView
from memory.serializers import SCOPE_SCHEMA, MultiActorOut, ScopeField

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Replays return the first answer and write nothing new.",
)
REASON_CODE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
INCIDENT_REFERENCE = r"^iris-inc1\.[0-9a-f]{32}\.[0-9]{1,12}\.[0-9a-f]{16}\.[0-9a-f]{64}$"


def _operator(request: Request) -> Principal:
    principal = principal_of(request.user)
    if not selectors.is_operator(principal):
        raise NotFound("No such inspection.")
    return principal


class InspectionTrailStepOutput(serializers.Serializer):
    fromState = serializers.CharField(source="from_state", allow_blank=True)
    toState = serializers.CharField(source="to_state")
    occurredAt = serializers.DateTimeField(source="occurred_at")
    actorKind = serializers.CharField(source="actor_kind")
    actorId = serializers.CharField(source="actor_id")
    actorRoles = serializers.ListField(child=serializers.CharField(), source="actor_roles")
    reasonCode = serializers.CharField(source="reason_code", allow_blank=True)


class InspectionOutput(serializers.Serializer):
    """One inspection as the tenant's operators see it: never memory content."""

    id = serializers.UUIDField()
    userId = serializers.UUIDField(source="member.public_id")
    requesterId = serializers.UUIDField(source="requester.public_id")
    requesterRoles = serializers.ListField(child=serializers.CharField(), source="requester_roles")
    reviewerId = serializers.UUIDField(source="reviewer.public_id", allow_null=True)
    reviewerRoles = serializers.ListField(child=serializers.CharField(), source="reviewer_roles")
    state = serializers.CharField()
    path = serializers.CharField(allow_blank=True)
    sensitivity = serializers.CharField()
    scope = serializers.SerializerMethodField()
    reasonCode = serializers.CharField(source="reason_code")
    justification = serializers.CharField()
    consentSnapshotId = serializers.UUIDField(source="consent_snapshot_id", allow_null=True)
    requestedAt = serializers.DateTimeField(source="requested_at")
    pendingUntil = serializers.DateTimeField(source="pending_until")
    grantedAt = serializers.DateTimeField(source="granted_at", allow_null=True)
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    carveOut = serializers.BooleanField(source="carve_out")
    entryCount = serializers.IntegerField(source="entry_count")
    trail = InspectionTrailStepOutput(many=True, source="ordered_trail")

    @extend_schema_field(SCOPE_SCHEMA)
    def get_scope(self, row: Inspection) -> dict[str, Any]:
        return {"kind": row.scope_kind, **row.scope_identifiers}


def inspection_out(row: Inspection) -> dict[str, Any]:
    row.ordered_trail = list(row.trail.order_by("position"))  # type: ignore[attr-defined]
    return InspectionOutput(row).data


class InspectionListApi(APIView):
    """The tenant's inspections, newest first; `open=true` for those still open."""

    class InspectionListQuery(serializers.Serializer):
        state = EnumField(tuple(InspectionState), required=False)
        open = serializers.BooleanField(required=False, default=False)

    class InspectionListOutput(serializers.Serializer):
        results = InspectionOutput(many=True)

    @extend_schema(
        operation_id="inspections_list",
        parameters=[InspectionListQuery],
        responses=InspectionListOutput,
    )
    def get(self, request: Request) -> Response:
        principal = _operator(request)
        query = self.InspectionListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.inspections_for(
            principal,
            state=query.validated_data.get("state"),
            open_only=query.validated_data["open"],
        )[:200]
        return Response({"results": [inspection_out(r) for r in rows]})


class InspectionRequestApi(APIView):
    """Request access to one member's memory on a path, with a justification. A sensitive
    inspection cites the member's current consent snapshot; an incident escalation cites
    its signed incident reference."""

    class InspectionRequestInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField()
        path = EnumField(tuple(p.value for p in sorted(PATHS)))
        justification = serializers.CharField(
            allow_blank=True, max_length=1000, trim_whitespace=False
        )
        scope = ScopeField(required=False)
        sensitivity = EnumField(tuple(Sensitivity), required=False)
        reasonCode = serializers.RegexField(REASON_CODE, required=False, max_length=64)
        incidentReference = serializers.RegexField(INCIDENT_REFERENCE, required=False)
        consentSnapshotId = serializers.UUIDField(required=False)

    @extend_schema(
        operation_id="inspections_request",
        request=InspectionRequestInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: InspectionOutput},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal = _operator(request)
        data_in = self.InspectionRequestInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        member = selectors.member_of_tenant(principal, data["userId"])
        scope = None
        if "scope" in data:
            kind, identifiers = data["scope"]
            scope = {"kind": kind, **identifiers}
        row = services.inspection_request(
            principal=principal,
            member=member,
            path=data["path"],
            justification=data["justification"],
            scope=scope,
            sensitivity=data.get("sensitivity", Sensitivity.STANDARD.value),
            reason_code=data.get("reasonCode"),
            incident_reference=data.get("incidentReference"),
            consent_snapshot_id=data.get("consentSnapshotId"),
        )
        return Response(inspection_out(row), status=201)


class InspectionsApi(InspectionListApi, InspectionRequestApi):
    """`/inspections`: GET lists and POST requests."""


class InspectionDetailApi(APIView):
    @extend_schema(operation_id="inspections_get", responses=InspectionOutput)
    def get(self, request: Request, inspection_id: uuid.UUID) -> Response:
        row = selectors.inspection_get(_operator(request), inspection_id)
        return Response(inspection_out(row))


class InspectionTransitionApi(APIView):
    """Move an inspection: `granted` or `denied` (a reviewer other than the requester;
    the requester may withdraw with `denied`), `closed` (with `carveOut` only by trust and
    safety on an incident escalation)."""

    class InspectionTransitionInput(StrictInput, serializers.Serializer):
        to = EnumField(tuple(InspectionState))
        reasonCode = serializers.RegexField(REASON_CODE, required=False, max_length=64)
        incidentReference = serializers.RegexField(INCIDENT_REFERENCE, required=False)
        consentSnapshotId = serializers.UUIDField(required=False)
        carveOut = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        operation_id="inspections_transition",
        request=InspectionTransitionInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={200: InspectionOutput},
    )
    @idempotent
    def post(self, request: Request, inspection_id: uuid.UUID) -> Response:
        principal = _operator(request)
        data_in = self.InspectionTransitionInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        row = services.inspection_transition(
            principal=principal,
            inspection_id=inspection_id,
            to=data["to"],
            reason_code=data.get("reasonCode"),
            incident_reference=data.get("incidentReference"),
            consent_snapshot_id=data.get("consentSnapshotId"),
            carve_out=data["carveOut"],
        )
        return Response(inspection_out(row))


class InspectionSnapshotItemOutput(serializers.Serializer):
    entryId = serializers.UUIDField()
    revisionId = serializers.UUIDField()
    category = serializers.CharField()
    forgotten = serializers.BooleanField()
    forgottenSince = serializers.CharField(required=False, allow_null=True)
    scope = ScopeField(required=False)
    body = serializers.CharField(required=False)
    origin = serializers.CharField(required=False)
    revision = serializers.IntegerField(required=False)
    multiActor = MultiActorOut(required=False, allow_null=True)
    createdAt = serializers.CharField(required=False)
    updatedAt = serializers.CharField(required=False)


class InspectionSnapshotOutput(serializers.Serializer):
    inspectionId = serializers.UUIDField()
    path = serializers.CharField()
    grantedAt = serializers.DateTimeField(allow_null=True)
    expiresAt = serializers.DateTimeField(allow_null=True)
    items = InspectionSnapshotItemOutput(many=True)


def snapshot_out(view: SnapshotView) -> dict[str, Any]:
    return {
        "inspectionId": view.inspection_id,
        "path": view.path,
        "grantedAt": view.granted_at,
        "expiresAt": view.expires_at,
        "items": view.items,
    }


class InspectionSnapshotApi(APIView):
    """The granted snapshot, for the operator who asked, while the grant lasts."""

    @extend_schema(operation_id="inspections_snapshot", responses=InspectionSnapshotOutput)
    def get(self, request: Request, inspection_id: uuid.UUID) -> Response:
        view = services.inspection_read_snapshot(
            principal=_operator(request), inspection_id=inspection_id
        )
        return Response(snapshot_out(view))


class InspectionReplayApi(APIView):
    """The granted snapshot as it was seen, for an auditor of the tenant."""

    @extend_schema(operation_id="inspections_replay", responses=InspectionSnapshotOutput)
    def get(self, request: Request, inspection_id: uuid.UUID) -> Response:
        view = services.inspection_replay(principal=_operator(request), inspection_id=inspection_id)
        return Response(snapshot_out(view))
