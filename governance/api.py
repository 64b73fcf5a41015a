"""Governance endpoints: health."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.doctor import health_notes


def service_status() -> dict[str, str]:
    status = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        status["database"] = "ok"
    except Exception:
        status["database"] = "unreachable"
    if settings.REDIS_URL:
        import redis

        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1).ping()
            status["redis"] = "ok"
        except Exception:
            status["redis"] = "unreachable"
    return status


class RecallRankingNote(serializers.Serializer):
    ranker = serializers.ChoiceField(
        ["hybrid", "lexical", "jaccard"], help_text="The ranker recall uses now."
    )
    configuredRanker = serializers.CharField(help_text="The ranker the deployment asks for.")
    fallback = serializers.BooleanField(
        help_text="True when recall does not use the configured ranker (the embedding model "
        "cannot load, so BM25 ranks instead)."
    )
    detail = serializers.CharField(help_text="The same, in plain words.")


class HealthView(APIView):
    """Liveness and readiness for a load balancer: up (200) or down (503, the database is
    unreachable), `degraded` when Redis is unreachable but the node still serves, and the
    apps' health notes (which ranker recall uses). A note never makes the answer 503: a
    node that ranks with BM25 because its model is missing still answers."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    HEALTH = inline_serializer(
        "Health",
        {
            "status": serializers.ChoiceField(["ok", "degraded"]),
            "checks": serializers.DictField(
                child=serializers.ChoiceField(["ok", "unreachable"]),
                help_text="Each service (`database`, `redis`) and whether it answered.",
            ),
            "recall": RecallRankingNote(required=False),
        },
    )

    @extend_schema(responses={200: HEALTH, 503: HEALTH})
    def get(self, request: Request) -> Response:
        checks = service_status()
        ok = all(v == "ok" for v in checks.values())
        body: dict[str, Any] = {"status": "ok" if ok else "degraded", "checks": checks}
        body.update(health_notes())
        # Without Redis the node still serves reads and writes (no rate limit, jobs run in
        # the request): degraded, but up. Without the database it serves nothing.
        return Response(body, status=200 if checks["database"] == "ok" else 503)
