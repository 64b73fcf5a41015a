"""`GET /api/v1/events?after=CURSOR&limit=N`: the tenant's events from a cursor on, for a
surface or a consumer that was down and catches up (docs/decisions/events.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events import outbox, selectors
from events.catalogue import EVENT_TYPE_NAMES
from events.wire import event_body
from governance.errors import Forbidden, ValidationFailed
from governance.principal import principal_of

TAG = "events"

_DATA = inline_serializer(
    "EventData",
    {
        "change": serializers.CharField(
            help_text="What happened, within the type: written, corrected, promoted, soft, "
            "hard, resolved, appended, purged, submitted, transitioned."
        ),
        "entryId": serializers.UUIDField(required=False),
        "revisionId": serializers.UUIDField(required=False),
        "revision": serializers.IntegerField(required=False),
        "supersedes": serializers.UUIDField(required=False, allow_null=True),
        "lifecycle": serializers.CharField(required=False),
        "revisionCount": serializers.IntegerField(required=False),
        "returnedIds": serializers.ListField(child=serializers.CharField(), required=False),
        "surface": serializers.CharField(required=False),
        "scopeKind": serializers.CharField(required=False),
        "evaluatedCount": serializers.IntegerField(required=False),
        "kind": serializers.CharField(required=False),
        "consentType": serializers.CharField(required=False),
        "status": serializers.CharField(required=False),
        "position": serializers.IntegerField(required=False),
        "cascade": serializers.BooleanField(required=False),
        "erasedCount": serializers.IntegerField(required=False),
        "requestId": serializers.UUIDField(required=False),
        "inspectionId": serializers.UUIDField(required=False),
        "from": serializers.CharField(required=False, help_text="The state before."),
        "to": serializers.CharField(required=False, help_text="The state after."),
    },
)
_EVENT = inline_serializer(
    "Event",
    {
        "id": serializers.UUIDField(help_text="The event's id: the same in a webhook."),
        "type": serializers.ChoiceField(list(EVENT_TYPE_NAMES)),
        "cursor": serializers.IntegerField(help_text="The event's place in the tenant's order."),
        "tenantId": serializers.UUIDField(),
        "userId": serializers.UUIDField(allow_null=True, help_text="The member it concerns."),
        "occurredAt": serializers.DateTimeField(),
        "data": _DATA,
    },
)


def _int_param(raw: Any, field: str, *, default: int, low: int, high: int | None) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise ValidationFailed(
            f"{field} must be a whole number.", field=field, rule="integer"
        ) from None
    if value < low or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"from {low} to {high}"
        raise ValidationFailed(f"{field} must be {bounds}.", field=field, rule="range")
    return value


class EventListApi(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="events_list",
        summary="Catch up on events after a cursor",
        description=(
            "The tenant's events with a cursor above `after`, oldest first: the same bodies "
            "the webhooks post (ids, codes and timestamps; never a memory's text). Keep the "
            "last `cursor` you handled and ask again with `after` set to it; `hasMore` says "
            "whether to ask at once. For a surface client's token only."
        ),
        parameters=[
            OpenApiParameter(
                "after", OpenApiTypes.INT, description="The last cursor you handled (0: start)."
            ),
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=f"1-{selectors.MAX_LIMIT}, default {selectors.DEFAULT_LIMIT}.",
            ),
        ],
        responses={
            200: inline_serializer(
                "EventPage",
                {
                    "results": serializers.ListField(child=_EVENT),
                    "nextCursor": serializers.IntegerField(
                        help_text="Pass as `after` for the next page."
                    ),
                    "hasMore": serializers.BooleanField(),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        principal = principal_of(request.user)
        if principal.kind != "surface" or principal.tenant_id is None:
            raise Forbidden(
                "Events are read with a surface client's token.", code="events-surface-only"
            )
        after = _int_param(request.query_params.get("after"), "after", default=0, low=0, high=None)
        limit = _int_param(
            request.query_params.get("limit"),
            "limit",
            default=selectors.DEFAULT_LIMIT,
            low=1,
            high=selectors.MAX_LIMIT,
        )
        # Publish what has committed, so a reader sees its own writes (a try-lock: if a
        # publisher is at work, this read does not wait for it).
        outbox.publish_pending(blocking=False)
        page = selectors.events_after(tenant_id=principal.tenant_id, after=after, limit=limit)
        return Response(
            {
                "results": [event_body(e) for e in page.events],
                "nextCursor": page.next_cursor,
                "hasMore": page.has_more,
            }
        )
