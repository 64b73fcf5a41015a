"""A tiny mutating endpoint used to exercise the idempotency mechanism on its own."""

from __future__ import annotations

from django.db import transaction
from django.urls import include, path
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.audit import audit_record
from governance.idempotency import idempotent
from governance.principal import principal_of


class NoteInput(serializers.Serializer):
    label = serializers.ChoiceField(choices=["a", "b"])


class RecordView(APIView):
    @idempotent
    def post(self, request: Request) -> Response:
        data = NoteInput(data=request.data)
        data.is_valid(raise_exception=True)
        principal = principal_of(request.user)
        with transaction.atomic():
            event = audit_record(
                actor=principal.actor,
                action="iris.test.recorded",
                tenant_id=principal.tenant_id,
                reason_code=data.validated_data["label"],
            )
        return Response({"eventId": str(event.id)}, status=201)


urlpatterns = [
    path("api/v1/test-records", RecordView.as_view()),
    path("", include("iris_site.urls")),
]

handler404 = "iris_site.handlers.not_found"
handler500 = "iris_site.handlers.server_error"
