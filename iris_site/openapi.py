"""The last step of the OpenAPI schema: the problems every operation can answer with.

`iris_site.api_operations` gives each operation its words and the codes only it can
raise; this hook adds the ones any call can meet (authentication, rate limit, bad input,
a missing member or resource, a reused `Idempotency-Key`), groups them by status into
documented responses of the shared `Problem` component, with the `code` narrowed to the
operation's list, and marks `userId` required wherever a surface must send it. Meanings come from
`governance.problems`, so the schema says what the code does.
"""

from __future__ import annotations

from typing import Any

from governance.idempotency import HEADER, IDEMPOTENT_HANDLERS
from governance.problems import PROBLEMS, problems_by_status
from iris_site.api_operations import OPERATIONS, OperationDoc

PROBLEM_CODES_KEY = "x-problem-codes"

PROBLEM_MEDIA_TYPE = "application/problem+json"
MUTATING = {"post", "put", "patch", "delete"}

USER_ID_DESCRIPTION = (
    "The member this call acts for (see the member's own page, or `seed_demo`'s output). "
    "Required from a surface; a member's own browser session may leave it out."
)

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem. `code` is stable; `detail` is for people.",
    "required": ["type", "title", "status", "code", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "One item per broken rule (400s, and a few 403s).",
            "items": {"$ref": "#/components/schemas/ProblemFieldError"},
        },
        "question": {
            "type": "string",
            "description": "`memory-conflict`: what to ask the member.",
        },
        "conflictId": {"type": "string", "format": "uuid", "description": "`memory-conflict`."},
        "entryId": {"type": "string", "format": "uuid", "description": "`memory-conflict`."},
        "approvalId": {
            "type": "string",
            "format": "uuid",
            "description": "`held-for-approval`: the approval the member answers.",
        },
        "card": {
            "type": "string",
            "description": "`held-for-approval`: what the member is asked, in plain words.",
        },
        "notes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "`scope-suppressed`: the scope policy's notes.",
        },
    },
}
PROBLEM_FIELD_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["field", "rule", "message"],
    "properties": {
        "field": {
            "type": "string",
            "nullable": True,
            "description": "The field's path in the request (`scope.sessionId`), or null.",
        },
        "rule": {"type": "string", "description": "The rule it broke (`required`, `invalid`)."},
        "message": {"type": "string"},
        "allowed": {"type": "array", "items": {"type": "string"}},
    },
}

# Cross-field rules no single field can say (the views enforce them; see their descriptions).
CROSS_FIELD_RULES: dict[str, dict[str, Any]] = {
    "RecallIn": {"oneOf": [{"required": ["scope"]}, {"required": ["scopeKey"]}]},
}

_HEADERS_BY_STATUS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {
            "schema": {"type": "string"},
            "description": '`Bearer realm="iris"`',
        }
    },
    429: {
        "Retry-After": {
            "schema": {"type": "integer"},
            "description": "Seconds to wait before retrying.",
        }
    },
}


def _idempotent_operations(generator: Any) -> set[tuple[str, str]]:
    found = set()
    for path, _regex, method, callback in generator.endpoints or ():
        handler = getattr(getattr(callback, "cls", None), method.lower(), None)
        if handler in IDEMPOTENT_HANDLERS:
            found.add((path, method.lower()))
    return found


def _request_component(operation: dict[str, Any]) -> str | None:
    content = operation.get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    return ref.rsplit("/", 1)[-1] or None


def _common_codes(
    path: str, operation: dict[str, Any], *, idempotent: bool, body: dict[str, Any] | None
) -> list[str]:
    codes: list[str] = []
    parameters = operation.get("parameters", [])
    takes_input = bool(parameters) or operation.get("requestBody") is not None
    if takes_input or idempotent:
        codes.append("validation-failed")
    if operation.get("requestBody") is not None:
        codes += ["malformed-request", "payload-too-large", "unsupported-media-type"]
    if operation.get("security") != [{}]:
        codes.append("not-authenticated")
    names = {p["name"] for p in parameters} | set((body or {}).get("properties", {}))
    if "{" in path or "userId" in names:
        codes.append("not-found")
    if "runId" in names:  # a governed call that names its run meets the run's limits
        codes += ["run-id-invalid", "run-write-limit", "run-loop-detected"]
    if idempotent:
        codes += ["idempotency-key-reused", "idempotency-in-progress"]
    codes.append("rate-limited")
    return codes


def _problem_response(status: int, codes: list[str]) -> dict[str, Any]:
    grouped = problems_by_status(codes)[status]
    lines = [f"- `{p.code}`: {p.meaning}" for p in grouped]
    response: dict[str, Any] = {
        "description": "\n".join(lines),
        "content": {
            PROBLEM_MEDIA_TYPE: {
                "schema": {
                    "allOf": [
                        {"$ref": "#/components/schemas/Problem"},
                        {
                            "type": "object",
                            "properties": {
                                "status": {"type": "integer", "enum": [status]},
                                "code": {"type": "string", "enum": [p.code for p in grouped]},
                            },
                        },
                    ]
                }
            }
        },
    }
    if status in _HEADERS_BY_STATUS:
        response["headers"] = _HEADERS_BY_STATUS[status]
    return response


def _mark_user_id(operation: dict[str, Any], body: dict[str, Any] | None) -> None:
    for parameter in operation.get("parameters", []):
        if parameter["name"] == "userId" and parameter["in"] == "query":
            parameter["required"] = True
            parameter["description"] = USER_ID_DESCRIPTION
    if body is not None and "userId" in body.get("properties", {}):
        required = body.setdefault("required", [])
        if "userId" not in required:
            required.insert(0, "userId")
        body["properties"]["userId"]["description"] = USER_ID_DESCRIPTION


def _add_examples(operation: dict[str, Any], doc: OperationDoc) -> None:
    """Request examples, each with the status (and code) it answers with on a fresh demo."""
    for example in doc.examples:
        expected: dict[str, Any] = {"x-expected-status": example.status}
        if example.code:
            expected["x-expected-code"] = example.code
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            body.setdefault("examples", {})[example.name] = {
                "summary": example.summary,
                "value": example.value,
                **expected,
            }
            continue
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and parameter["name"] in example.value:
                parameter.setdefault("examples", {})[example.name] = {
                    "summary": example.summary,
                    "value": example.value[parameter["name"]],
                    **expected,
                }


def document_problems(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas["ProblemFieldError"] = PROBLEM_FIELD_ERROR_SCHEMA
    for name, rule in CROSS_FIELD_RULES.items():
        schemas[name].update(rule)
    idempotent_ops = _idempotent_operations(generator)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            doc = OPERATIONS.get(operation["operationId"])
            if doc is not None:
                operation["tags"] = [doc.tag]
                operation["summary"] = doc.summary
                operation["description"] = doc.description
                _add_examples(operation, doc)
            component = _request_component(operation)
            body = schemas.get(component) if component else None
            idempotent = (path, method) in idempotent_ops
            _mark_user_id(operation, body)
            parameters = operation.setdefault("parameters", [])
            if idempotent and not any(p["name"] == HEADER for p in parameters):
                parameters.append(
                    {
                        "in": "header",
                        "name": HEADER,
                        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                        "description": "Send one to make a retry safe: a repeat with the same "
                        "key and body returns the first answer and changes nothing.",
                    }
                )
            declared = list(doc.problems) if doc is not None else []
            codes = [*declared, *_common_codes(path, operation, idempotent=idempotent, body=body)]
            operation[PROBLEM_CODES_KEY] = list(dict.fromkeys(codes))
            responses = operation.setdefault("responses", {})
            for status in problems_by_status(codes):
                documented = _problem_response(status, codes)
                existing = responses.get(str(status))
                if existing is None or "content" not in existing:
                    responses[str(status)] = documented
                    continue
                # A status with a success body too (a 202 that is an answer, not a hold).
                existing["content"].update(documented["content"])
                existing["description"] += "\n\nOr a problem:\n" + documented["description"]
    return result


__all__ = ["PROBLEMS", "document_problems"]
