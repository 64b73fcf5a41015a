"""The API skeleton: auth, problem+json errors, idempotency, health, schema."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent, IdempotencyRecord, SurfaceClient

pytestmark = pytest.mark.django_db
PROBLEM = "application/problem+json"


def test_health_reports_the_database() -> None:
    from rest_framework.test import APIClient

    response = APIClient().get("/api/v1/health")
    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"


def test_openapi_schema_and_docs_are_served(member_api) -> None:
    schema = member_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/health" in schema.json()["paths"]
    assert member_api.get("/api/docs/").status_code == 200


def test_surface_token_is_stored_only_as_a_hash(surface_token) -> None:
    client = SurfaceClient.objects.get()
    assert surface_token not in (client.token_hash, client.token_prefix)
    assert len(client.token_hash) == 64


@pytest.mark.urls("tests.governance.idempotency_urls")
class TestErrorsAndIdempotency:
    url = "/api/v1/test-records"

    def test_anonymous_gets_401_problem(self, api) -> None:
        response = api.post(self.url, {"label": "a"}, format="json")
        assert response.status_code == 401
        assert response["Content-Type"] == PROBLEM
        body = response.json()
        assert body["code"] == "not-authenticated" and body["status"] == 401
        assert response["WWW-Authenticate"].startswith("Bearer")

    def test_unknown_token_gets_401(self, api) -> None:
        api.credentials(HTTP_AUTHORIZATION="Bearer iris_nope")
        assert api.post(self.url, {"label": "a"}, format="json").status_code == 401

    def test_revoked_token_gets_401(self, surface_api) -> None:
        from django.utils import timezone

        SurfaceClient.objects.update(revoked_at=timezone.now())
        assert surface_api.post(self.url, {"label": "a"}, format="json").status_code == 401

    def test_bad_input_names_the_field_and_writes_nothing(self, surface_api) -> None:
        before = AuditEvent.objects.count()
        response = surface_api.post(self.url, {"label": "zzz"}, format="json")
        assert response.status_code == 400
        assert response["Content-Type"] == PROBLEM
        error = response.json()["errors"][0]
        assert error["field"] == "label" and error["rule"] == "invalid_choice"
        assert AuditEvent.objects.count() == before

    def test_malformed_json_is_a_400_problem(self, surface_api) -> None:
        response = surface_api.post(self.url, "{not json", content_type="application/json")
        assert response.status_code == 400
        assert response.json()["code"] == "malformed-request"

    def test_oversized_body_is_413(self, surface_api, settings) -> None:
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
        response = surface_api.post(self.url, {"label": "a" * 500}, format="json")
        assert response.status_code == 413
        assert response.json()["code"] == "payload-too-large"

    def test_rate_limit_is_429(self, surface_api, settings) -> None:
        from django.core.cache import cache

        cache.clear()
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"principal": "2/min"},
        }
        from rest_framework.settings import api_settings
        from rest_framework.throttling import SimpleRateThrottle

        SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
        try:
            codes = [
                surface_api.post(self.url, {"label": "a"}, format="json").status_code
                for _ in range(3)
            ]
        finally:
            SimpleRateThrottle.THROTTLE_RATES = {"principal": "100000/min"}
            cache.clear()
        assert codes[-1] == 429

    def test_unknown_api_route_is_a_404_problem(self, surface_api) -> None:
        response = surface_api.get("/api/v1/nothing-here")
        assert response.status_code == 404
        assert response["Content-Type"] == PROBLEM

    def test_replay_returns_the_first_answer_and_writes_nothing(self, surface_api) -> None:
        headers = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
        first = surface_api.post(self.url, {"label": "a"}, format="json", **headers)
        count = AuditEvent.objects.count()
        second = surface_api.post(self.url, {"label": "a"}, format="json", **headers)
        assert first.status_code == second.status_code == 201
        assert first.content == second.content
        assert second["Idempotent-Replayed"] == "true"
        assert AuditEvent.objects.count() == count

    def test_same_key_with_another_body_is_422(self, surface_api) -> None:
        headers = {"HTTP_IDEMPOTENCY_KEY": "k-2"}
        surface_api.post(self.url, {"label": "a"}, format="json", **headers)
        count = AuditEvent.objects.count()
        response = surface_api.post(self.url, {"label": "b"}, format="json", **headers)
        assert response.status_code == 422
        assert response.json()["code"] == "idempotency-key-reused"
        assert AuditEvent.objects.count() == count

    def test_error_answers_are_replayed_too(self, surface_api) -> None:
        headers = {"HTTP_IDEMPOTENCY_KEY": "k-3"}
        first = surface_api.post(self.url, {"label": "zzz"}, format="json", **headers)
        second = surface_api.post(self.url, {"label": "zzz"}, format="json", **headers)
        assert first.status_code == second.status_code == 400
        assert first.json() == second.json()

    def test_keys_are_per_client(self, surface_api, foreign_surface_token, api) -> None:
        headers = {"HTTP_IDEMPOTENCY_KEY": "shared"}
        surface_api.post(self.url, {"label": "a"}, format="json", **headers)
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
        response = api.post(self.url, {"label": "b"}, format="json", **headers)
        assert response.status_code == 201
        assert IdempotencyRecord.objects.count() == 2

    def test_member_session_needs_csrf(self, member) -> None:
        from rest_framework.test import APIClient

        client = APIClient(enforce_csrf_checks=True)
        client.force_login(member)
        response = client.post(self.url, {"label": "a"}, format="json")
        assert response.status_code == 403
        assert response["Content-Type"] == PROBLEM


def test_validation_paths_keep_list_indexes() -> None:
    from rest_framework.exceptions import ErrorDetail

    from governance.errors import _flatten_validation

    detail = {"chain": {0: {"kind": [ErrorDetail("bad", "invalid_choice")]}}}
    assert _flatten_validation(detail)[0]["field"] == "chain[0].kind"
    detail = {"chain": [{}, {"kind": [ErrorDetail("bad", "invalid_choice")]}]}
    assert _flatten_validation(detail)[0]["field"] == "chain[1].kind"
