"""The consent ledger's rules: event shape, fingerprints, the hash chain, and derivation.

Spec: "Consent Ledger". Each member has one append-only chain of events: consents
(granted / revoked) and opt-outs (opted-out / opted-in). The rules here are pure; the
models and services store the rows and call them.

Tamper evidence works in two layers (DESIGN invariant 3, "hash the content, chain the
hashes"):

- `fingerprint(event)` is the SHA-256 of the event's canonical body (`canonical_body`);
- `chain_link(prev, fingerprint)` binds each fingerprint to everything before it.

Erasing personal data from a ledger row removes its body but keeps its fingerprint, so
`validate_chain` can still verify the chain: an erased row is checked by its link only.
A stored body also carries a random `nonce` that the fingerprint covers: without it the
few fields of a consent event (a type out of ~30, a status, a basis, a method, a timestamp
that the chain row and the audit give away) could be recovered from the kept fingerprint
by trying every combination, and erasure would erase nothing. The nonce belongs to storage,
not to the member's act, so it is an argument of `canonical_body` / `fingerprint` / `seal`
rather than a field of `LedgerEvent`; it is erased with the body.

Derivation: the current state of a consent type (or opt-out category) is its latest
event, where "latest" means the greatest `occurred_at`, and on equal `occurred_at` the
greater `position`. `occurred_at` leads because events can be recorded out of order (a
data-rights import or an operator entering a paper form days later): the member's most
recent act wins, not the most recent keystroke in Iris. `position` breaks ties because
it is unique in a member's chain and records arrival order.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from consent.enums import (
    CONSENT_TYPES,
    SENSITIVE_CATEGORIES,
    CaptureMethod,
    Category,
    ConsentSource,
    ConsentStatus,
    ConsentType,
    LegalBasis,
    OptOutCategory,
    OptOutStatus,
    category_consent_type,
)
from governance.rules import RuleError

RECORD_VERSION = 1
GENESIS_HASH = "0" * 64

# A surface's clock may run a little ahead of ours; more than this is a future event.
OCCURRED_AT_SKEW = timedelta(minutes=5)

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32 = re.compile(r"[0-9a-f]{32}")


class EventKind(StrEnum):
    CONSENT = "consent"
    OPT_OUT = "opt-out"


# Consent types that unlock GDPR Article 9 special-category data. Granting one needs
# explicit consent (Art. 9(2)(a)); a plain Art. 6 basis is not enough.
_CATEGORY_CONSENT_TYPES: dict[str, Category] = {
    category_consent_type(c): c for c in SENSITIVE_CATEGORIES
}
SENSITIVE_CONSENT_TYPES: frozenset[str] = frozenset(
    {*_CATEGORY_CONSENT_TYPES, ConsentType.SENSITIVE_DATA, ConsentType.MULTI_ACTOR_SENSITIVE}
)

# The memory contract's ConsentEntry knows three sources. An operator-recorded consent
# was captured outside the member's own in-product action (a signed form, a call) and
# entered by staff: like an import, it came from outside the product, so it maps to
# dsar-import. The witness stays on the ledger row.
SOURCE_OF_CAPTURE: dict[CaptureMethod, ConsentSource] = {
    CaptureMethod.INLINE_PROMPT: ConsentSource.INLINE_PROMPT,
    CaptureMethod.SETTINGS_TOGGLE: ConsentSource.SETTINGS_TOGGLE,
    CaptureMethod.DSAR_IMPORT: ConsentSource.DSAR_IMPORT,
    CaptureMethod.OPERATOR_RECORDED: ConsentSource.DSAR_IMPORT,
}


class ConsentRuleError(RuleError):
    """A consent event broke a rule. `allowed` lists the values that would have been
    accepted (empty when no fixed list applies, e.g. a witness that must be absent)."""

    def __init__(self, field: str, rule: str, allowed: Iterable[str] = ()) -> None:
        super().__init__(field, rule, allowed=allowed)


@dataclass(frozen=True)
class LedgerEvent:
    event_id: str
    member_id: str
    position: int  # 1-based, per member chain
    kind: str  # EventKind
    consent_type: str  # a CONSENT_TYPES value, or an OptOutCategory for opt-outs
    status: str  # ConsentStatus for consents, OptOutStatus for opt-outs
    legal_basis: str
    capture_method: str
    terms_hash: str
    witness: str | None
    occurred_at: datetime
    recorded_at: datetime
    record_version: int = RECORD_VERSION


# ---------------------------------------------------------------- validation


def _aware(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ConsentRuleError(field, "timezone-aware-datetime-required")
    return value


def validate_event_fields(
    *,
    kind: str,
    consent_type: str,
    status: str,
    legal_basis: str,
    capture_method: str,
    terms_hash: str,
    witness: str | None,
    occurred_at: datetime,
    recorded_at: datetime,
) -> None:
    """Raise ConsentRuleError for the first rule the event's fields break."""
    kinds = tuple(EventKind)
    if kind not in kinds:
        raise ConsentRuleError("kind", "unknown-kind", kinds)

    if kind == EventKind.CONSENT:
        types: tuple[str, ...] = CONSENT_TYPES
        statuses, other_statuses = tuple(ConsentStatus), tuple(OptOutStatus)
    else:
        types = tuple(OptOutCategory)
        statuses, other_statuses = tuple(OptOutStatus), tuple(ConsentStatus)
    if consent_type not in types:
        raise ConsentRuleError("consent_type", f"unknown-{kind}-type", types)
    if status not in statuses:
        rule = "status-does-not-match-kind" if status in other_statuses else "unknown-status"
        raise ConsentRuleError("status", rule, statuses)

    if legal_basis not in tuple(LegalBasis):
        raise ConsentRuleError("legal_basis", "unknown-legal-basis", tuple(LegalBasis))
    if capture_method not in tuple(CaptureMethod):
        raise ConsentRuleError("capture_method", "unknown-capture-method", tuple(CaptureMethod))

    # Only grants need Art. 9 explicit consent: withdrawing must stay as easy as giving
    # (Art. 7(3)), so a revocation is never refused over its stated basis.
    if (
        kind == EventKind.CONSENT
        and status == ConsentStatus.GRANTED
        and consent_type in SENSITIVE_CONSENT_TYPES
        and legal_basis != LegalBasis.EXPLICIT_CONSENT
    ):
        raise ConsentRuleError(
            "legal_basis", "art-9-explicit-consent-required", (LegalBasis.EXPLICIT_CONSENT,)
        )

    # A consent a member did not give in the product needs a named person who saw it.
    if capture_method == CaptureMethod.OPERATOR_RECORDED:
        if witness is None or not witness.strip():
            raise ConsentRuleError("witness", "witness-required-for-operator-recorded")
    elif witness is not None:
        raise ConsentRuleError("witness", "witness-only-for-operator-recorded")

    if not isinstance(terms_hash, str) or not _HEX64.fullmatch(terms_hash):
        raise ConsentRuleError("terms_hash", "sha256-hex-required")

    _aware(occurred_at, "occurred_at")
    _aware(recorded_at, "recorded_at")
    if occurred_at > recorded_at + OCCURRED_AT_SKEW:
        raise ConsentRuleError("occurred_at", "occurred-after-recorded")


def validate_event(event: LedgerEvent) -> None:
    if event.record_version != RECORD_VERSION:
        raise ConsentRuleError("record_version", "unknown-record-version", (str(RECORD_VERSION),))
    if not str(event.member_id).strip():
        raise ConsentRuleError("member_id", "member-required")
    if event.position < 1:
        raise ConsentRuleError("position", "position-starts-at-1")
    validate_event_fields(
        kind=event.kind,
        consent_type=event.consent_type,
        status=event.status,
        legal_basis=event.legal_basis,
        capture_method=event.capture_method,
        terms_hash=event.terms_hash,
        witness=event.witness,
        occurred_at=event.occurred_at,
        recorded_at=event.recorded_at,
    )


def build_event(
    *,
    member_id: str,
    position: int,
    kind: str,
    consent_type: str,
    status: str,
    legal_basis: str,
    capture_method: str,
    terms_hash: str,
    occurred_at: datetime,
    recorded_at: datetime,
    witness: str | None = None,
    event_id: str | None = None,
) -> LedgerEvent:
    """A validated event with plain-string values (so enums never leak into hashes)."""
    event = LedgerEvent(
        event_id=event_id or str(uuid.uuid4()),
        member_id=str(member_id),
        position=position,
        kind=str(kind),
        consent_type=str(consent_type),
        status=str(status),
        legal_basis=str(legal_basis),
        capture_method=str(capture_method),
        terms_hash=terms_hash,
        witness=witness,
        occurred_at=occurred_at,
        recorded_at=recorded_at,
    )
    validate_event(event)
    return event


# ---------------------------------------------------------------- fingerprints and chain

CANONICAL_FIELDS: tuple[str, ...] = (
    "record_version",
    "member_id",
    "kind",
    "consent_type",
    "status",
    "legal_basis",
    "capture_method",
    "terms_hash",
    "witness",
    "occurred_at",
    "recorded_at",
)


def rfc3339_utc(value: datetime, field: str = "timestamp") -> str:
    """`2025-03-01T12:00:00.000000Z`: always UTC, always microseconds, so one instant has
    one spelling whatever zone it arrived in."""
    utc = _aware(value, field).astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "Z"


def canonical_body(event: LedgerEvent, *, nonce: str | None = None) -> bytes:
    """The bytes a fingerprint is taken over: sorted-key compact JSON in UTF-8.

    `event_id` and `position` are left out on purpose: they place the event in the chain,
    and the chain link already binds the order. `nonce` (32 lowercase hex characters,
    128 random bits) is added as a key when given: every stored event has one, and an
    event hashed without one keeps the plain form.
    """
    body: dict[str, Any] = {
        "record_version": int(event.record_version),
        "member_id": str(event.member_id),
        "kind": str(event.kind),
        "consent_type": str(event.consent_type),
        "status": str(event.status),
        "legal_basis": str(event.legal_basis),
        "capture_method": str(event.capture_method),
        "terms_hash": str(event.terms_hash),
        "witness": None if event.witness is None else str(event.witness),
        "occurred_at": rfc3339_utc(event.occurred_at, "occurred_at"),
        "recorded_at": rfc3339_utc(event.recorded_at, "recorded_at"),
    }
    if nonce is not None:
        if not _HEX32.fullmatch(nonce):
            raise ValueError("nonce must be 32 lowercase hex characters")
        body["nonce"] = nonce
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def body_fingerprint(body: bytes | str) -> str:
    data = body.encode() if isinstance(body, str) else bytes(body)
    return hashlib.sha256(data).hexdigest()


def fingerprint(event: LedgerEvent, *, nonce: str | None = None) -> str:
    """Spec: computeIrisConsentEventFingerprint."""
    return body_fingerprint(canonical_body(event, nonce=nonce))


def chain_link(prev_chain_hash: str, fingerprint: str) -> str:
    """SHA-256 over the previous chain hash followed by this fingerprint (both 64 hex
    characters, so the concatenation is unambiguous). The first row's prev is
    GENESIS_HASH."""
    for name, value in (("prev_chain_hash", prev_chain_hash), ("fingerprint", fingerprint)):
        if not _HEX64.fullmatch(value):
            raise ValueError(f"{name} must be 64 lowercase hex characters")
    return hashlib.sha256((prev_chain_hash + fingerprint).encode("ascii")).hexdigest()


class ChainRowLike(Protocol):
    """What `validate_chain` reads from a stored row (a model instance will do)."""

    @property
    def position(self) -> int: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def chain_hash(self) -> str: ...
    @property
    def body(self) -> bytes | str | None: ...


@dataclass(frozen=True)
class ChainRow:
    position: int
    fingerprint: str
    prev_hash: str
    chain_hash: str
    body: bytes | str | None  # the canonical body; None once erased


def seal(event: LedgerEvent, prev_chain_hash: str, *, nonce: str | None = None) -> ChainRow:
    """The chain row for appending `event` after a row whose chain hash is given."""
    body = canonical_body(event, nonce=nonce)
    fp = body_fingerprint(body)
    return ChainRow(
        position=event.position,
        fingerprint=fp,
        prev_hash=prev_chain_hash,
        chain_hash=chain_link(prev_chain_hash, fp),
        body=body,
    )


def chain_rows(events: Iterable[LedgerEvent]) -> list[ChainRow]:
    """Seal a whole history in position order, starting from genesis."""
    rows: list[ChainRow] = []
    prev = GENESIS_HASH
    for event in sorted(events, key=lambda e: e.position):
        row = seal(event, prev)
        rows.append(row)
        prev = row.chain_hash
    return rows


def validate_chain(rows: Iterable[ChainRowLike]) -> int | None:
    """The lowest position at which a member's chain fails to verify, or None if it holds.

    Rows may come in any order. Positions must run 1, 2, 3 … without gaps or repeats
    (a missing row 3 reports 3; a second row 2 reports 2). Each row must point at the
    previous row's chain hash and carry the link of that hash and its fingerprint. A row
    with a body must hash to its fingerprint; an erased row (body None) is trusted for its
    fingerprint and checked by its link only.
    """
    prev = GENESIS_HASH
    for expected, row in enumerate(sorted(rows, key=lambda r: r.position), start=1):
        if row.position != expected:
            return min(row.position, expected)
        if row.prev_hash != prev:
            return expected
        if not (_HEX64.fullmatch(row.fingerprint) and _HEX64.fullmatch(row.chain_hash)):
            return expected
        if row.chain_hash != chain_link(prev, row.fingerprint):
            return expected
        if row.body is not None and body_fingerprint(row.body) != row.fingerprint:
            return expected
        prev = row.chain_hash
    return None


# ---------------------------------------------------------------- derivation


def _checked(events: Iterable[LedgerEvent]) -> list[LedgerEvent]:
    """One member's history with unique positions, or a ValueError: mixing chains would
    let one member's revocation answer for another."""
    history = list(events)
    if len({e.member_id for e in history}) > 1:
        raise ValueError("a consent history must belong to one member")
    if len({e.position for e in history}) != len(history):
        raise ValueError("positions in a member's consent history must be unique")
    return history


def _order(event: LedgerEvent) -> tuple[datetime, int]:
    return (event.occurred_at, event.position)


def _latest(history: Iterable[LedgerEvent], kind: EventKind) -> dict[str, LedgerEvent]:
    latest: dict[str, LedgerEvent] = {}
    for event in history:
        if event.kind != kind:
            continue
        current = latest.get(event.consent_type)
        if current is None or _order(event) > _order(current):
            latest[event.consent_type] = event
    return latest


def active_consents(events: Iterable[LedgerEvent]) -> dict[str, LedgerEvent]:
    """The deciding event per consent type, granted or revoked (spec:
    computeIrisActiveConsents). Types never mentioned are absent."""
    return _latest(_checked(events), EventKind.CONSENT)


def active_granted(events: Iterable[LedgerEvent]) -> frozenset[str]:
    return frozenset(
        t for t, e in active_consents(events).items() if e.status == ConsentStatus.GRANTED
    )


def active_opt_outs(events: Iterable[LedgerEvent]) -> dict[str, LedgerEvent]:
    """The deciding event per opt-out category, opted out or back in (the opt-out twin of
    `active_consents`). Categories never mentioned are absent."""
    return _latest(_checked(events), EventKind.OPT_OUT)


def opted_out(events: Iterable[LedgerEvent]) -> frozenset[str]:
    """Opt-out categories whose latest event is `opted-out`."""
    latest = active_opt_outs(events)
    return frozenset(c for c, e in latest.items() if e.status == OptOutStatus.OPTED_OUT)


@dataclass(frozen=True)
class TrailStep:
    event: LedgerEvent
    # False when the event arrived after a later act on the same type (by occurred_at),
    # so recording it changed nothing.
    took_effect: bool
    granted_after: frozenset[str]
    opted_out_after: frozenset[str]


def audit_trail(events: Iterable[LedgerEvent]) -> list[TrailStep]:
    """The full history replayed in position (arrival) order, with the derived state
    after each step (spec: computeIrisConsentAuditTrail). The last step's state equals
    `active_granted` / `opted_out` of the whole history."""
    latest: dict[tuple[str, str], LedgerEvent] = {}
    steps: list[TrailStep] = []
    for event in sorted(_checked(events), key=lambda e: e.position):
        key = (event.kind, event.consent_type)
        current = latest.get(key)
        took_effect = current is None or _order(event) > _order(current)
        if took_effect:
            latest[key] = event
        steps.append(
            TrailStep(
                event=event,
                took_effect=took_effect,
                granted_after=frozenset(
                    t
                    for (k, t), e in latest.items()
                    if k == EventKind.CONSENT and e.status == ConsentStatus.GRANTED
                ),
                opted_out_after=frozenset(
                    c
                    for (k, c), e in latest.items()
                    if k == EventKind.OPT_OUT and e.status == OptOutStatus.OPTED_OUT
                ),
            )
        )
    return steps


@dataclass(frozen=True)
class ConsentEntry:
    """The per-category consent a MemoryEntry carries (spec: ConsentEntrySchema)."""

    category: Category
    granted_at: datetime
    revoked_at: datetime | None
    source: ConsentSource

    def as_contract(self) -> dict[str, str | None]:
        return {
            "category": str(self.category),
            "grantedAt": rfc3339_utc(self.granted_at, "granted_at"),
            "revokedAt": None
            if self.revoked_at is None
            else rfc3339_utc(self.revoked_at, "revoked_at"),
            "source": str(self.source),
        }


def consent_entries(events: Iterable[LedgerEvent]) -> list[ConsentEntry]:
    """One entry per sensitive category that was ever granted, sorted by category.

    The entry describes the latest consent period: `granted_at` and `source` come from
    the grant that opened it (a repeated grant while already granted re-affirms, it does
    not restart the period), `revoked_at` is the revocation that closed it, or None while
    it runs. A revocation with no grant before it leaves no entry.
    """
    periods: dict[Category, ConsentEntry] = {}
    open_: set[Category] = set()
    for event in sorted(_checked(events), key=_order):
        if event.kind != EventKind.CONSENT:
            continue
        category = _CATEGORY_CONSENT_TYPES.get(event.consent_type)
        if category is None:
            continue
        if event.status == ConsentStatus.GRANTED and category not in open_:
            open_.add(category)
            periods[category] = ConsentEntry(
                category=category,
                granted_at=event.occurred_at,
                revoked_at=None,
                source=SOURCE_OF_CAPTURE[CaptureMethod(event.capture_method)],
            )
        elif event.status == ConsentStatus.REVOKED and category in open_:
            open_.discard(category)
            period = periods[category]
            periods[category] = ConsentEntry(
                period.category, period.granted_at, event.occurred_at, period.source
            )
    return [periods[c] for c in sorted(periods)]


# ---------------------------------------------------------------- revocation cascade


def would_revoke_cascade(consent_type: str) -> bool:
    """Whether revoking this consent deletes memory (spec: "Consent-revocation cascade").

    True for a per-category sensitive consent (its category's memory goes) and for
    multi_actor_sensitive (every entry with a sensitive interaction goes). Revoking the
    general consents, sensitive_data included, switches scopes off through the policy
    and leaves deletion to the member's own forget and data-rights actions.
    """
    return consent_type in _CATEGORY_CONSENT_TYPES or consent_type == (
        ConsentType.MULTI_ACTOR_SENSITIVE
    )


def cascade_categories(consent_type: str) -> frozenset[Category]:
    """The memory categories a revocation deletes. Empty for multi_actor_sensitive: its
    cascade selects entries by `multiActor.sensitiveInteraction`, whatever the category
    (see `cascade_covers_sensitive_interactions`)."""
    category = _CATEGORY_CONSENT_TYPES.get(consent_type)
    return frozenset() if category is None else frozenset({category})


def cascade_covers_sensitive_interactions(consent_type: str) -> bool:
    return consent_type == ConsentType.MULTI_ACTOR_SENSITIVE


def cascade_due(history: Sequence[LedgerEvent], event: LedgerEvent) -> bool:
    """Whether appending `event` to `history` must start a revocation cascade: it is a
    revocation of a cascading type, it becomes the deciding event, and the type was
    granted before it. A late-arriving revocation that an earlier-recorded, later-dated
    grant overrides cascades nothing."""
    if event.kind != EventKind.CONSENT or event.status != ConsentStatus.REVOKED:
        return False
    if not would_revoke_cascade(event.consent_type):
        return False
    before = active_consents(history).get(event.consent_type)
    after = active_consents([*history, event]).get(event.consent_type)
    return after is event and before is not None and before.status == ConsentStatus.GRANTED
