"""The memory surface API (DESIGN "Routes"): one view per operation, services do the work.

A surface acts for a member of its own tenant, named by `userId` (body or query); a
member's browser session acts for the member alone. Anyone else, operators included, gets
404: operators reach member memory only through the inspection regime.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.acting import acting_for, user_id_in
from governance.errors import Conflict
from governance.idempotency import idempotent
from governance.models import User
from memory import selectors, services
from memory.models import MemoryEntry
from memory.serializers import (
    ActorsForgetIn,
    ActorsForgottenOut,
    ConflictAnswerIn,
    ForgottenOut,
    GovernedIn,
    MemoryCorrectIn,
    MemoryEntryOut,
    MemoryListIn,
    MemoryPageOut,
    MemoryPauseIn,
    MemoryScopeIn,
    MemoryWriteIn,
    NotWrittenOut,
    OffTheRecordIn,
    OffTheRecordOut,
    UserIdIn,
    entry_contract,
    off_the_record_contract,
)

TAG = "memory"
CONFLICT_RESPONSE = OpenApiResponse(
    description="The member must answer a question first (problem+json with `question` and "
    "`conflictId`), or the memory was forgotten (`entry-tombstoned`)."
)


_In = TypeVar("_In", bound=serializers.Serializer)


def _valid(serializer_class: type[_In], data: Any) -> _In:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer


def _entry(entry: MemoryEntry, member: User) -> dict[str, Any]:
    return entry_contract(entry, member=member)


def _outcome(outcome: services.WriteOutcome, member: User, *, created: int) -> Response:
    if outcome.reason == "off-the-record":
        # A status a client cannot mistake for a stored memory (issue 25).
        raise Conflict(
            "The member has paused memory for this session; nothing was written.",
            code="off-the-record",
        )
    if outcome.status == "conflict":
        assert outcome.conflict is not None
        raise Conflict(
            "This contradicts what the member said; ask them first.",
            code="memory-conflict",
            extra={
                "question": outcome.question,
                "conflictId": str(outcome.conflict.id),
                "entryId": str(outcome.conflict.entry_id),
            },
        )
    if outcome.written:
        assert outcome.entry is not None
        return Response(
            _entry(outcome.entry, member),
            status=created,
            headers={"Location": f"/api/v1/memories/{outcome.entry.entry_id}"}
            if created == status.HTTP_201_CREATED
            else None,
        )
    promotion = None
    if outcome.promotion is not None:
        promotion = {
            "allowed": outcome.promotion.allowed,
            "reason": outcome.promotion.reason.value,
            "distinctSessions": outcome.distinct_sessions,
        }
    return Response(
        {
            "written": False,
            "reason": outcome.reason,
            "entry": _entry(outcome.entry, member) if outcome.entry is not None else None,
            "notes": list(outcome.notes),
            "promotion": promotion,
        },
        status=status.HTTP_200_OK,
    )


class MemoriesView(APIView):
    """`GET memories` lists; `POST memories` writes. Two operations share one path, so the
    view only routes each method to its own handler below."""

    @extend_schema(
        tags=[TAG],
        operation_id="memories_list",
        parameters=[MemoryListIn],
        responses={200: MemoryPageOut},
    )
    def get(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        params = _valid(MemoryListIn, request.query_params).validated_data
        page = selectors.memory_list(
            principal=principal,
            member=member,
            scope=params.get("scope"),
            category=params.get("category"),
            lifecycle=params.get("lifecycle"),
            cursor=params.get("cursor"),
            limit=params["limit"],
        )
        return Response(
            {
                "results": [entry_contract(e, member=member) for e in page.entries],
                "next": page.next_cursor,
            }
        )

    @extend_schema(
        tags=[TAG],
        operation_id="memories_write",
        request=MemoryWriteIn,
        responses={
            201: MemoryEntryOut,
            200: NotWrittenOut,
            202: OpenApiResponse(description="Held for the owner's approval."),
            409: CONFLICT_RESPONSE,
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(MemoryWriteIn, request.data)
        outcome = services.memory_write(
            principal=principal,
            member=member,
            draft=payload.to_draft(),
            context=payload.governance_context(),
        )
        return _outcome(outcome, member, created=status.HTTP_201_CREATED)


class MemoryDetailView(APIView):
    """`GET memories/{id}` reads the current revision; `PATCH` corrects it."""

    @extend_schema(
        tags=[TAG],
        operation_id="memories_get",
        parameters=[UserIdIn],
        responses={200: MemoryEntryOut},
    )
    def get(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        _valid(UserIdIn, request.query_params)
        entry = selectors.memory_get(principal=principal, member=member, entry_id=entry_id)
        return Response(_entry(entry, member))

    @extend_schema(
        tags=[TAG],
        operation_id="memories_correct",
        request=MemoryCorrectIn,
        responses={200: MemoryEntryOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def patch(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(MemoryCorrectIn, request.data)
        outcome = services.memory_correct(
            principal=principal,
            member=member,
            entry_id=entry_id,
            correction=payload.to_correction(),
            context=payload.governance_context(),
        )
        assert outcome.entry is not None
        return Response(_entry(outcome.entry, member))


def _entry_action(
    request: Request, entry_id: uuid.UUID, service: Callable[..., services.WriteOutcome]
) -> Response:
    """An action on one entry that needs nothing but the governance context."""
    principal, member = acting_for(request, user_id_in(request.data))
    payload = _valid(GovernedIn, request.data)
    outcome = service(
        principal=principal,
        member=member,
        entry_id=entry_id,
        context=payload.governance_context(),
    )
    assert outcome.entry is not None
    return Response(_entry(outcome.entry, member))


class MemoryHistoryView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_history",
        parameters=[UserIdIn],
        responses={
            200: inline_serializer("MemoryHistory", {"revisions": MemoryEntryOut(many=True)})
        },
    )
    def get(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        _valid(UserIdIn, request.query_params)
        rows = selectors.memory_history(principal=principal, member=member, entry_id=entry_id)
        return Response({"revisions": [entry_contract(e, member=member) for e in rows]})


class MemoryForgetView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_forget",
        request=UserIdIn,
        responses={200: ForgottenOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def post(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(GovernedIn, request.data)
        tombstone = services.memory_forget(
            principal=principal,
            member=member,
            entry_id=entry_id,
            context=payload.governance_context(),
        )
        # The answer carries no text: it is stored for replays, and the text is forgotten.
        return Response(
            {
                "id": str(tombstone.entry_id),
                "revision": tombstone.revision,
                "lifecycle": tombstone.lifecycle,
            }
        )


class MemoryPauseView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_pause",
        request=MemoryPauseIn,
        responses={200: MemoryEntryOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def post(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(MemoryPauseIn, request.data)
        outcome = services.memory_pause(
            principal=principal,
            member=member,
            entry_id=entry_id,
            ends_at=payload.validated_data["endsAt"],
            notes=payload.validated_data["notes"],
            context=payload.governance_context(),
        )
        assert outcome.entry is not None
        return Response(_entry(outcome.entry, member))


class MemoryResumeView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_resume",
        request=GovernedIn,
        responses={200: MemoryEntryOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def post(self, request: Request, entry_id: uuid.UUID) -> Response:
        return _entry_action(request, entry_id, services.memory_resume)


class MemoryConfirmView(APIView):
    """Not in the route table of DESIGN: the member confirms an inferred memory
    (spec "explicit-promotion"); a draft becomes active and `user-confirmed`."""

    @extend_schema(
        tags=[TAG],
        operation_id="memories_confirm",
        request=GovernedIn,
        responses={200: MemoryEntryOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def post(self, request: Request, entry_id: uuid.UUID) -> Response:
        return _entry_action(request, entry_id, services.memory_confirm)


class MemoryScopeView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_change_scope",
        request=MemoryScopeIn,
        responses={200: MemoryEntryOut, 201: MemoryEntryOut, 409: CONFLICT_RESPONSE},
    )
    @idempotent
    def post(self, request: Request, entry_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(MemoryScopeIn, request.data)
        kind, identifiers = payload.validated_data["scope"]
        outcome = services.memory_change_scope(
            principal=principal,
            member=member,
            entry_id=entry_id,
            scope_kind=kind,
            scope_identifiers=identifiers,
            context=payload.governance_context(),
        )
        assert outcome.entry is not None
        # A tenant memory's read-only copy is a new entry: 201 with where it lives.
        copied = outcome.entry.entry_id != entry_id
        return _outcome(
            outcome, member, created=status.HTTP_201_CREATED if copied else status.HTTP_200_OK
        )


class ConflictAnswerView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="memories_conflict_answer",
        request=ConflictAnswerIn,
        responses={
            200: inline_serializer(
                "ConflictAnswered",
                {
                    "answer": serializers.CharField(),
                    "written": serializers.BooleanField(),
                    "entry": MemoryEntryOut(),
                },
            ),
            409: CONFLICT_RESPONSE,
        },
    )
    @idempotent
    def post(self, request: Request, conflict_id: uuid.UUID) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(ConflictAnswerIn, request.data)
        data = payload.validated_data
        outcome = services.memory_conflict_answer(
            principal=principal,
            member=member,
            conflict_id=conflict_id,
            answer=data["answer"],
            context=payload.governance_context(),
        )
        assert outcome.entry is not None
        return Response(
            {
                "answer": data["answer"],
                "written": outcome.written,
                "entry": _entry(outcome.entry, member),
            }
        )


class ActorsForgetView(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="actors_forget",
        request=ActorsForgetIn,
        responses={
            200: ActorsForgottenOut,
            202: OpenApiResponse(description="Held for the owner's approval."),
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(ActorsForgetIn, request.data)
        data = payload.validated_data
        result = services.actors_forget(
            principal=principal,
            member=member,
            actor_name=data.get("actorName"),
            actor_handle=data.get("actorHandle"),
            context=payload.governance_context(),
        )
        return Response(
            {
                "actorHandle": result.actor_handle or None,
                "forgottenEntryIds": [str(i) for i in result.entry_ids],
                "handleRemoved": result.handle_removed,
            }
        )


class OffTheRecordView(APIView):
    """`GET` says whether a session is off the record; `POST` switches it on, `DELETE` off."""

    @extend_schema(
        tags=[TAG],
        operation_id="off_the_record_status",
        parameters=[OffTheRecordIn],
        responses={200: OffTheRecordOut},
    )
    def get(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        data = _valid(OffTheRecordIn, request.query_params).validated_data
        surface = data.get("surface") or principal.surface
        row = selectors.off_the_record_for(
            member=member, session_id=data.get("sessionId"), surface=surface
        )
        return Response(
            off_the_record_contract(row, session_id=data.get("sessionId"), surface=surface)
        )

    @extend_schema(
        tags=[TAG],
        operation_id="off_the_record_on",
        request=OffTheRecordIn,
        responses={200: OffTheRecordOut},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.data))
        payload = _valid(OffTheRecordIn, request.data)
        data = payload.validated_data
        row = services.off_the_record_set(
            principal=principal,
            member=member,
            enabled=True,
            session_id=data.get("sessionId"),
            surface=data.get("surface"),
            context=payload.governance_context(),
        )
        return Response(
            off_the_record_contract(
                row, session_id=data.get("sessionId"), surface=data.get("surface")
            )
        )

    @extend_schema(
        tags=[TAG],
        operation_id="off_the_record_off",
        parameters=[OffTheRecordIn],
        responses={200: OffTheRecordOut},
    )
    @idempotent
    def delete(self, request: Request) -> Response:
        principal, member = acting_for(request, user_id_in(request.query_params))
        payload = _valid(OffTheRecordIn, request.query_params)
        data = payload.validated_data
        services.off_the_record_set(
            principal=principal,
            member=member,
            enabled=False,
            session_id=data.get("sessionId"),
            surface=data.get("surface"),
            context=payload.governance_context(),
        )
        return Response(
            off_the_record_contract(
                None, session_id=data.get("sessionId"), surface=data.get("surface")
            )
        )
