"""schemathesis sends generated requests to every operation of the schema Iris serves,
as the demo's surface, through the whole WSGI stack; every answer must be one the schema
documents: its status, content type, headers and body shape, and for a problem the
`code` among the operation's documented codes for that status. (Response conformance
only: tests/security/ fuzzes for server errors and cross-tenant leaks.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings

from iris_site.api_operations import DEMO_MEMBER
from iris_site.wsgi import application
from tests.api.schema_calls import CONFORMANCE, seed_demo_token, wsgi_inside_the_test_transaction


@pytest.fixture
def demo_headers(db) -> dict[str, str]:
    return {"Authorization": f"Bearer {seed_demo_token()}"}


def _served_schema() -> Any:
    """The schema /api/schema/ serves (the same generator, without a request: collection
    runs before any database is there), called through the WSGI application."""
    raw = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(raw)))
    loaded.app = application
    return loaded


schema = _served_schema()


def _for_the_demo_member(case: Any) -> None:
    """Most generated ids name nobody (a 404 is documented too); the member's own id
    takes every call deeper, to the answers that need a real member."""
    if isinstance(case.query, dict) and "userId" in case.query:
        case.query["userId"] = DEMO_MEMBER
    if isinstance(case.body, dict) and "userId" in case.body:
        case.body["userId"] = DEMO_MEMBER


@schema.parametrize()
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_answer_is_documented(case, demo_headers) -> None:
    _for_the_demo_member(case)
    with wsgi_inside_the_test_transaction():
        case.call_and_validate(headers=demo_headers, checks=CONFORMANCE)
