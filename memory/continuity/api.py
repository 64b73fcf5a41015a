"""`GET/POST /api/v1/continuation-tokens` (DESIGN "Routes"): recent tokens · write one.

A surface acts for a member of its own tenant (`userId`); a member's browser session acts
for the member alone. Anyone else, operators included, gets 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from consent.enums import SURFACES
from governance.acting import acting_for, user_id_in
from governance.errors import invalid
from governance.idempotency import idempotent
from governance.models import User
from memory.continuity import conf, rules, selectors, services
from memory.continuity.models import ContinuationToken

TAG = "continuity"


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")


def token_contract(token: ContinuationToken, member: User) -> dict[str, Any]:
    return {
        "id": str(token.id),
        "userId": str(member.public_id),
        "scopeKey": token.scope_key,
        "surfaceContext": token.surface_context,
        "anchorRef": token.anchor_ref,
        "posture": token.posture,
        "sensitiveCategories": list(token.sensitive_categories),
        "crossDeviceConsentId": (
            str(token.cross_device_consent_id) if token.cross_device_consent_id else None
        ),
        "deviceId": token.device_id,
        "clientTimestamp": _iso(token.client_timestamp),
        "createdAt": _iso(token.created_at),
        "updatedAt": _iso(token.updated_at),
        "revision": token.revision,
    }


# The schema of the wire shapes; `rules.parse_token` checks them (its field sets).
_SURFACE_CONTEXT: dict[str, serializers.Field] = {
    "surface": serializers.ChoiceField(list(SURFACES)),
    "sessionId": serializers.CharField(required=False, allow_null=True),
    "itemId": serializers.CharField(required=False, allow_null=True),
    "mode": serializers.CharField(
        required=False, allow_null=True, help_text="A short lowercase code."
    ),
}
_ANCHOR_REF: dict[str, serializers.Field] = {
    "surface": serializers.ChoiceField(
        list(SURFACES), help_text="The same surface as surfaceContext.surface."
    ),
    "kind": serializers.ChoiceField([k.value for k in rules.AnchorKind]),
    "ref": serializers.CharField(help_text="The id of the thing the session was at."),
    "offsetMs": serializers.IntegerField(required=False, allow_null=True, min_value=0),
    "position": serializers.IntegerField(required=False, allow_null=True, min_value=0),
}
_TOKEN_WRITE = inline_serializer(
    "ContinuationTokenWrite",
    {
        "userId": serializers.UUIDField(),
        "scopeKey": serializers.CharField(
            help_text="The scope's kind and identifiers, colon-joined "
            "(`session:<userId>:<sessionId>`)."
        ),
        "surfaceContext": inline_serializer("SurfaceContext", _SURFACE_CONTEXT),
        "anchorRef": inline_serializer("AnchorRef", _ANCHOR_REF),
        "posture": serializers.ChoiceField([p.value for p in rules.Posture]),
        "deviceId": serializers.CharField(help_text="The device writing the checkpoint."),
        "clientTimestamp": serializers.DateTimeField(help_text="RFC 3339 with an offset."),
        "sensitiveCategories": serializers.ListField(
            child=serializers.CharField(),
            required=False,
            help_text="Sensitive categories the session touched; they travel to another "
            "device only with crossDeviceConsentId.",
        ),
        "crossDeviceConsentId": serializers.UUIDField(
            required=False,
            allow_null=True,
            help_text="The member's current cross-device grant (its consent event id).",
        ),
    },
)

_TOKEN = inline_serializer(
    "ContinuationToken",
    {
        "id": serializers.UUIDField(),
        "userId": serializers.UUIDField(),
        "scopeKey": serializers.CharField(),
        "surfaceContext": inline_serializer("SurfaceContextOut", _SURFACE_CONTEXT),
        "anchorRef": inline_serializer("AnchorRefOut", _ANCHOR_REF),
        "posture": serializers.ChoiceField([p.value for p in rules.Posture]),
        "sensitiveCategories": serializers.ListField(child=serializers.CharField()),
        "crossDeviceConsentId": serializers.UUIDField(allow_null=True),
        "deviceId": serializers.CharField(),
        "clientTimestamp": serializers.DateTimeField(),
        "createdAt": serializers.DateTimeField(),
        "updatedAt": serializers.DateTimeField(help_text="Server time of the latest write."),
        "revision": serializers.IntegerField(),
    },
)
_WRITE_OUT = inline_serializer(
    "ContinuationWrite",
    {
        "token": _TOKEN,
        "outcome": serializers.ChoiceField([o.value for o in rules.Outcome]),
        "conflictNotice": inline_serializer(
            "ContinuationConflictNotice",
            {
                "message": serializers.CharField(),
                "otherDeviceId": serializers.CharField(),
                "otherWrittenAt": serializers.DateTimeField(),
            },
            allow_null=True,
        ),
    },
)


class ContinuationTokensView(APIView):
    """`GET continuation-tokens` lists recent tokens; `POST` writes one (two operations on
    one path: this view only routes each method to its handler)."""

    @extend_schema(
        tags=[TAG],
        operation_id="continuation_tokens_recent",
        parameters=[
            OpenApiParameter("userId", OpenApiTypes.UUID, description="Required for a surface."),
            OpenApiParameter("surface", OpenApiTypes.STR, enum=list(SURFACES)),
            OpenApiParameter("limit", OpenApiTypes.INT, description="1-50, default 10."),
        ],
        responses={
            200: inline_serializer(
                "ContinuationTokenList", {"results": serializers.ListField(child=_TOKEN)}
            )
        },
    )
    def get(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        try:
            surface, limit = rules.parse_read_query(
                request.query_params, limit_max=conf.read_limit_max()
            )
        except rules.RuleViolation as violation:
            raise invalid(violation) from None
        recent = selectors.continuation_tokens_recent(
            principal=principal, member=member, surface=surface, limit=limit
        )
        if recent.has_unconsented:
            # Lazy half of the revocation rule: what may no longer travel is deleted.
            services.continuation_tokens_purge_unconsented(principal=principal, member=member)
        return Response({"results": [token_contract(t, member) for t in recent.tokens]})

    @extend_schema(
        tags=[TAG],
        operation_id="continuation_tokens_write",
        request=_TOKEN_WRITE,
        responses={201: _WRITE_OUT, 200: _WRITE_OUT},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        result = services.continuation_token_write(
            principal=principal, member=member, payload=request.data
        )
        notice = None
        if result.conflict_with is not None:
            notice = {
                "message": rules.CONFLICT_MESSAGE,
                "otherDeviceId": result.conflict_with.device_id,
                "otherWrittenAt": _iso(result.conflict_with.server_time),
            }
        return Response(
            {
                "token": token_contract(result.token, member),
                "outcome": result.outcome.value,
                "conflictNotice": notice,
            },
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )

    @extend_schema(
        tags=[TAG],
        operation_id="continuation_tokens_forget",
        parameters=[OpenApiParameter("userId", OpenApiTypes.UUID, description="For a surface.")],
        responses={
            200: inline_serializer(
                "ContinuationTokensForgotten", {"deleted": serializers.IntegerField()}
            )
        },
        description="Forget every continuation token of the member (all devices, all surfaces).",
    )
    def delete(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        deleted = services.continuation_tokens_forget(principal=principal, member=member)
        return Response({"deleted": deleted})
