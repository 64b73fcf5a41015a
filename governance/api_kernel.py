"""The governance kernel over REST: pending approvals, the owner's answer, run steps.

- `GET approvals`: a member's session lists their own pending approvals; a surface lists
  those of a member of its own tenant (`userId`). Operators get 403: approvals are the
  member's to see and answer.
- `POST approvals/{id}/decide` `{decision: approve|deny}`: only the owner's session.
  A surface or an operator gets 403; someone else's approval 404; answered twice 409.
- `POST runs/{runId}/steps` `{tool, readExternalContent, source?}`: surfaces only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import approvals, runs
from governance.acting import acting_for
from governance.errors import Forbidden
from governance.fields import EnumField, StrictInput
from governance.idempotency import idempotent
from governance.kernel_models import Approval
from governance.principal import principal_of

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Replays return the first answer and write nothing new.",
)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
        },
    }
)
class ApprovalArgumentsField(serializers.DictField):
    pass


class ApprovalOutput(serializers.Serializer):
    id = serializers.UUIDField()
    operation = serializers.CharField()
    reasonCode = serializers.CharField(source="reason_code")
    card = serializers.CharField(source="card_text")
    status = serializers.CharField()
    arguments = ApprovalArgumentsField(
        help_text="What the held call acts on: ids and enum values, never memory text."
    )
    runId = serializers.UUIDField(source="run_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    decidedAt = serializers.DateTimeField(source="decided_at", allow_null=True)
    outcome = serializers.CharField(source="outcome_code", allow_blank=True)


class ApprovalListApi(APIView):
    """Pending approvals of one member, oldest first."""

    class ApprovalListQuery(serializers.Serializer):
        userId = serializers.UUIDField(required=False)

    class ApprovalListOutput(serializers.Serializer):
        results = ApprovalOutput(many=True)

    @extend_schema(
        operation_id="approvals_list",
        parameters=[ApprovalListQuery],
        responses={200: ApprovalListOutput},
        tags=["approvals"],
    )
    def get(self, request: Request) -> Response:
        principal = principal_of(request.user)
        if principal.kind == "operator":
            raise Forbidden("Approvals are answered by the member they concern.")
        query = self.ApprovalListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        _, member = acting_for(request, query.validated_data.get("userId"))
        pending = approvals.approvals_pending_for(member=member)
        return Response(self.ApprovalListOutput({"results": pending}).data)


class ApprovalDecideApi(APIView):
    """The owner approves or denies; an approved call resumes and is governed again."""

    class ApprovalDecideInput(StrictInput, serializers.Serializer):
        decision = EnumField(approvals.DECISIONS)

    class ApprovalDecideOutput(serializers.Serializer):
        approval = ApprovalOutput()
        resume = inline_serializer(
            "ApprovalResume",
            {
                "code": serializers.CharField(
                    help_text="How the approved call went: `completed`, `not-resumable`, "
                    "`requester-revoked`, or the problem code it met."
                )
            },
            allow_null=True,
        )

    @extend_schema(
        operation_id="approvals_decide",
        request=ApprovalDecideInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={200: ApprovalDecideOutput},
        tags=["approvals"],
    )
    @idempotent
    def post(self, request: Request, approval_id: Any) -> Response:
        principal = principal_of(request.user)
        if principal.kind != "member":
            raise Forbidden("Only the member an approval is for may answer it.")
        data = self.ApprovalDecideInput(data=request.data)
        data.is_valid(raise_exception=True)
        # Not a Request attribute: `idempotent` reads it back with getattr, for this call only.
        request.idempotency_subject = principal.id  # type: ignore[attr-defined]
        outcome = approvals.approval_decide(
            principal=principal,
            approval_id=approval_id,
            decision=data.validated_data["decision"],
        )
        resume = None
        if outcome.approval.status != Approval.Status.DENIED:
            resume = {"code": outcome.resume_code}
        return Response(
            self.ApprovalDecideOutput({"approval": outcome.approval, "resume": resume}).data
        )


class RunStepApi(APIView):
    """A surface reports one tool step of its run; a step that read external content
    taints the run."""

    class RunStepInput(StrictInput, serializers.Serializer):
        tool = serializers.RegexField(runs.TOOL_PATTERN, max_length=64)
        readExternalContent = serializers.BooleanField()
        # The wire name is `source`, which the stubs know as Field.source (a str); DRF's
        # metaclass moves declared fields off the class, so nothing is really overridden.
        source = serializers.CharField(  # type: ignore[assignment]
            required=False, allow_blank=True, max_length=runs.MAX_SOURCE, trim_whitespace=True
        )

        def to_internal_value(self, data: Any) -> Any:
            # DRF coerces 1 or "yes" to True and 42 to "42"; a step must say what it means.
            if isinstance(data, dict):
                errors = {}
                if not isinstance(data.get("readExternalContent", False), bool):
                    errors["readExternalContent"] = ["Must be true or false."]
                for name in ("tool", "source"):
                    if name in data and not isinstance(data[name], str):
                        errors[name] = ["Must be a string."]
                if errors:
                    raise serializers.ValidationError(errors)
            return super().to_internal_value(data)

    class RunStepOutput(serializers.Serializer):
        runId = serializers.UUIDField()
        seq = serializers.IntegerField()
        tool = serializers.CharField()
        readExternalContent = serializers.BooleanField()
        tainted = serializers.BooleanField()

    @extend_schema(
        operation_id="runs_steps_create",
        request=RunStepInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: RunStepOutput},
        tags=["runs"],
    )
    @idempotent
    def post(self, request: Request, run_id: str) -> Response:
        principal = principal_of(request.user)
        if principal.kind != "surface":
            raise Forbidden("Only a surface reports the steps of its runs.")
        key = runs.parse_run_id(run_id)
        data = self.RunStepInput(data=request.data)
        data.is_valid(raise_exception=True)
        step = runs.run_step_record(
            principal=principal,
            run_id=key,
            tool=data.validated_data["tool"],
            read_external_content=data.validated_data["readExternalContent"],
            source=data.validated_data.get("source", ""),
        )
        body = {
            "runId": key,
            "seq": step.seq,
            "tool": step.tool,
            "readExternalContent": step.read_external_content,
            "tainted": runs.run_is_tainted(
                tenant_id=principal.tenant_id, surface=principal.surface or "", run_id=key
            ),
        }
        return Response(self.RunStepOutput(body).data, status=201)
