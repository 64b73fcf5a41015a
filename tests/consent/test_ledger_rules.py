"""The consent ledger's pure rules: fingerprints, the chain, validation and derivation."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consent.enums import (
    CONSENT_TYPES,
    CaptureMethod,
    Category,
    ConsentSource,
    ConsentStatus,
    ConsentType,
    LegalBasis,
    OptOutCategory,
    OptOutStatus,
)
from consent.ledger import (
    CANONICAL_FIELDS,
    GENESIS_HASH,
    ChainRow,
    ConsentEntry,
    ConsentRuleError,
    EventKind,
    LedgerEvent,
    active_consents,
    active_granted,
    audit_trail,
    build_event,
    canonical_body,
    cascade_categories,
    cascade_covers_sensitive_interactions,
    cascade_due,
    chain_link,
    chain_rows,
    consent_entries,
    fingerprint,
    opted_out,
    validate_chain,
    validate_event,
    validate_event_fields,
    would_revoke_cascade,
)
from consent.terms import TERMS, current_terms, terms, terms_hash, version_of_hash

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
MEMBER = "6f1c2a34-0000-4000-8000-000000000001"
TERMS_HASH = current_terms().hash


def event(position: int = 1, **overrides: Any) -> LedgerEvent:
    fields: dict[str, Any] = {
        "event_id": f"00000000-0000-4000-8000-{position:012d}",
        "member_id": MEMBER,
        "position": position,
        "kind": "consent",
        "consent_type": "data_processing",
        "status": "granted",
        "legal_basis": "consent",
        "capture_method": "settings-toggle",
        "terms_hash": TERMS_HASH,
        "witness": None,
        "occurred_at": T0,
        "recorded_at": T0,
    }
    fields.update(overrides)
    return LedgerEvent(**fields)


def valid_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "kind": "consent",
        "consent_type": "data_processing",
        "status": "granted",
        "legal_basis": "consent",
        "capture_method": "settings-toggle",
        "terms_hash": TERMS_HASH,
        "witness": None,
        "occurred_at": T0,
        "recorded_at": T0,
    }
    fields.update(overrides)
    return fields


# ---------------------------------------------------------------- canonical body


def test_canonical_body_is_sorted_compact_json_of_exactly_the_content_fields() -> None:
    body = canonical_body(event())
    assert body == (
        b'{"capture_method":"settings-toggle","consent_type":"data_processing",'
        b'"kind":"consent","legal_basis":"consent","member_id":"' + MEMBER.encode() + b'",'
        b'"occurred_at":"2025-03-01T12:00:00.000000Z",'
        b'"record_version":1,"recorded_at":"2025-03-01T12:00:00.000000Z",'
        b'"status":"granted","terms_hash":"' + TERMS_HASH.encode() + b'","witness":null}'
    )
    assert set(json.loads(body)) == set(CANONICAL_FIELDS)


def test_canonical_body_spells_one_instant_one_way_whatever_its_zone() -> None:
    paris = timezone(timedelta(hours=1))
    local = event(occurred_at=datetime(2025, 3, 1, 13, 0, 0, tzinfo=paris))
    assert canonical_body(local) == canonical_body(event())
    assert fingerprint(local) == fingerprint(event())


def test_canonical_body_keeps_microseconds() -> None:
    body = json.loads(canonical_body(event(recorded_at=T0.replace(microsecond=7))))
    assert body["recorded_at"] == "2025-03-01T12:00:00.000007Z"


def test_enum_and_string_values_hash_alike() -> None:
    with_enums = event(
        kind=EventKind.CONSENT,
        consent_type=ConsentType.DATA_PROCESSING,
        status=ConsentStatus.GRANTED,
        legal_basis=LegalBasis.CONSENT,
        capture_method=CaptureMethod.SETTINGS_TOGGLE,
    )
    assert fingerprint(with_enums) == fingerprint(event())


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ConsentRuleError) as raised:
        canonical_body(event(occurred_at=datetime(2025, 3, 1, 12, 0)))
    assert raised.value.field == "occurred_at"


def test_fingerprint_is_sha256_of_the_canonical_body() -> None:
    e = event()
    assert fingerprint(e) == hashlib.sha256(canonical_body(e)).hexdigest()


# One different value for every field that the fingerprint covers.
CHANGES: dict[str, Any] = {
    "record_version": 2,
    "member_id": "6f1c2a34-0000-4000-8000-000000000002",
    "kind": "opt-out",
    "consent_type": "data_storage",
    "status": "revoked",
    "legal_basis": "explicit_consent",
    "capture_method": "inline-prompt",
    "terms_hash": "a" * 64,
    "witness": "operator-7",
    "occurred_at": T0 - timedelta(microseconds=1),
    "recorded_at": T0 + timedelta(seconds=1),
}


def test_every_canonical_field_has_a_change_case() -> None:
    assert set(CHANGES) == set(CANONICAL_FIELDS)
    assert {f.name for f in dataclasses.fields(LedgerEvent)} == {
        *CANONICAL_FIELDS,
        "event_id",
        "position",
    }


@pytest.mark.parametrize(("field", "value"), sorted(CHANGES.items()))
def test_fingerprint_changes_when_any_single_field_changes(field: str, value: Any) -> None:
    original = event()
    changed = dataclasses.replace(original, **{field: value})
    assert fingerprint(changed) != fingerprint(original)


@pytest.mark.parametrize(("field", "value"), [("event_id", "other-id"), ("position", 9)])
def test_fingerprint_ignores_chain_placement(field: str, value: Any) -> None:
    original = event()
    assert fingerprint(dataclasses.replace(original, **{field: value})) == fingerprint(original)


# ---------------------------------------------------------------- chain


def history(n: int) -> list[LedgerEvent]:
    types = ["data_processing", "data_storage", "sensitive_data", "cross_device"]
    return [
        event(
            i,
            consent_type=types[i % len(types)],
            status="granted" if i % 3 else "revoked",
            legal_basis="explicit_consent"
            if types[i % len(types)] == "sensitive_data"
            else "consent",
            occurred_at=T0 + timedelta(minutes=i),
            recorded_at=T0 + timedelta(minutes=i),
        )
        for i in range(1, n + 1)
    ]


def test_chain_link_hashes_the_previous_hash_then_the_fingerprint() -> None:
    fp = fingerprint(event())
    expected = hashlib.sha256((GENESIS_HASH + fp).encode()).hexdigest()
    assert chain_link(GENESIS_HASH, fp) == expected
    assert chain_link(GENESIS_HASH, fp) != chain_link("1" * 64, fp)


def test_chain_link_refuses_values_that_are_not_sha256_hex() -> None:
    with pytest.raises(ValueError):
        chain_link(GENESIS_HASH, "not-a-hash")


def test_chain_rows_start_at_genesis_and_link_each_row_to_the_previous() -> None:
    rows = chain_rows(history(4))
    assert rows[0].prev_hash == GENESIS_HASH
    for before, after in zip(rows, rows[1:], strict=False):
        assert after.prev_hash == before.chain_hash
    assert validate_chain(rows) is None


def test_an_empty_chain_is_valid() -> None:
    assert validate_chain([]) is None


def test_row_order_given_does_not_matter() -> None:
    rows = chain_rows(history(6))
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert validate_chain(shuffled) is None


def _tamper(rows: list[ChainRow], position: int, how: str) -> list[ChainRow]:
    out = rows[:]
    i = position - 1
    row = out[i]
    if how == "body":
        rewritten = json.loads(row.body)
        rewritten["status"] = "granted" if rewritten["status"] == "revoked" else "revoked"
        out[i] = dataclasses.replace(row, body=json.dumps(rewritten, sort_keys=True).encode())
    elif how == "fingerprint":
        out[i] = dataclasses.replace(row, fingerprint="f" * 64)
    elif how == "chain_hash":
        out[i] = dataclasses.replace(row, chain_hash="e" * 64)
    elif how == "prev_hash":
        out[i] = dataclasses.replace(row, prev_hash="d" * 64)
    elif how == "resealed-body":
        # A forger who rewrites the body and its fingerprint still breaks the link.
        rewritten_body = row.body + b" "
        out[i] = dataclasses.replace(
            row, body=rewritten_body, fingerprint=hashlib.sha256(rewritten_body).hexdigest()
        )
    elif how == "deleted":
        del out[i]
    return out


TAMPERINGS = ["body", "fingerprint", "chain_hash", "prev_hash", "resealed-body", "deleted"]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=12),
    data=st.data(),
    how=st.sampled_from(TAMPERINGS),
)
def test_validate_chain_reports_the_first_broken_position(
    n: int, data: st.DataObject, how: str
) -> None:
    rows = chain_rows(history(n))
    position = data.draw(st.integers(min_value=1, max_value=n))
    tampered = _tamper(rows, position, how)
    if how == "deleted" and position == n:
        # Losing the tail leaves a shorter chain that still verifies: truncation is
        # guarded by the database's append-only triggers, not by the chain itself.
        assert validate_chain(tampered) is None
    else:
        assert validate_chain(tampered) == position


def test_two_breaks_report_the_lower_position() -> None:
    rows = _tamper(_tamper(chain_rows(history(8)), 6, "body"), 3, "chain_hash")
    assert validate_chain(rows) == 3


def test_a_repeated_position_is_broken_at_that_position() -> None:
    rows = chain_rows(history(4))
    rows.insert(2, dataclasses.replace(rows[1]))
    assert validate_chain(rows) == 2


def test_a_chain_not_starting_at_one_is_broken_at_one() -> None:
    rows = chain_rows(history(3))
    assert validate_chain(rows[1:]) == 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=1, max_value=12), erase=st.sets(st.integers(1, 12)))
def test_erased_bodies_keep_the_chain_valid(n: int, erase: set[int]) -> None:
    rows = [
        dataclasses.replace(r, body=None) if r.position in erase else r
        for r in chain_rows(history(n))
    ]
    assert validate_chain(rows) is None


def test_an_erased_row_is_still_checked_by_its_link() -> None:
    rows = chain_rows(history(5))
    rows[2] = dataclasses.replace(rows[2], body=None, fingerprint="c" * 64)
    assert validate_chain(rows) == 3


def test_bodies_may_be_stored_as_text() -> None:
    rows = [dataclasses.replace(r, body=r.body.decode()) for r in chain_rows(history(3))]
    assert validate_chain(rows) is None


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("overrides", "field", "rule", "allowed"),
    [
        ({"kind": "whim"}, "kind", "unknown-kind", ("consent", "opt-out")),
        (
            {"consent_type": "telepathy"},
            "consent_type",
            "unknown-consent-type",
            CONSENT_TYPES,
        ),
        (
            {"kind": "opt-out", "consent_type": "data_processing", "status": "opted-out"},
            "consent_type",
            "unknown-opt-out-type",
            tuple(OptOutCategory),
        ),
        ({"status": "maybe"}, "status", "unknown-status", ("granted", "revoked")),
        ({"status": "opted-out"}, "status", "status-does-not-match-kind", ("granted", "revoked")),
        (
            {"kind": "opt-out", "consent_type": "personalization", "status": "granted"},
            "status",
            "status-does-not-match-kind",
            ("opted-out", "opted-in"),
        ),
        ({"legal_basis": "vibes"}, "legal_basis", "unknown-legal-basis", tuple(LegalBasis)),
        (
            {"capture_method": "telegram"},
            "capture_method",
            "unknown-capture-method",
            tuple(CaptureMethod),
        ),
        (
            {"consent_type": "category:medical", "legal_basis": "consent"},
            "legal_basis",
            "art-9-explicit-consent-required",
            ("explicit_consent",),
        ),
        (
            {"consent_type": "sensitive_data", "legal_basis": "legitimate_interests"},
            "legal_basis",
            "art-9-explicit-consent-required",
            ("explicit_consent",),
        ),
        (
            {"consent_type": "multi_actor_sensitive", "legal_basis": "contract"},
            "legal_basis",
            "art-9-explicit-consent-required",
            ("explicit_consent",),
        ),
        (
            {"capture_method": "operator-recorded", "witness": None},
            "witness",
            "witness-required-for-operator-recorded",
            (),
        ),
        (
            {"capture_method": "operator-recorded", "witness": "   "},
            "witness",
            "witness-required-for-operator-recorded",
            (),
        ),
        ({"witness": "operator-7"}, "witness", "witness-only-for-operator-recorded", ()),
        ({"terms_hash": "abc"}, "terms_hash", "sha256-hex-required", ()),
        ({"terms_hash": "A" * 64}, "terms_hash", "sha256-hex-required", ()),
        (
            {"occurred_at": datetime(2025, 3, 1, 12, 0)},
            "occurred_at",
            "timezone-aware-datetime-required",
            (),
        ),
        (
            {"recorded_at": datetime(2025, 3, 1, 12, 0)},
            "recorded_at",
            "timezone-aware-datetime-required",
            (),
        ),
        (
            {"occurred_at": T0 + timedelta(minutes=6)},
            "occurred_at",
            "occurred-after-recorded",
            (),
        ),
    ],
)
def test_validation_errors_name_the_field_the_rule_and_the_allowed_values(
    overrides: dict[str, Any], field: str, rule: str, allowed: tuple[str, ...]
) -> None:
    with pytest.raises(ConsentRuleError) as raised:
        validate_event_fields(**valid_fields(**overrides))
    error = raised.value
    assert (error.field, error.rule) == (field, rule)
    assert error.allowed == tuple(str(a) for a in allowed)
    assert field in str(error)
    for value in error.allowed:
        assert value in str(error)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"consent_type": "category:medical", "legal_basis": "explicit_consent"},
        # Withdrawing is never refused for its stated basis (Art. 7(3)).
        {"consent_type": "category:medical", "status": "revoked", "legal_basis": "consent"},
        {"capture_method": "operator-recorded", "witness": "operator-7"},
        {"kind": "opt-out", "consent_type": "personalization", "status": "opted-out"},
        {"kind": "opt-out", "consent_type": "tenant_sharing", "status": "opted-in"},
        {"occurred_at": T0 + timedelta(minutes=5)},  # within clock skew
        {"occurred_at": T0 - timedelta(days=400), "capture_method": "dsar-import"},
    ],
)
def test_valid_events_pass(overrides: dict[str, Any]) -> None:
    validate_event_fields(**valid_fields(**overrides))


@pytest.mark.parametrize("consent_type", CONSENT_TYPES)
def test_every_consent_type_can_be_granted_with_explicit_consent(consent_type: str) -> None:
    validate_event_fields(**valid_fields(consent_type=consent_type, legal_basis="explicit_consent"))


def test_validate_event_checks_member_position_and_record_version() -> None:
    for overrides, field in [
        ({"member_id": " "}, "member_id"),
        ({"position": 0}, "position"),
        ({"record_version": 2}, "record_version"),
    ]:
        with pytest.raises(ConsentRuleError) as raised:
            validate_event(event(**overrides))
        assert raised.value.field == field


def test_build_event_stores_plain_strings_and_a_uuid() -> None:
    built = build_event(
        member_id=MEMBER,
        position=1,
        kind=EventKind.CONSENT,
        consent_type=ConsentType.DATA_STORAGE,
        status=ConsentStatus.GRANTED,
        legal_basis=LegalBasis.CONSENT,
        capture_method=CaptureMethod.INLINE_PROMPT,
        terms_hash=TERMS_HASH,
        occurred_at=T0,
        recorded_at=T0,
    )
    assert type(built.kind) is str and built.kind == "consent"
    assert type(built.consent_type) is str
    assert len(built.event_id) == 36
    with pytest.raises(ConsentRuleError):
        build_event(
            member_id=MEMBER,
            position=1,
            kind="consent",
            consent_type="category:medical",
            status="granted",
            legal_basis="consent",
            capture_method="inline-prompt",
            terms_hash=TERMS_HASH,
            occurred_at=T0,
            recorded_at=T0,
        )


# ---------------------------------------------------------------- derivation

CONSENT_CHOICES = ["data_processing", "data_storage", "category:medical"]
OPT_OUT_CHOICES = ["personalization", "session_memory"]

# (kind, type, status, minutes after T0): a small minute range forces occurred_at ties.
step = st.one_of(
    st.tuples(
        st.just("consent"),
        st.sampled_from(CONSENT_CHOICES),
        st.sampled_from(["granted", "revoked"]),
        st.integers(0, 5),
    ),
    st.tuples(
        st.just("opt-out"),
        st.sampled_from(OPT_OUT_CHOICES),
        st.sampled_from(["opted-out", "opted-in"]),
        st.integers(0, 5),
    ),
)


def make_history(steps: list[tuple[str, str, str, int]]) -> list[LedgerEvent]:
    return [
        event(
            position,
            kind=kind,
            consent_type=type_,
            status=status,
            legal_basis="explicit_consent",
            occurred_at=T0 + timedelta(minutes=minutes),
            recorded_at=T0 + timedelta(minutes=10),
        )
        for position, (kind, type_, status, minutes) in enumerate(steps, start=1)
    ]


def reference_state(events: list[LedgerEvent], kind: str) -> dict[str, str]:
    """Replay in (occurred_at, position) order; the last status written wins."""
    state: dict[str, str] = {}
    for e in sorted(events, key=lambda e: (e.occurred_at, e.position)):
        if e.kind == kind:
            state[e.consent_type] = e.status
    return state


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(step, max_size=25), seed=st.integers(0, 2**32 - 1))
def test_latest_event_per_type_wins_whatever_order_the_history_arrives_in(
    steps: list[tuple[str, str, str, int]], seed: int
) -> None:
    events = make_history(steps)
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)

    consents = reference_state(events, "consent")
    opt_outs = reference_state(events, "opt-out")

    assert {t: e.status for t, e in active_consents(shuffled).items()} == consents
    assert active_granted(shuffled) == {t for t, s in consents.items() if s == "granted"}
    assert opted_out(shuffled) == {c for c, s in opt_outs.items() if s == "opted-out"}

    trail = audit_trail(shuffled)
    assert [s.event.position for s in trail] == list(range(1, len(events) + 1))
    if trail:
        assert trail[-1].granted_after == active_granted(events)
        assert trail[-1].opted_out_after == opted_out(events)


def test_equal_occurred_at_falls_back_to_position() -> None:
    events = [
        event(1, status="granted"),
        event(2, status="revoked"),  # same instant, later arrival
    ]
    assert active_granted(events) == frozenset()
    assert active_granted(list(reversed(events))) == frozenset()


def test_a_late_recorded_older_act_does_not_override_a_newer_one() -> None:
    revoked_yesterday = event(1, status="revoked", occurred_at=T0)
    paper_form_last_week = event(
        2,
        status="granted",
        capture_method="operator-recorded",
        witness="operator-7",
        occurred_at=T0 - timedelta(days=7),
        recorded_at=T0 + timedelta(days=1),
    )
    events = [revoked_yesterday, paper_form_last_week]
    assert active_granted(events) == frozenset()
    trail = audit_trail(events)
    assert [s.took_effect for s in trail] == [True, False]


def test_derivation_refuses_mixed_members_and_repeated_positions() -> None:
    with pytest.raises(ValueError):
        active_granted([event(1), event(2, member_id="someone-else")])
    with pytest.raises(ValueError):
        active_granted([event(1), event(1, status="revoked")])


def test_opt_outs_and_consents_do_not_mix() -> None:
    events = [
        event(1),
        event(2, kind="opt-out", consent_type="personalization", status="opted-out"),
    ]
    assert active_granted(events) == {"data_processing"}
    assert opted_out(events) == {"personalization"}
    assert set(active_consents(events)) == {"data_processing"}


# ---------------------------------------------------------------- consent entries


def sensitive(position: int, category: str, status: str, minutes: int, **kw: Any) -> LedgerEvent:
    return event(
        position,
        consent_type=f"category:{category}",
        status=status,
        legal_basis="explicit_consent",
        occurred_at=T0 + timedelta(minutes=minutes),
        recorded_at=T0 + timedelta(minutes=minutes),
        **kw,
    )


def test_consent_entries_describe_the_latest_period_of_each_sensitive_category() -> None:
    events = [
        event(1),  # a general consent: no entry
        sensitive(2, "medical", "granted", 1, capture_method="inline-prompt"),
        sensitive(3, "medical", "granted", 2),  # re-affirmation keeps the period open
        sensitive(4, "medical", "revoked", 3),
        sensitive(5, "medical", "granted", 4, capture_method="settings-toggle"),
        sensitive(6, "financial", "granted", 5, capture_method="dsar-import"),
        sensitive(7, "financial", "revoked", 6),
        sensitive(8, "sexuality", "revoked", 7),  # never granted: no entry
    ]
    entries = consent_entries(events)
    assert entries == [
        ConsentEntry(
            Category.FINANCIAL,
            T0 + timedelta(minutes=5),
            T0 + timedelta(minutes=6),
            ConsentSource.DSAR_IMPORT,
        ),
        ConsentEntry(
            Category.MEDICAL, T0 + timedelta(minutes=4), None, ConsentSource.SETTINGS_TOGGLE
        ),
    ]
    assert entries[1].as_contract() == {
        "category": "medical",
        "grantedAt": "2025-03-01T12:04:00.000000Z",
        "revokedAt": None,
        "source": "settings-toggle",
    }


def test_a_reaffirmed_grant_keeps_its_opening_time_and_source() -> None:
    events = [
        sensitive(1, "medical", "granted", 1, capture_method="inline-prompt"),
        sensitive(2, "medical", "granted", 2, capture_method="settings-toggle"),
    ]
    assert consent_entries(events) == [
        ConsentEntry(Category.MEDICAL, T0 + timedelta(minutes=1), None, ConsentSource.INLINE_PROMPT)
    ]


def test_operator_recorded_consent_maps_to_the_import_source() -> None:
    events = [
        sensitive(1, "medical", "granted", 1, capture_method="operator-recorded", witness="op-7")
    ]
    assert consent_entries(events)[0].source == ConsentSource.DSAR_IMPORT


@pytest.mark.parametrize("method", list(CaptureMethod))
def test_every_capture_method_maps_to_a_contract_source(method: CaptureMethod) -> None:
    witness = "op-7" if method == CaptureMethod.OPERATOR_RECORDED else None
    events = [sensitive(1, "legal", "granted", 1, capture_method=method, witness=witness)]
    assert consent_entries(events)[0].source in set(ConsentSource)


def test_consent_entries_follow_occurred_at_not_arrival() -> None:
    events = [
        sensitive(1, "medical", "revoked", 9),
        sensitive(2, "medical", "granted", 1),  # recorded later, happened earlier
    ]
    assert consent_entries(events) == [
        ConsentEntry(
            Category.MEDICAL,
            T0 + timedelta(minutes=1),
            T0 + timedelta(minutes=9),
            ConsentSource.SETTINGS_TOGGLE,
        )
    ]


# ---------------------------------------------------------------- cascade


@pytest.mark.parametrize("consent_type", CONSENT_TYPES)
def test_only_category_and_multi_actor_consents_cascade(consent_type: str) -> None:
    cascades = consent_type.startswith("category:") or consent_type == "multi_actor_sensitive"
    assert would_revoke_cascade(consent_type) is cascades
    if consent_type.startswith("category:"):
        assert cascade_categories(consent_type) == {Category(consent_type.split(":")[1])}
    else:
        assert cascade_categories(consent_type) == frozenset()
    assert cascade_covers_sensitive_interactions(consent_type) is (
        consent_type == "multi_actor_sensitive"
    )


def test_unknown_types_never_cascade() -> None:
    assert would_revoke_cascade("category:fact") is False
    assert would_revoke_cascade("nonsense") is False
    assert cascade_categories("nonsense") == frozenset()


def test_cascade_is_due_only_when_a_granted_cascading_consent_is_revoked() -> None:
    granted = sensitive(1, "medical", "granted", 1)
    revoke = sensitive(2, "medical", "revoked", 2)
    assert cascade_due([granted], revoke) is True
    assert cascade_due([], revoke) is False  # nothing was granted
    assert cascade_due([granted], sensitive(2, "medical", "granted", 2)) is False
    assert cascade_due([event(1)], event(2, status="revoked")) is False  # not cascading
    # A revocation dated before a grant it arrives after decides nothing.
    late_grant = sensitive(1, "medical", "granted", 5)
    stale_revoke = sensitive(2, "medical", "revoked", 1)
    assert cascade_due([late_grant], stale_revoke) is False


# ---------------------------------------------------------------- terms


def test_terms_hash_is_sha256_hex_of_the_utf8_text() -> None:
    assert terms_hash("é") == hashlib.sha256("é".encode()).hexdigest()
    assert len(terms_hash("x")) == 64


def test_every_published_version_has_its_own_hash_and_the_current_one_is_published() -> None:
    hashes = {terms(v).hash for v in TERMS}
    assert len(hashes) == len(TERMS) >= 2
    current = current_terms()
    assert TERMS[current.version] == current.text
    assert version_of_hash(current.hash) == current.version
    assert version_of_hash("0" * 64) is None
    validate_event_fields(**valid_fields(terms_hash=current.hash))


def test_opt_out_statuses_are_the_enums() -> None:
    assert tuple(OptOutStatus) == ("opted-out", "opted-in")
