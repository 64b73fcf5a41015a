"""The OpenAPI schema tells a surface developer the truth: words for every operation, tags
by resource, `userId` and the scope's identifiers required, typed bodies, and every
problem code it names known to `governance.problems`, which itself holds every code
literal Iris raises, with the status Iris raises it with."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from governance.problems import PROBLEMS
from iris_site.api_operations import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
APPS = ("governance", "consent", "memory", "dsar", "inspection", "events", "iris_site")
# Words of the implementation, not of the API.
IMPLEMENTATION_WORDS = ("DRF", "serializer", "deep-copy", "handler", "the view ", "routes each")
STATUS_OF_CLASS = {
    "ValidationFailed": 400,
    "NotAuthenticated": 401,
    "Forbidden": 403,
    "NotFound": 404,
    "Conflict": 409,
    "Unprocessable": 422,
    "ServiceUnavailable": 503,
    "Denied": 403,
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(raw))


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]


def test_every_operation_has_words_for_a_surface_developer(schema) -> None:
    seen = set()
    for path, method, operation in operations(schema):
        where = f"{method.upper()} {path}"
        seen.add(operation["operationId"])
        assert operation["operationId"] in OPERATIONS, f"{where}: add it to api_operations"
        assert operation.get("summary") and operation.get("description"), where
        assert operation["tags"] != ["v1"] and len(operation["tags"]) == 1, where
        for word in IMPLEMENTATION_WORDS:
            assert word not in operation["description"], f"{where}: {word!r}"
    assert seen == set(OPERATIONS), "api_operations names an operation the API lacks"


def test_user_id_is_required_wherever_a_surface_sends_it(schema) -> None:
    components = schema["components"]["schemas"]
    for path, method, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["name"] == "userId":
                assert parameter["required"] is True, f"{method} {path}"
        content = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if content and "$ref" in content["schema"]:
            body = components[content["schema"]["$ref"].rsplit("/", 1)[-1]]
            if "userId" in body.get("properties", {}):
                assert "userId" in body["required"], f"{method} {path}"


def test_a_scope_names_exactly_the_identifiers_its_kind_needs(schema) -> None:
    write = schema["components"]["schemas"]["MemoryWriteIn"]["properties"]["scope"]
    variants = {v["properties"]["kind"]["enum"][0]: v for v in write["oneOf"]}
    assert variants["profile"]["required"] == ["kind", "userId"]
    assert variants["session"]["required"] == ["kind", "userId", "sessionId"]
    assert all(v["additionalProperties"] is False for v in variants.values())
    recall = schema["components"]["schemas"]["RecallIn"]
    assert recall["oneOf"] == [{"required": ["scope"]}, {"required": ["scopeKey"]}]


def _untyped_objects(node: Any, path: str = "") -> list[str]:
    found = []
    if isinstance(node, dict):
        if (
            node.get("type") == "object"
            and "properties" not in node
            and node.get("additionalProperties") in (None, {}, True)
            and "oneOf" not in node
        ):
            found.append(path)
        for key, value in node.items():
            found += _untyped_objects(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _untyped_objects(value, f"{path}/{index}")
    return found


def test_no_body_is_an_untyped_placeholder(schema) -> None:
    assert _untyped_objects(schema["components"]) == []
    assert _untyped_objects(schema["paths"]) == []


def test_every_problem_response_is_the_problem_component_with_known_codes(schema) -> None:
    for path, method, operation in operations(schema):
        for status, response in operation["responses"].items():
            problem = response.get("content", {}).get("application/problem+json")
            if problem is None:
                continue
            ref, narrowed = problem["schema"]["allOf"]
            assert ref == {"$ref": "#/components/schemas/Problem"}
            for code in narrowed["properties"]["code"]["enum"]:
                assert PROBLEMS[code].status == int(status), f"{method} {path}: {code}"
                assert f"`{code}`" in response["description"]
    held = schema["paths"]["/api/v1/actors/forget"]["post"]["responses"]["202"]
    assert "held-for-approval" in json.dumps(held)
    conflict = schema["paths"]["/api/v1/memories"]["post"]["responses"]["409"]
    assert {"memory-conflict", "off-the-record"} <= set(json.dumps(conflict).split('"'))


def _raised_codes() -> dict[str, set[int]]:
    """Every code literal raised in Iris: `SomeError(..., code="x")` and a kernel check's
    `Decision(name, Verdict.DENY, "x", ...)` (answered as 403)."""
    raised: dict[str, set[int]] = {}
    for app in APPS:
        for file in (ROOT / app).rglob("*.py"):
            if "migrations" in file.parts:
                continue
            for node in ast.walk(ast.parse(file.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in STATUS_OF_CLASS:
                    for keyword in node.keywords:
                        if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                            raised.setdefault(keyword.value.value, set()).add(STATUS_OF_CLASS[name])
                deny = (
                    name == "Decision"
                    and len(node.args) >= 3
                    and isinstance(node.args[1], ast.Attribute)
                    and node.args[1].attr == "DENY"
                    and isinstance(node.args[2], ast.Constant)
                )
                if deny:
                    raised.setdefault(node.args[2].value, set()).add(403)
    return raised


def test_every_code_iris_raises_is_in_the_problem_table_with_its_status() -> None:
    raised = _raised_codes()
    assert len(raised) > 40
    missing = {code for code in raised if code not in PROBLEMS}
    assert missing == set(), "add these to governance/problems.py"
    wrong = {
        code: statuses for code, statuses in raised.items() if statuses != {PROBLEMS[code].status}
    }
    assert wrong == {}


def test_the_problem_table_names_no_code_iris_never_answers() -> None:
    source = "\n".join(
        file.read_text()
        for app in APPS
        for file in (ROOT / app).rglob("*.py")
        if file.name != "problems.py" and "migrations" not in file.parts
    )
    unused = {code for code in PROBLEMS if f'"{code}"' not in source}
    assert unused == set()
