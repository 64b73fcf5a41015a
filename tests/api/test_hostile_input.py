"""Hostile input at every field of every mutating API operation (issue 19).

For each operation a valid request is spoiled at one place: a field (top level or nested,
or the whole body) takes a value with an unpaired surrogate, NUL or another control
character, an instant outside the calendar Iris accepts, nesting deeper than the parser
allows, a value of the wrong JSON type, or a new key is added. Each such request must get
a 4xx problem+json, leave no audit event and no `Idempotency-Key` reserved.

Text that is odd but usable (right-to-left marks, arbitrary Unicode) may be accepted where
the field is free text; wherever it lands, the answer is never a 5xx and never leaves a
reservation. Bounded: a few hundred requests, seconds on SQLite.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from governance.models import AuditEvent, IdempotencyRecord
from tests.api.helpers import PROBLEM, World, consent, recall, token, write

pytestmark = pytest.mark.django_db

DATE_FIELDS = {"capturedAt", "startedAt", "endsAt", "clientTimestamp", "occurredAt"}
DEEP = "__deep__"
SOME_ID = "5f1d8c0e-3b1a-4f7e-9a51-0c7d2e4b6a19"


@dataclass(frozen=True)
class Op:
    name: str
    method: str
    url: Callable[[World], str]
    body: Callable[[World], dict[str, Any]]
    by_member: bool = False
    # Sent by an operator of the member's tenant (support) instead of the surface.
    by_operator: bool = False

    @property
    def in_query(self) -> bool:
        return self.method == "delete"


def _uid(w: World) -> dict[str, Any]:
    return {"userId": w.user_id}


def _entry(action: str = "") -> Callable[[World], str]:
    return lambda w: f"/api/v1/memories/{w.entry_id}{action}"


OPS = [
    Op(
        "memories-write",
        "post",
        lambda w: "/api/v1/memories",
        lambda w: write(
            w,
            sessionId="s-1",
            subject="music",
            multiActor={"actorName": "Anna", "relationshipNote": "sister"},
            suppression={
                "reason": "safety-hold",
                "startedAt": "2025-01-01T00:00:00Z",
                "notes": "n",
            },
            provenanceChain=[
                {"kind": "user-message", "ref": "m-1", "capturedAt": "2025-01-01T00:00:00Z"}
            ],
        ),
    ),
    Op(
        "memories-write-notebook",
        "post",
        lambda w: "/api/v1/memories",
        lambda w: write(w, scope={"kind": "notebook", "userId": w.user_id, "notebookId": "nb-1"}),
    ),
    Op(
        "memories-correct",
        "patch",
        _entry(),
        lambda w: {"userId": w.user_id, "body": "My home city is Bonn", "category": "preference"},
    ),
    Op("memories-forget", "post", _entry("/forget"), _uid),
    Op(
        "memories-pause",
        "post",
        _entry("/pause"),
        lambda w: {
            "userId": w.user_id,
            "endsAt": "2999-01-01T00:00:00Z",
            "notes": "a break",
            "canPause": True,
        },
    ),
    Op(
        "memories-resume",
        "post",
        _entry("/resume"),
        lambda w: {"userId": w.user_id, "runId": SOME_ID},
    ),
    Op("memories-confirm", "post", _entry("/confirm"), _uid),
    Op(
        "memories-scope",
        "post",
        _entry("/scope"),
        lambda w: {
            "userId": w.user_id,
            "scope": {"kind": "notebook", "userId": w.user_id, "notebookId": "n1"},
        },
    ),
    Op(
        "conflict-answer",
        "post",
        lambda w: f"/api/v1/memories/conflicts/{w.conflict_id}/answer",
        lambda w: {"userId": w.user_id, "answer": "keep"},
    ),
    Op(
        "actors-forget",
        "post",
        lambda w: "/api/v1/actors/forget",
        lambda w: {"userId": w.user_id, "actorName": "Anna"},
    ),
    Op(
        "off-the-record-on",
        "post",
        lambda w: "/api/v1/off-the-record",
        lambda w: {"userId": w.user_id, "sessionId": "s-9", "surface": "assistant"},
    ),
    Op(
        "off-the-record-off",
        "delete",
        lambda w: "/api/v1/off-the-record",
        lambda w: {"userId": w.user_id, "sessionId": "s-9", "surface": "assistant"},
    ),
    Op(
        "recall",
        "post",
        lambda w: "/api/v1/recall",
        lambda w: recall(
            w,
            crisisFrame=False,
            safetyCriticalContext=False,
            limit=5,
            consentedCategories=["preference"],
            destinationTier="local",
        ),
    ),
    Op(
        "consents-record",
        "post",
        lambda w: "/api/v1/consents",
        lambda w: consent(w, occurredAt="2025-01-01T00:00:00Z", witness="w-1"),
    ),
    Op(
        "continuation-write",
        "post",
        lambda w: "/api/v1/continuation-tokens",
        lambda w: token(
            w, anchorRef={"surface": "assistant", "kind": "turn", "ref": "t-1", "offsetMs": 5}
        ),
    ),
    Op("continuation-forget", "delete", lambda w: "/api/v1/continuation-tokens", _uid),
    Op(
        "run-step",
        "post",
        lambda w: f"/api/v1/runs/{SOME_ID}/steps",
        lambda w: {"tool": "web.search", "readExternalContent": False, "source": "example.org"},
    ),
    Op(
        "data-rights-delete",
        "post",
        lambda w: "/api/v1/data-rights",
        lambda w: {
            "userId": w.user_id,
            "kind": "delete",
            "payload": {
                "mode": "soft",
                "scopes": ["profile"],
                "categories": ["preference"],
                "purgeConsentLedger": False,
                "retentionGraceMs": 1000,
            },
        },
    ),
    Op(
        "data-rights-export",
        "post",
        lambda w: "/api/v1/data-rights",
        lambda w: {
            "userId": w.user_id,
            "kind": "export",
            "payload": {
                "scopes": ["profile", "pose"],
                "includePoseMemory": True,
                "encrypted": True,
                "passphrase": "a long passphrase",
                "deliveryChannel": "download",
            },
        },
    ),
    Op(
        "data-rights-transition",
        "post",
        lambda w: f"/api/v1/data-rights/{SOME_ID}/transition",
        lambda w: {"userId": w.user_id, "to": "verified", "method": "email-link", "code": "1"},
    ),
    Op(
        "data-rights-code",
        "post",
        lambda w: f"/api/v1/data-rights/{SOME_ID}/verification-code",
        lambda w: {"userId": w.user_id, "method": "email-link"},
    ),
    Op(
        "data-rights-undo",
        "post",
        lambda w: f"/api/v1/data-rights/{SOME_ID}/undo",
        _uid,
    ),
    Op(
        "data-rights-extend",
        "post",
        lambda w: f"/api/v1/data-rights/{SOME_ID}/extend",
        lambda w: {"reason": "Archive restore"},
    ),
    Op(
        "inspection-request",
        "post",
        lambda w: "/api/v1/inspections",
        lambda w: {
            "userId": w.user_id,
            "path": "routine-review",
            "justification": "The member reported a wrong reminder.",
            "scope": {"kind": "profile", "userId": w.user_id},
            "sensitivity": "standard",
            "reasonCode": "reminder-bug",
            "consentSnapshotId": SOME_ID,
        },
        by_operator=True,
    ),
    Op(
        "inspection-request-incident",
        "post",
        lambda w: "/api/v1/inspections",
        lambda w: {
            "userId": w.user_id,
            "path": "incident-escalation",
            "justification": "Threat report 4411.",
            "incidentReference": (f"iris-inc1.{'a' * 32}.4102444800.{'b' * 16}.{'c' * 64}"),
        },
        by_operator=True,
    ),
    Op(
        "inspection-transition",
        "post",
        lambda w: f"/api/v1/inspections/{SOME_ID}/transition",
        lambda w: {
            "to": "granted",
            "reasonCode": "looks-fine",
            "consentSnapshotId": SOME_ID,
            "carveOut": False,
        },
        by_operator=True,
    ),
    Op(
        "approval-decide",
        "post",
        lambda w: f"/api/v1/approvals/{SOME_ID}/decide",
        lambda w: {"decision": "deny"},
        by_member=True,
    ),
]


# ------------------------------------------------------------------------- hostile values


def _spliced(bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda a, b, c: a + b + c, st.text(max_size=6), bad, st.text(max_size=6))


SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
CONTROL = st.sampled_from(
    [chr(c) for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))]
)
BIDI = st.sampled_from(["\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069", "\u200b"])


@st.composite
def far_instants(draw: st.DrawFn) -> str:
    """An RFC 3339 string well outside 1900-9000 UTC (the calendar's edge included)."""
    early = draw(st.booleans())
    low, high = (
        (datetime(1, 1, 2), datetime(1898, 1, 1))
        if early
        else (datetime(9001, 1, 1), datetime(9999, 12, 30))
    )
    moment = draw(st.datetimes(min_value=low, max_value=high))
    offset = draw(st.integers(min_value=-14 * 60, max_value=14 * 60))
    tz = timezone(timedelta(minutes=offset))
    edge = draw(st.sampled_from(["", "9999-12-31T23:59:59-10:00", "0001-01-01T00:00:00+10:00"]))
    return edge or moment.replace(tzinfo=tz).isoformat()


JSON_SCALARS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63), st.floats(allow_nan=False), st.booleans()
)
WRONG_TYPES: dict[type, st.SearchStrategy[Any]] = {
    str: st.one_of(JSON_SCALARS, st.lists(st.text(max_size=3), max_size=2), st.just({})),
    bool: st.one_of(
        st.sampled_from(["yes", "true", "1", "on"]), st.integers(0, 1), st.just([True])
    ),
    int: st.one_of(st.sampled_from(["5", "1e3"]), st.booleans(), st.floats(0.5, 3.5)),
    dict: st.one_of(JSON_SCALARS, st.text(max_size=3), st.just([])),
    list: st.one_of(JSON_SCALARS, st.text(max_size=3), st.just({})),
}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _get(body: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        body = body[part]
    return body


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(body, path[:-1])[path[-1]] = value
    return body


@dataclass(frozen=True)
class Spoil:
    path: tuple[Any, ...]
    value: Any
    new_key: str | None  # set: add this key (with `value`) inside the object at `path`
    must_refuse: bool
    kind: str


@st.composite
def spoils(draw: st.DrawFn, base: dict[str, Any], in_query: bool) -> Spoil:
    if in_query:
        # A query string has no types or nesting: only text can be spoiled there.
        path = (draw(st.sampled_from(sorted(base))),)
        kind = draw(st.sampled_from(["control", "control-key", "bidi", "unicode"]))
    else:
        path = draw(st.sampled_from(_paths(base)))
        kind = draw(
            st.sampled_from(
                [
                    "surrogate",
                    "control",
                    "surrogate-key",
                    "control-key",
                    "unknown-key",
                    "far-date",
                    "deep",
                    "wrong-type",
                    "bidi",
                    "unicode",
                ]
            )
        )
    current = _get(base, path)
    if kind.endswith("-key") or kind == "unknown-key":
        target = path
        while not isinstance(_get(base, target), dict):
            target = target[:-1]
        bad = SURROGATE if kind.startswith("surrogate") else CONTROL
        key = (
            draw(_spliced(bad))
            if kind != "unknown-key"
            else draw(
                st.sampled_from(["colour", "crisisFrme", "Body", "is_admin", "x y", "__proto__"])
            )
        )
        if in_query:
            target = ()
        return Spoil(target, draw(st.text(max_size=4)), key, True, kind)
    if kind == "surrogate":
        return Spoil(path, draw(_spliced(SURROGATE)), None, True, kind)
    if kind == "control":
        return Spoil(path, draw(_spliced(CONTROL)), None, True, kind)
    if kind == "far-date":
        leaf = path[-1] if path else None
        return Spoil(path, draw(far_instants()), None, leaf in DATE_FIELDS, kind)
    if kind == "deep":
        return Spoil(path, DEEP, None, True, kind)
    if kind == "wrong-type":
        if path == () or current is None:
            return Spoil(path, draw(WRONG_TYPES[dict]), None, True, kind)
        value = draw(WRONG_TYPES[type(current)])
        return Spoil(path, value, None, True, kind)
    if kind == "bidi":
        return Spoil(path, draw(_spliced(BIDI)), None, False, kind)
    return Spoil(path, draw(st.text(max_size=20)), None, False, kind)


def _request(client: APIClient, op: Op, w: World, spoil: Spoil, key: str, depth: int):
    if op.by_operator:
        client = client.operator
    body = op.body(w)
    if spoil.new_key is not None:
        _get(body, spoil.path)[spoil.new_key] = spoil.value
    else:
        body = _set(body, spoil.path, spoil.value)
    headers = {"Idempotency-Key": key}
    if op.in_query:
        url = f"{op.url(w)}?{urlencode(body)}"
        return getattr(client, op.method)(url, headers=headers)
    text = json.dumps(body)  # escapes a lone surrogate as \ud800, as a client would
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    return getattr(client, op.method)(
        op.url(w), text, content_type="application/json", headers=headers
    )


def _open_reservations() -> int:
    return IdempotencyRecord.objects.filter(status_code__isnull=True).count()


@pytest.fixture
def clients(surface_token, member, make_operator):
    surface = APIClient(raise_request_exception=False)
    surface.credentials(HTTP_AUTHORIZATION=f"Bearer {surface_token}")
    own = APIClient(raise_request_exception=False)
    own.force_login(member)
    operator = APIClient(raise_request_exception=False)
    operator.force_login(make_operator("support"))
    # Operator routes are sent by this client (`_request` picks it for `by_operator`).
    # It rides on the surface client so that the test function's source, and with it
    # Hypothesis's derandomised examples for the other operations, stay as they were.
    surface.operator = operator
    return surface, own


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_input_is_a_clean_4xx(op: Op, world: World, clients, data) -> None:
    surface, own = clients
    spoil = data.draw(spoils(op.body(world), op.in_query), label="spoil")
    depth = data.draw(st.integers(min_value=17, max_value=3000), label="depth")
    audits = AuditEvent.objects.count()
    response = _request(
        own if op.by_member else surface, op, world, spoil, str(uuid.uuid4()), depth
    )

    assert response.status_code < 500, (spoil, response.content)
    if response.status_code >= 400:
        assert response["Content-Type"] == PROBLEM, response.content
        problem = response.json()
        assert problem["status"] == response.status_code and problem["code"]
        assert "Traceback" not in response.content.decode()
    if spoil.must_refuse:
        assert 400 <= response.status_code < 500, (spoil, response.content)
        assert AuditEvent.objects.count() == audits, spoil
    assert _open_reservations() == 0


def test_every_operation_is_in_the_list() -> None:
    """A mutating route added later must be added above (the schema is the list)."""
    from django.urls import get_resolver

    names = {name for name in get_resolver().reverse_dict if isinstance(name, str)}
    covered = {
        "api-memories",
        "api-memory",
        "api-memory-forget",
        "api-memory-pause",
        "api-memory-resume",
        "api-memory-confirm",
        "api-memory-scope",
        "api-memory-conflict-answer",
        "api-actors-forget",
        "api-off-the-record",
        "api-recall",
        "api-consents",
        "api-continuation-tokens",
        "api-run-steps",
        "api-approvals-decide",
        "api-data-rights",
        "api-data-rights-transition",
        "api-data-rights-code",
        "api-data-rights-extend",
        "api-data-rights-undo",
        "api-inspections",
        "api-inspection-transition",
    }
    read_only = {
        "api-health",
        "api-memory-history",
        "api-consents-active",
        "api-approvals",
        "api-data-rights-detail",
        "api-data-rights-bundle",
        "api-data-rights-signing-key",
        "api-inspection-detail",
        "api-inspection-snapshot",
        "api-inspection-replay",
        "api-events",
    }
    api = {n for n in names if n.startswith("api-") and n not in {"api-schema", "api-docs"}}
    assert api <= covered | read_only, api - covered - read_only
