"""Governance endpoints: health."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


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


class HealthView(APIView):
    """Liveness and readiness for a load balancer: reveals nothing but up or down."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(
        responses=inline_serializer(
            "Health", {"status": serializers.CharField(), "checks": serializers.DictField()}
        )
    )
    def get(self, request: Request) -> Response:
        checks = service_status()
        ok = all(v == "ok" for v in checks.values())
        return Response(
            {"status": "ok" if ok else "degraded", "checks": checks}, status=200 if ok else 503
        )
