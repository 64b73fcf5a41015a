"""Data rights over REST: file, follow and move requests; fetch an export's bundle.

A surface acts for a member of its own tenant (`userId`); a member's own session may omit
it. An operator with the legal role may move any request of its tenant (transition,
extend); everyone else who may not see a request gets 404.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dsar import deletion, export, selectors, services
from dsar.enums import RequestKind, RequestState, VerificationMethod
from dsar.models import DataRightsRequest
from governance.acting import acting_for, user_id_in
from governance.fields import EnumField, StrictInput
from governance.idempotency import idempotent
from governance.models import User
from governance.principal import Principal, principal_of

TAG = "data-rights"

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Replays return the first answer and write nothing new.",
)


class TrailStepOutput(serializers.Serializer):
    fromState = serializers.CharField(source="from_state", allow_blank=True)
    toState = serializers.CharField(source="to_state")
    occurredAt = serializers.DateTimeField(source="occurred_at")
    actorKind = serializers.CharField(source="actor_kind")
    reasonCode = serializers.CharField(source="reason_code", allow_blank=True)


class DataRightsRequestOutput(serializers.Serializer):
    """One request, as the member and the legal queue see it."""

    id = serializers.UUIDField()
    userId = serializers.UUIDField(source="member.public_id")
    kind = serializers.CharField()
    state = serializers.CharField()
    payload = serializers.JSONField(help_text="The validated payload of its kind.")
    jurisdiction = serializers.CharField()
    receivedAt = serializers.DateTimeField(source="received_at")
    verifyBy = serializers.DateTimeField(source="verify_by")
    dueAt = serializers.DateTimeField(source="due_at")
    confirmBy = serializers.DateTimeField(source="confirm_by", allow_null=True)
    verifiedAt = serializers.DateTimeField(source="verified_at", allow_null=True)
    verificationMethod = serializers.CharField(source="verification_method", allow_blank=True)
    extendedAt = serializers.DateTimeField(source="extended_at", allow_null=True)
    extensionReason = serializers.CharField(source="extension_reason", allow_blank=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    resultFingerprint = serializers.CharField(source="result_fingerprint", allow_blank=True)
    graceUntil = serializers.DateTimeField(source="grace_until", allow_null=True)
    trail = TrailStepOutput(many=True, source="ordered_trail")


def request_out(request: DataRightsRequest) -> dict[str, Any]:
    request.ordered_trail = list(request.trail.order_by("position"))  # type: ignore[attr-defined]
    return DataRightsRequestOutput(request).data


def _caller(request: Request, user_id: Any) -> tuple[Principal, User | None]:
    """Operators (legal) act on a request of their tenant; everyone else for a member."""
    principal = principal_of(request.user)
    if principal.kind == "operator":
        return principal, None
    return acting_for(request, user_id)


class DataRightsListApi(APIView):
    """The member's requests, newest first."""

    class DataRightsListQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    class DataRightsListOutput(serializers.Serializer):
        results = DataRightsRequestOutput(many=True)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_list",
        parameters=[DataRightsListQuery],
        responses=DataRightsListOutput,
    )
    def get(self, request: Request) -> Response:
        query = self.DataRightsListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        _, member = acting_for(request, query.validated_data.get("userId"))
        rows = selectors.member_requests(member=member)
        return Response({"results": [request_out(r) for r in rows]})


class DataRightsOpenApi(APIView):
    """File a request: delete, export or access. A second open request of a kind is 409
    `open-request-exists` naming the open one (`openRequestId`)."""

    class DataRightsOpenInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField(required=False)
        kind = EnumField(tuple(RequestKind))
        payload = serializers.JSONField(required=False)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_file",
        request=DataRightsOpenInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: DataRightsRequestOutput},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        data_in = self.DataRightsOpenInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        principal, member = acting_for(request, data.get("userId"))
        row = services.data_rights_open(
            principal=principal, member=member, kind=data["kind"], payload=data.get("payload")
        )
        return Response(request_out(row), status=201)


class DataRightsApi(DataRightsListApi, DataRightsOpenApi):
    """`/data-rights`: GET lists and POST files."""


class DataRightsDetailApi(APIView):
    class DetailQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_get",
        parameters=[DetailQuery],
        responses=DataRightsRequestOutput,
    )
    def get(self, request: Request, request_id: uuid.UUID) -> Response:
        principal, member = _caller(request, request.query_params.get("userId"))
        row = services._visible(principal, member, request_id)
        return Response(request_out(row))


class DataRightsTransitionApi(APIView):
    """Move a request along its lifecycle. `to: verified` takes a `method` and, for a
    code method, the `code` the member received, or for a court order its `reference`."""

    class TransitionInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField(required=False)
        to = EnumField(tuple(RequestState))
        method = EnumField(tuple(VerificationMethod), required=False)
        code = serializers.CharField(required=False, max_length=32)
        reference = serializers.CharField(required=False, max_length=500)
        reasonCode = serializers.CharField(required=False, max_length=64)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_transition",
        request=TransitionInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={200: DataRightsRequestOutput},
    )
    @idempotent
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        data_in = self.TransitionInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        principal, member = _caller(request, user_id_in(request.data))
        if data["to"] == RequestState.VERIFIED and "method" in data:
            row = services.data_rights_verify(
                principal=principal,
                member=member,
                request_id=request_id,
                method=data["method"],
                code=data.get("code"),
                reference=data.get("reference"),
            )
        else:
            row = services.data_rights_transition(
                principal=principal,
                member=member,
                request_id=request_id,
                to=data["to"],
                reason_code=data.get("reasonCode", ""),
            )
        return Response(request_out(row))


class DataRightsCodeApi(APIView):
    """Send the member a one-time code to verify a request a surface filed."""

    class CodeInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField(required=False)
        method = EnumField(("email-link", "phone-otp"))

    class CodeOutput(serializers.Serializer):
        sent = serializers.BooleanField()
        expiresAt = serializers.DateTimeField()

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_send_code",
        request=CodeInput,
        responses={202: CodeOutput},
    )
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        data_in = self.CodeInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        principal, member = acting_for(request, data_in.validated_data.get("userId"))
        row = services.data_rights_send_code(
            principal=principal,
            member=member,
            request_id=request_id,
            method=data_in.validated_data["method"],
        )
        return Response({"sent": True, "expiresAt": row.expires_at}, status=202)


class DataRightsUndoApi(APIView):
    """Undo a soft deletion inside its grace window: the memories come back and the
    request completes as undone. 409 `undo-window-closed` once the window has passed,
    `deletion-not-started` before the work started (cancel instead), `not-a-soft-delete`
    for a hard one."""

    class UndoInput(StrictInput, serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_undo",
        request=UndoInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={200: DataRightsRequestOutput},
    )
    @idempotent
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        data_in = self.UndoInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        principal, member = acting_for(request, data_in.validated_data.get("userId"))
        row = deletion.data_rights_undo_delete(
            principal=principal, member=member, request_id=request_id
        )
        return Response(request_out(row))


class DataRightsExtendApi(APIView):
    """Extend a request's deadline once, with the reason sent to the member (legal)."""

    class ExtendInput(StrictInput, serializers.Serializer):
        reason = serializers.CharField(max_length=500)

    @extend_schema(
        tags=[TAG],
        operation_id="data_rights_extend",
        request=ExtendInput,
        responses={200: DataRightsRequestOutput},
    )
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        data_in = self.ExtendInput(data=request.data)
        data_in.is_valid(raise_exception=True)
        row = services.data_rights_extend(
            principal=principal_of(request.user),
            request_id=request_id,
            reason=data_in.validated_data["reason"],
        )
        return Response(request_out(row))


class DataRightsBundleApi(APIView):
    """Download an export's bundle: the member's own session, or a surface for its member.
    404 for anyone else, 409 while it is being built, 410 once its window has ended."""

    class BundleQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    @extend_schema(
        parameters=[BundleQuery],
        responses={
            (200, "application/zip"): OpenApiTypes.BINARY,
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
        },
    )
    def get(self, request: Request, request_id: uuid.UUID) -> FileResponse:
        query = self.BundleQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        principal, member = acting_for(request, query.validated_data.get("userId"))
        path, name = export.bundle_for_download(
            principal=principal, member=member, request_id=request_id
        )
        try:
            handle = path.open("rb")
        except FileNotFoundError:  # expired between the check and the open
            raise export.BundleGone("The export's download window has ended.") from None
        sealed = not name.endswith(".zip")  # an encrypted bundle is no zip until opened
        return FileResponse(
            handle,
            as_attachment=True,
            filename=name,
            content_type="application/octet-stream" if sealed else "application/zip",
        )


class DataRightsSigningKeyApi(APIView):
    """The public keys export bundles are signed with (Ed25519), newest first, so anyone
    can check a bundle (`manage.py verify_bundle`, or any Ed25519 library). Public."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    class SigningKeyOutput(serializers.Serializer):
        algorithm = serializers.CharField()
        keyId = serializers.CharField()
        publicKey = serializers.CharField(help_text="The 32 raw bytes, base64.")
        publicKeyPem = serializers.CharField()

    class SigningKeysOutput(SigningKeyOutput):
        """The key new bundles are signed with, and under `keys` every key still in use."""

        keys = serializers.ListField(
            child=inline_serializer(
                "SigningKey",
                {
                    "algorithm": serializers.CharField(),
                    "keyId": serializers.CharField(),
                    "publicKey": serializers.CharField(),
                    "publicKeyPem": serializers.CharField(),
                },
            )
        )

    @extend_schema(responses=SigningKeysOutput)
    def get(self, request: Request) -> Response:
        published = export.published_keys()
        return Response({**published[0], "keys": published})
