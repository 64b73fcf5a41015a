"""`plainsql.insert` on PostgreSQL: rows whose columns JSON carries exactly go as one JSON
parameter, and come back exactly as written."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance import plainsql
from governance.audit import FORBIDDEN_PAYLOAD_KEYS, Actor, _event, event_canonical, sha256_hex
from governance.models import AuditEvent
from memory.recall.models import MemoryEmbedding, RecallEvent

pytestmark = pytest.mark.django_db

_WHEN = datetime(2026, 12, 5, 8, 30, 15, 123456, tzinfo=UTC)

# Codes and ids, as audit payloads hold: any Unicode, quotes and backslashes included, but
# not NUL, which PostgreSQL stores in neither text nor jsonb (however it is sent), nor a
# lone surrogate, which UTF-8 cannot carry.
_chars = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
_text = st.text(_chars, max_size=40)
_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text
_payload = st.dictionaries(
    st.text(_chars, min_size=1, max_size=12).filter(
        lambda k: k.lower() not in FORBIDDEN_PAYLOAD_KEYS
    ),
    st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=6),
    max_size=5,
)


def _events(payloads: list[dict], tenant: uuid.UUID | None) -> list[AuditEvent]:
    return [
        _event(
            actor=Actor.system('probe "quoted" \\ back'),
            action="memory.recall",
            tenant_id=tenant,
            reason_code="",
            subject_ids=[str(uuid.uuid4()), "x'y"],
            payload=payload,
            occurred_at=_WHEN + timedelta(microseconds=i),
        )
        for i, payload in enumerate(payloads)
    ]


def _read(event: AuditEvent) -> AuditEvent:
    return AuditEvent.objects.get(seq=event.seq)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payloads=st.lists(_payload, min_size=1, max_size=5), tenant=st.none() | st.uuids())
def test_audit_rows_come_back_exactly_as_written(require_postgres, payloads, tenant) -> None:
    events = _events(payloads, tenant)
    plainsql.insert(AuditEvent, events)
    for event in events:
        stored = _read(event)
        assert stored.id == event.id
        assert stored.occurred_at == event.occurred_at
        assert stored.tenant_id == event.tenant_id
        assert (stored.actor_kind, stored.actor_id) == (event.actor_kind, event.actor_id)
        assert stored.subject_ids == event.subject_ids
        assert stored.payload == event.payload
        # What the chain's verification recomputes from the stored row.
        assert sha256_hex(event_canonical(stored)) == event.content_hash


def test_each_object_gets_its_own_key_in_order(require_postgres) -> None:
    events = _events([{"n": i} for i in range(6)], uuid.uuid4())
    plainsql.insert(AuditEvent, events)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 6
    assert [_read(e).payload["n"] for e in events] == list(range(6))


def test_one_statement_text_for_any_number_of_rows(require_postgres) -> None:
    seen: list[tuple[str, int]] = []

    def wrapper(execute, sql, params, many, context):
        seen.append((sql, len(params)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        plainsql.insert(AuditEvent, _events([{}], None))
        plainsql.insert(AuditEvent, _events([{}] * 4, None))
    assert len(seen) == 2
    assert seen[0] == seen[1]
    assert seen[0][1] == 1


@pytest.mark.parametrize(
    ("model", "json"),
    [
        (AuditEvent, True),
        (MemoryEmbedding, False),  # bytes
        (RecallEvent, False),  # a float column
    ],
)
def test_which_models_go_as_json(model, json) -> None:
    assert plainsql._json_safe(model) is json


def test_a_value_json_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError, match="not carried as JSON"):
        plainsql._json_value(b"bytes")
