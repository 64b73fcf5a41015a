"""One MemoryEntry shape everywhere: a recalled entry is what `GET memories/{id}` gives,
field for field, whatever path answered the recall, and the OpenAPI schema describes the
recall answer with no untyped placeholders."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory.recall import db as recall_db
from memory.recall import pipeline as recall
from memory.recall import service as recall_service
from memory.recall import snapshot as recall_snapshot
from memory.recall.ranking import semantic
from memory.serializers import MemoryEntryOut
from memory.services import (
    ActorMention,
    Correction,
    ProvenanceRef,
    SuppressionMarker,
    memory_correct,
    memory_write,
)
from tests.factories import as_member, draft, grant_category, grant_storage

RECALL = "/api/v1/recall"
QUERY = "which coffee helps my migraine"

# Every field of the MemoryEntry, and what a recall may do to it. Recall adds its own
# fields (score, surfaceRationale) beside the entry, never inside it.
COMMON_FIELDS = {
    "id": "equal",
    "revisionId": "equal",
    "tenantId": "equal",
    "userId": "equal",
    "scope": "equal",
    "scopeKey": "equal",
    "category": "equal",
    "body": "equal, or inside the external-content envelope",
    "subject": "equal",
    "origin": "equal",
    "lifecycle": "equal",
    "suppression": "equal",
    "multiActor": "equal",
    "consents": "equal",
    "provenanceChain": "equal",
    "referenceCount": "equal",
    "lastReferencedAt": "equal",
    "createdAt": "equal",
    "updatedAt": "equal",
    "revision": "equal",
    "supersedes": "equal",
}


def test_the_table_names_every_field_of_the_schema() -> None:
    assert list(COMMON_FIELDS) == list(MemoryEntryOut().fields)


def _write(member: Any, body: str, *, origin: str = "user-stated", **extra: Any) -> str:
    now = timezone.now()
    outcome = memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(
            member,
            body,
            category="medical",
            origin=origin,
            subject="migraine remedy",
            multi_actor=ActorMention(actor_name="Anna", relationship_note="my sister"),
            # Ended yesterday: on the entry, and no longer keeping it from recall.
            suppression=SuppressionMarker(
                reason="sensitive-category",
                started_at=now - timedelta(days=3),
                ends_at=now - timedelta(days=1),
                notes="held back while the consent was reviewed",
            ),
            **extra,
        ),
    )
    assert outcome.written, outcome.reason
    assert outcome.entry is not None
    return str(outcome.entry.entry_id)


@pytest.fixture
def corrected(member) -> str:
    """A sensitive memory with every optional part filled, in its second revision."""
    grant_storage(member)
    grant_category(member, "medical")
    entry_id = _write(
        member,
        "Strong coffee helps my migraine",
        provenance_chain=[
            ProvenanceRef(kind="session-turn", ref="turn-7", captured_at=timezone.now())
        ],
    )
    outcome = memory_correct(
        principal=as_member(member),
        member=member,
        entry_id=entry_id,
        correction=Correction(body="Strong black coffee helps my migraine"),
    )
    assert outcome.entry is not None and outcome.entry.revision == 2
    return entry_id


def _ask(member: Any) -> dict[str, Any]:
    return {
        "userId": str(member.public_id),
        "scope": {"kind": "profile"},
        "query": QUERY,
        "surface": "assistant",
        "context": "health",
        "destinationTier": "local",
    }


def _got(api: Any, member: Any, entry_id: str) -> dict[str, Any]:
    response = api.get(f"/api/v1/memories/{entry_id}", {"userId": str(member.public_id)})
    assert response.status_code == 200, response.content
    return response.json()


def _disagreements(recalled: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (recalled.get(name), got.get(name))
        for name in COMMON_FIELDS
        if name not in recalled or name not in got or recalled[name] != got[name]
    }


def test_a_recalled_entry_and_a_get_of_it_agree_on_every_field(
    surface_api, member, corrected
) -> None:
    got = _got(surface_api, member, corrected)
    response = surface_api.post(RECALL, _ask(member), format="json")
    assert response.status_code == 200, response.content
    (item,) = response.json()["entries"]
    recalled = item["entry"]
    assert list(recalled) == list(got) == list(COMMON_FIELDS)
    assert _disagreements(recalled, got) == {}
    # The entry exercised every optional part, so no field agreed by being empty.
    assert got["revision"] == 2 and got["supersedes"] is not None
    assert got["supersedes"] != got["revisionId"]
    assert got["scope"] == {"kind": "profile", "userId": str(member.public_id)}
    assert [c["category"] for c in got["consents"]] == ["medical"]
    assert got["suppression"]["reason"] == "sensitive-category"
    assert got["multiActor"]["relationshipNote"] == "my sister"
    assert got["provenanceChain"][0]["ref"] == "turn-7"
    assert got["subject"]


@pytest.mark.parametrize("path", ["streaming", "snapshot", "exhaustive"])
def test_every_recall_path_renders_the_entry_as_get_does(
    member_api, member, corrected, path
) -> None:
    got = _got(member_api, member, corrected)
    ask = recall_service.RecallAsk(
        scope_kind="profile",
        scope_identifiers={},
        scope_key=None,
        query=QUERY,
        surface="assistant",
        context="health",
    )
    request = recall_service.build_request(
        principal=as_member(member), member=member, ask=ask, now=timezone.now()
    )
    options: dict[str, Any] = {
        "ranker_name": "lexical",
        "prepare": semantic.semantic_for("lexical"),
    }
    if path == "streaming":
        result = recall_db.fast_resolve(request, member=member, **options).result
    elif path == "snapshot":
        result = recall_snapshot.resolve_once(request, member=member, **options).result
    else:
        result = recall_db.exhaustive_resolve(request, member=member, **options)
    (item,) = recall.to_wire(result)["entries"]
    assert _disagreements(item["entry"], got) == {}


def test_an_imported_body_differs_only_by_the_envelope(surface_api, member) -> None:
    grant_storage(member)
    grant_category(member, "medical")
    entry_id = _write(member, "Coffee eases a migraine, says the leaflet", origin="imported")
    got = _got(surface_api, member, entry_id)
    (item,) = surface_api.post(RECALL, _ask(member), format="json").json()["entries"]
    recalled = item["entry"]
    assert recalled["body"] == recall.wrap_external(got["body"], source="imported")
    assert set(_disagreements(recalled, got)) == {"body"}


def test_the_database_row_positions_follow_the_selected_columns() -> None:
    columns = len(recall_db._COLUMNS.split(","))
    assert len(recall_db._PG_COLUMNS.split(",")) == columns
    assert (recall_db._ANCHOR_AT, recall_db._STREAM_AT, recall_db._VECTOR_AT) == (
        columns,
        columns + 1,
        columns + 2,
    )


# --------------------------------------------------------------------------------------
# The schema


def _schema(api: Any) -> dict[str, Any]:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    if "allOf" in node and len(node["allOf"]) == 1:
        # How drf-spectacular marks a nested serializer nullable.
        return {
            **_resolved(schema, node["allOf"][0]),
            **{k: v for k, v in node.items() if k != "allOf"},
        }
    return node


def _untyped(schema: dict[str, Any], node: dict[str, Any], where: str, seen: set[str]) -> list[str]:
    """Every place under `node` that leaves a value's shape open."""
    if "$ref" in node:
        if node["$ref"] in seen:
            return []
        seen = seen | {node["$ref"]}
    node = _resolved(schema, node)
    kind = node.get("type")
    if kind is None and "enum" not in node and "oneOf" not in node:
        return [where]
    if "oneOf" in node:
        return [
            p
            for i, n in enumerate(node["oneOf"])
            for p in _untyped(schema, n, f"{where}|{i}", seen)
        ]
    if kind == "array":
        items = node.get("items")
        return [f"{where}[]"] if not items else _untyped(schema, items, f"{where}[]", seen)
    if kind != "object":
        return []
    found: list[str] = []
    properties = node.get("properties", {})
    extra = node.get("additionalProperties")
    if not properties and not isinstance(extra, dict):
        found.append(where)
    for name, child in properties.items():
        found += _untyped(schema, child, f"{where}.{name}", seen)
    if isinstance(extra, dict):
        if not extra:
            found.append(f"{where}.*")
        else:
            found += _untyped(schema, extra, f"{where}.*", seen)
    return found


def _recall_answer(schema: dict[str, Any]) -> dict[str, Any]:
    operation = schema["paths"]["/api/v1/recall"]["post"]
    return operation["responses"]["200"]["content"]["application/json"]["schema"]


def test_the_recall_schema_types_every_value(member_api) -> None:
    schema = _schema(member_api)
    assert _untyped(schema, _recall_answer(schema), "RecallOut", set()) == []


def test_the_walk_finds_an_untyped_dict() -> None:
    schema = {"components": {"schemas": {"Loose": {"type": "object"}}}}
    node = {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/Loose"}}}
    assert _untyped(schema, node, "Top", set()) == ["Top.a"]
    loose_map = {"type": "object", "additionalProperties": {}}
    assert _untyped(schema, loose_map, "Map", set()) == ["Map.*"]
    untyped_list = {"type": "array", "items": {}}
    assert _untyped(schema, untyped_list, "List", set()) == ["List[]"]


def test_recall_entries_are_the_memory_entry_schema(member_api) -> None:
    schema = _schema(member_api)
    entries = _resolved(schema, _recall_answer(schema))["properties"]["entries"]
    item = _resolved(schema, entries["items"])
    got = schema["paths"]["/api/v1/memories/{entry_id}"]["get"]["responses"]["200"]
    assert item["properties"]["entry"] == got["content"]["application/json"]["schema"]
    assert set(item["properties"]) == {"entry", "score", "surfaceRationale", "provenanceChain"}
    envelope = _resolved(
        schema, _resolved(schema, _recall_answer(schema))["properties"]["auditEnvelope"]
    )
    assert envelope["properties"]["suppressionCounts"]["additionalProperties"]["type"] == "integer"


def _conforms(schema: dict[str, Any], node: dict[str, Any], value: Any, where: str) -> list[str]:
    """Where `value` leaves the schema: a missing or extra key, a wrong type or enum."""
    node = _resolved(schema, node)
    if value is None:
        return [] if node.get("nullable") else [f"{where}: null"]
    for choice in ("oneOf", "anyOf"):  # one variant per kind (a scope): any that fits
        if choice in node:
            tried = [_conforms(schema, branch, value, where) for branch in node[choice]]
            return [] if [] in tried else min(tried, key=len)
    if "enum" in node and value not in node["enum"]:
        return [f"{where}: {value!r} not in the enum"]
    kind = node.get("type")
    python = {"string": str, "integer": int, "number": (int, float), "boolean": bool}
    if kind in python:
        ok = isinstance(value, python[kind]) and not (kind != "boolean" and value is True)
        return [] if ok else [f"{where}: not {kind}"]
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: not array"]
        return [
            p
            for i, v in enumerate(value)
            for p in _conforms(schema, node["items"], v, f"{where}[{i}]")
        ]
    if not isinstance(value, dict):
        return [f"{where}: not object"]
    properties = node.get("properties", {})
    found = [
        f"{where}.{k}: not in the schema"
        for k in value
        if k not in properties and "additionalProperties" not in node
    ]
    found += [f"{where}.{k}: missing" for k in node.get("required", []) if k not in value]
    for key, child in value.items():
        sub = properties.get(key) or node.get("additionalProperties")
        if isinstance(sub, dict):
            found += _conforms(schema, sub, child, f"{where}.{key}")
    return found


def test_a_recall_answer_conforms_to_its_schema(surface_api, member_api, member, corrected) -> None:
    schema = _schema(member_api)
    answer = surface_api.post(RECALL, _ask(member), format="json").json()
    assert answer["entries"]
    assert _conforms(schema, _recall_answer(schema), answer, "answer") == []
    # And the check bites: an entry with a field the schema does not name fails it.
    answer["entries"][0]["entry"]["scopeKind"] = "profile"
    assert _conforms(schema, _recall_answer(schema), answer, "answer") == [
        "answer.entries[0].entry.scopeKind: not in the schema"
    ]
