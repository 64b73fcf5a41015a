"""Every request example in the OpenAPI schema works as sent: against a fresh demo (as
`make run` seeds it), through the whole WSGI stack, it answers the status (and problem
code) the example names, and the answer has the documented shape."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import schemathesis
from django.test import Client

from iris_site.api_operations import DEMO_MEMBER, OPERATIONS
from iris_site.wsgi import application
from tests.api.schema_calls import CONFORMANCE, seed_demo_token, wsgi_inside_the_test_transaction

EXAMPLES = [
    pytest.param(operation_id, example, id=f"{operation_id}:{example.name}")
    for operation_id, doc in OPERATIONS.items()
    for example in doc.examples
]


def _write(client: Client, body: str, **extra: Any) -> dict[str, Any]:
    payload = {
        "userId": DEMO_MEMBER,
        "scope": {"kind": "profile", "userId": DEMO_MEMBER},
        "category": "fact",
        "body": body,
        "origin": "user-stated",
        **extra,
    }
    response = client.post("/api/v1/memories", payload, content_type="application/json")
    assert response.status_code in (201, 409), response.content
    return response.json()


def _path_parameters(names: list[str], client: Client) -> dict[str, str]:
    """A fresh resource of the demo member for each path parameter the operation takes."""
    values = {}
    for name in names:
        if name == "entry_id":
            values[name] = _write(client, "Keeps a sourdough starter called Gus.")["id"]
        elif name == "conflict_id":
            _write(client, "My home city is Berlin")
            values[name] = _write(client, "My home city is Paris")["conflictId"]
        elif name == "run_id":
            values[name] = str(uuid.uuid4())
        else:
            raise AssertionError(f"give the examples of {name} a resource to act on")
    return values


def _operation(schema: Any, operation_id: str) -> Any:
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.definition.raw.get("operationId") == operation_id:
            return operation
    raise AssertionError(f"{operation_id} is not in the schema")


@pytest.mark.parametrize(("operation_id", "example"), EXAMPLES)
def test_every_schema_example_answers_as_documented(
    transactional_db, operation_id, example
) -> None:
    token = seed_demo_token()
    headers = {"Authorization": f"Bearer {token}"}
    client = Client(headers=headers)
    with wsgi_inside_the_test_transaction():
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
        operation = _operation(schema, operation_id)
        raw = operation.definition.raw
        path_names = [p["name"] for p in raw.get("parameters", []) if p["in"] == "path"]
        if not path_names:
            path_names = [
                n for n in ("entry_id", "conflict_id", "run_id") if f"{{{n}}}" in operation.path
            ]
        # The example as the schema serves it, not as the table holds it.
        body_examples = (
            raw.get("requestBody", {})
            .get("content", {})
            .get("application/json", {})
            .get("examples")
        )
        if body_examples is not None:
            documented = body_examples[example.name]
            kwargs: dict[str, Any] = {"body": documented["value"], "media_type": "application/json"}
        else:
            query = {
                p["name"]: p["examples"][example.name]["value"]
                for p in raw.get("parameters", [])
                if example.name in p.get("examples", {})
            }
            documented = next(
                p["examples"][example.name]
                for p in raw["parameters"]
                if example.name in p.get("examples", {})
            )
            kwargs = {"query": query}
        assert documented["x-expected-status"] == example.status
        case = operation.Case(path_parameters=_path_parameters(path_names, client), **kwargs)
        response = case.call(headers=headers)
        case.validate_response(response, checks=CONFORMANCE, headers=headers)
    assert response.status_code == example.status, response.text
    if example.code:
        assert response.json()["code"] == example.code
