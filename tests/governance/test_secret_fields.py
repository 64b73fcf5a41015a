"""Issue 19, finding 4: every stored free-text field of every write passes the one secret
screen, from outside (the API), with the outcome a credential in `body` gets: 403
`secret-in-memory` naming the field, nothing stored, no secret in the audit chain.

The corpus (`corpus/secrets_positive.txt`) is tried in every field. Prose fields get the
corpus line as it is; id-like fields (scope ids, session ids, continuity references, tool
names) get the credential itself, for the corpus items whose credential is recognisable on
its own and fits the field's format (a line with spaces is no id: it is refused as a 400
before the screen, which `test_a_field_format_refusal_also_stores_nothing` covers).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from consent.enums import CaptureMethod, ConsentType, LegalBasis
from consent.models import ConsentEvent
from consent.services import consent_record
from governance.kernel_models import RunStep
from governance.models import AuditEvent
from governance.pipeline import Denied
from governance.principal import Principal
from governance.secrets_screen import contains_secret
from memory.continuity.models import ContinuationToken
from memory.models import MemoryEntry, OffTheRecord
from memory.screening import SCREENED_FIELDS
from memory.services import memory_write
from tests.factories import as_member, draft, grant_storage, mention, payload
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

CORPUS = Path(__file__).parent / "corpus" / "secrets_positive.txt"


def _corpus() -> list[tuple[str, str]]:
    """(line, credential) for every corpus item."""
    out = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        marked = line.split("\t", 1)[1].replace("\\n", "\n")
        before, rest = marked.split("«", 1)
        value, after = rest.split("»", 1)
        out.append((before + value + after, value))
    return out


SECRETS = _corpus()
_CONTINUITY_ID = re.compile(r"^[A-Za-z0-9._:~/#@+=-]+$")
_TOOL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}$")


def _prose(limit: int) -> Callable[[str], bool]:
    return lambda text: len(text) <= limit


def _id(limit: int, *, colon: bool = True) -> Callable[[str], bool]:
    return lambda text: len(text) <= limit and (colon or ":" not in text) and bool(text.strip())


@dataclass(frozen=True)
class Field:
    """One stored free-text field of one write, as a surface sends it."""

    name: str  # the wire path the refusal names
    prose: bool  # the corpus line (True) or the bare credential (False)
    fits: Callable[[str], bool]
    send: Callable[[Any, APIClient, Any, str], Any]  # (world, client, member, text) -> response


def _write(client: APIClient, body: dict[str, Any]):
    return client.post("/api/v1/memories", body, format="json")


def _write_with(**extra: Any) -> Callable[[Any, APIClient, Any, str], Any]:
    def send(world, client, member, text):
        body = payload(member)
        for key, value in extra.items():
            body[key] = value(member, text) if callable(value) else value
        return _write(client, body)

    return send


def _scope(kind: str, name: str) -> Callable[[Any, str], dict[str, str]]:
    return lambda member, text: {"kind": kind, "userId": str(member.public_id), name: text}


def _patch(field: str) -> Callable[[Any, APIClient, Any, str], Any]:
    def send(world, client, member, text):
        body: dict[str, Any] = {"userId": str(member.public_id)}
        if field == "relationshipNote":
            body["multiActor"] = {"relationshipNote": text}
        else:
            body[field] = text
        return client.patch(f"/api/v1/memories/{world.entry_id}", body, format="json")

    return send


def _token(member: Any, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scopeKey": f"session:{member.public_id}:s-1",
        "surfaceContext": {"surface": "assistant", "sessionId": "s-1", "itemId": "book-42"},
        "anchorRef": {"surface": "assistant", "kind": "turn", "ref": "turn-7"},
        "posture": "conversing",
        "deviceId": "phone-1",
        "clientTimestamp": "2025-03-01T12:00:00Z",
    }
    for path, value in changes.items():
        head, _, tail = path.partition(".")
        if tail:
            body[head] = {**body[head], tail: value}
        else:
            body[head] = value
    return body


def _continuity(path: str) -> Callable[[Any, APIClient, Any, str], Any]:
    def send(world, client, member, text):
        value = f"session:{member.public_id}:{text}" if path == "scopeKey" else text
        body = _token(member, **{path: value})
        return client.post("/api/v1/continuation-tokens", body, format="json")

    return send


def _step(field: str) -> Callable[[Any, APIClient, Any, str], Any]:
    def send(world, client, member, text):
        body: dict[str, Any] = {"tool": "web.fetch", "readExternalContent": False, field: text}
        return client.post(f"/api/v1/runs/{uuid.uuid4()}/steps", body, format="json")

    return send


FIELDS: tuple[Field, ...] = (
    # POST memories (memory.write)
    Field("body", True, _prose(4000), _write_with(body=lambda m, t: t)),
    Field("subject", True, _prose(200), _write_with(subject=lambda m, t: t)),
    Field("sessionId", False, _id(128), _write_with(sessionId=lambda m, t: t)),
    Field(
        "scope.notebookId",
        False,
        _id(128, colon=False),
        _write_with(scope=_scope("notebook", "notebookId"), category="work"),
    ),
    Field(
        "scope.sessionId",
        False,
        _id(128, colon=False),
        _write_with(scope=_scope("session", "sessionId")),
    ),
    Field(
        "multiActor.relationshipNote",
        True,
        _prose(500),
        _write_with(multiActor=lambda m, t: {"actorName": "Ana", "relationshipNote": t}),
    ),
    Field(
        "suppression.notes",
        True,
        _prose(500),
        _write_with(
            suppression=lambda m, t: {
                "reason": "crisis-frame",
                "startedAt": "2025-01-01T00:00:00Z",
                "notes": t,
            }
        ),
    ),
    Field(
        "provenanceChain[0].ref",
        True,
        _prose(200),
        _write_with(
            provenanceChain=lambda m, t: [
                {"kind": "session-turn", "ref": t, "capturedAt": "2025-01-01T00:00:00Z"}
            ]
        ),
    ),
    # PATCH memories/{id} (memory.correct)
    Field("body", True, _prose(4000), _patch("body")),
    Field("subject", True, _prose(200), _patch("subject")),
    Field("multiActor.relationshipNote", True, _prose(500), _patch("relationshipNote")),
    # POST memories/{id}/pause
    Field(
        "notes",
        True,
        _prose(500),
        lambda w, c, m, t: c.post(
            f"/api/v1/memories/{w.entry_id}/pause",
            {"userId": str(m.public_id), "notes": t},
            format="json",
        ),
    ),
    # POST off-the-record
    Field(
        "sessionId",
        False,
        _id(128),
        lambda w, c, m, t: c.post(
            "/api/v1/off-the-record", {"userId": str(m.public_id), "sessionId": t}, format="json"
        ),
    ),
    # POST continuation-tokens
    Field(
        "scopeKey",
        False,
        lambda t: bool(re.fullmatch(r"[A-Za-z0-9._~@+=-]+", t)) and len(t) < 400,
        _continuity("scopeKey"),
    ),
    Field(
        "surfaceContext.sessionId",
        False,
        lambda t: bool(_CONTINUITY_ID.match(t)) and len(t) <= 128,
        _continuity("surfaceContext.sessionId"),
    ),
    Field(
        "surfaceContext.itemId",
        False,
        lambda t: bool(_CONTINUITY_ID.match(t)) and len(t) <= 128,
        _continuity("surfaceContext.itemId"),
    ),
    Field(
        "anchorRef.ref",
        False,
        lambda t: bool(_CONTINUITY_ID.match(t)) and len(t) <= 512,
        _continuity("anchorRef.ref"),
    ),
    Field(
        "deviceId",
        False,
        lambda t: bool(_CONTINUITY_ID.match(t)) and len(t) <= 128,
        _continuity("deviceId"),
    ),
    # POST runs/{runId}/steps
    Field("tool", False, lambda t: bool(_TOOL.match(t)), _step("tool")),
    Field("source", True, lambda t: len(t) <= 200 and t.isprintable(), _step("source")),
)


def _cases() -> list[Any]:
    cases = []
    for field in FIELDS:
        for index, (line, value) in enumerate(SECRETS):
            text = line if field.prose else value
            if not field.fits(text) or not contains_secret(text):
                continue
            cases.append(pytest.param(field, text, value, id=f"{field.name}-{index}"))
    return cases


CASES = _cases()


@dataclass
class World:
    entry_id: str


@pytest.fixture
def world(member) -> World:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "My sister's favourite colour is blue", multi_actor=mention("Ana")),
    ).entry
    assert entry is not None
    return World(entry_id=str(entry.entry_id))


def _stored() -> tuple[int, ...]:
    return (
        MemoryEntry.objects.count(),
        OffTheRecord.objects.count(),
        ContinuationToken.objects.count(),
        RunStep.objects.count(),
        ConsentEvent.objects.count(),
    )


def _audit_dump() -> str:
    return "\n".join(
        f"{e.reason_code} {e.subject_ids} {e.payload}" for e in AuditEvent.objects.all()
    )


def _is_identifier(name: str) -> bool:
    return name == "sessionId" or name.startswith("scope.")


def test_every_field_the_screen_lists_is_tried_with_the_corpus() -> None:
    tried = {field.name.replace("[0]", "[]") for field in FIELDS}
    listed = {name for names in SCREENED_FIELDS.values() for name in names}
    # `scope.<id>` stands for each identifier; the scope key is built from them. A mode is
    # a short lowercase code: no credential in the corpus fits it, so none is tried there.
    missing = listed - tried - {"scope.<id>", "surfaceContext.mode"}
    assert not missing, missing
    for field in FIELDS:
        assert sum(1 for case in CASES if case.values[0] is field) >= 5, field.name


@pytest.mark.parametrize(("field", "text", "value"), CASES)
def test_a_credential_in_any_stored_field_is_refused_like_one_in_the_body(
    surface_api, member, world, field, text, value
) -> None:
    before = _stored()
    response = field.send(world, surface_api, member, text)

    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["errors"][0]["field"] == field.name
    if response.status_code == 400:
        # An identifier cannot hold a line break at all: refused as malformed before the
        # screen looks at it, with nothing stored all the same.
        assert "\n" in text and _is_identifier(field.name), problem
        assert problem["errors"][0]["rule"] == "invisible-character"
    else:
        assert response.status_code == 403, problem
        assert problem["code"] == "secret-in-memory"
        assert problem["errors"][0]["rule"] == "secret-in-memory"
    # A short credential ("PIN: 4821") can be a substring of any hex id: look for the text.
    needle = value if len(value) >= 12 else text
    assert needle not in str(problem)
    assert _stored() == before
    assert needle not in _audit_dump()
    assert find_in_database(needle) == []


def test_a_field_format_refusal_also_stores_nothing(surface_api, member, world) -> None:
    line, value = next((line, value) for line, value in SECRETS if ":" in line)
    body = payload(member, scope={"kind": "notebook", "userId": str(member.public_id)})
    body["scope"]["notebookId"] = line
    response = _write(surface_api, body)
    assert response.status_code == 400
    assert find_in_database(value) == []


@pytest.mark.parametrize(("line", "value"), [s for s in SECRETS if len(s[0]) <= 200][:12])
def test_a_credential_in_a_consent_witness_is_refused_and_never_stored(
    member, make_operator, line, value
) -> None:
    operator = make_operator("support")
    principal = Principal(
        kind="operator",
        id=operator.public_id,
        tenant_id=member.tenant_id,
        roles=frozenset({"support"}),
    )
    with pytest.raises(Denied) as raised:
        consent_record(
            principal=principal,
            member=member,
            consent_type=ConsentType.DATA_PROCESSING,
            status="granted",
            legal_basis=LegalBasis.CONSENT,
            capture_method=CaptureMethod.OPERATOR_RECORDED,
            witness=line,
        )
    assert raised.value.code == "secret-in-memory"
    assert raised.value.extra["errors"][0]["field"] == "witness"
    assert not ConsentEvent.objects.exists()
    assert (value if len(value) >= 12 else line) not in _audit_dump()
