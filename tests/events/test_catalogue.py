"""The event catalogue: every source is a real audit action, and an event carries only
the ids and codes its type names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.catalogue import EVENT_TYPE_NAMES, SOURCES, derive
from governance.actions import AuditAction

A = AuditAction
EXPECTED = [
    (A.MEMORY_ENTRY_WRITTEN, "memory.written", "written"),
    (A.MEMORY_ENTRY_CORRECTED, "memory.written", "corrected"),
    (A.MEMORY_ENTRY_PROMOTED, "memory.written", "promoted"),
    (A.MEMORY_ENTRY_FORGOTTEN, "memory.forgotten", "soft"),
    (A.MEMORY_ENTRY_HARD_DELETED, "memory.forgotten", "hard"),
    (A.MEMORY_RECALL_RESOLVED, "recall.completed", "resolved"),
    (A.CONSENT_EVENT_APPENDED, "consent.changed", "appended"),
    (A.CONSENT_EVENTS_PURGED, "consent.changed", "purged"),
    (A.DSAR_REQUEST_SUBMITTED, "data_rights.submitted", "submitted"),
    (A.DSAR_REQUEST_TRANSITIONED, "data_rights.transitioned", "transitioned"),
    (A.ADMIN_INSPECTION_TRANSITION, "inspection.transitioned", "transitioned"),
]


@pytest.mark.parametrize(("action", "event_type", "change"), EXPECTED)
def test_each_source_action_becomes_its_event(action, event_type, change) -> None:
    derived = derive(action, ["m-1", "e-1"], {})
    assert derived is not None
    assert (derived.type, derived.data["change"], derived.member_id) == (event_type, change, "m-1")


def test_the_table_is_complete_and_names_real_actions() -> None:
    assert sorted(SOURCES) == sorted(a for a, _, _ in EXPECTED)
    assert set(SOURCES) <= {a.value for a in AuditAction}
    assert {s.event_type.name for s in SOURCES.values()} == set(EVENT_TYPE_NAMES)


def test_other_actions_emit_nothing() -> None:
    assert derive(A.GOVERNANCE_DECISION_ALLOW, ["x"], {}) is None
    assert derive(A.VAULT_SECRET_STORED, ["x"], {}) is None


def test_a_recall_names_what_it_returned() -> None:
    derived = derive(
        A.MEMORY_RECALL_RESOLVED,
        ["m-1", "e-1", "e-2"],
        {"returnedIds": ["e-1", "e-2"], "scopeKeyHash": "abc", "suppressionCounts": {"x": 1}},
    )
    assert derived is not None
    assert derived.data == {"change": "resolved", "returnedIds": ["e-1", "e-2"]}


payloads = st.dictionaries(
    st.sampled_from(["body", "text", "subject", "note", "query", "entryId", "from", "kind", "x"]),
    st.one_of(st.text(max_size=300), st.integers(), st.dictionaries(st.text(), st.text())),
)


@given(action=st.sampled_from(sorted(SOURCES)), payload=payloads)
def test_an_event_copies_only_its_type_s_keys_and_no_text(action, payload) -> None:
    derived = derive(action, ["m-1"], payload)
    assert derived is not None
    allowed = {"change", "returnedIds", *SOURCES[action].event_type.keys}
    assert set(derived.data) <= allowed
    for value in derived.data.values():
        assert not isinstance(value, dict)
        assert not (isinstance(value, str) and len(value) > 100)
