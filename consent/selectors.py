"""Reads of the consent ledger. Tenant first, one or two queries each.

Every function takes the tenant and the member the caller has already resolved
(`governance.selectors.member_for` or the member's own session); a member of another
tenant simply has no rows here. The memory app codes against these names.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from consent import ledger
from consent.enums import AdapterScope, ConsentStatus
from consent.ledger import ChainRow, ConsentEntry, EventKind, LedgerEvent, TrailStep
from consent.models import ConsentEvent, ConsentEventBody
from consent.policy import ScopePolicy, evaluate_scope_policies
from governance import plainsql
from governance.models import User

MAX_PAGE = 200


def _chain(tenant_id: uuid.UUID, member: User) -> QuerySet[ConsentEvent]:
    return (
        ConsentEvent.objects.filter(tenant_id=tenant_id, member=member)
        .select_related("body")
        .order_by("position")
    )


def body_of(row: ConsentEvent) -> ConsentEventBody | None:
    """The row's body, or None once erased (no query when the body was select_related)."""
    try:
        return row.body
    except ConsentEventBody.DoesNotExist:
        return None


def ledger_event(row: ConsentEvent, *, member: User) -> LedgerEvent | None:
    """The pure event a stored row holds, or None for an erased row. `member` is the row's
    member (passed in so that reading a chain costs no query per row)."""
    body = body_of(row)
    if body is None:
        return None
    return LedgerEvent(
        event_id=str(row.id),
        member_id=str(member.public_id),
        position=row.position,
        kind=body.kind,
        consent_type=body.consent_type,
        status=body.status,
        legal_basis=body.legal_basis,
        capture_method=body.capture_method,
        terms_hash=body.terms_hash,
        witness=body.witness,
        occurred_at=body.occurred_at,
        recorded_at=body.recorded_at,
        record_version=row.record_version,
    )


def _whole_chain(tenant_id: uuid.UUID, member: User) -> list[ConsentEvent]:
    """`_chain` in full, as plain SQL: every memory write and recall reads it."""
    table = ConsentEvent._meta.db_table
    return plainsql.select_with_one(
        ConsentEvent,
        ConsentEventBody,
        "body",
        f"{table}.tenant_id = %s AND {table}.member_id = %s",
        [plainsql.prep(ConsentEvent, "tenant", tenant_id), member.pk],
        suffix=f"ORDER BY {table}.position",
    )


def member_ledger(*, tenant_id: uuid.UUID, member: User) -> list[LedgerEvent]:
    """The member's events in chain order; erased events are left out (one query)."""
    events = (ledger_event(row, member=member) for row in _whole_chain(tenant_id, member))
    return [e for e in events if e is not None]


# `member_ledger`'s columns for a statement another carries along (a recall reads the
# ledger on its snapshot's round trip), each named apart: they may come back as JSON.
_LEDGER_COLUMNS = (
    "e.id AS event_id, e.position AS position, e.record_version AS record_version, "
    "b.kind AS kind, b.consent_type AS consent_type, b.status AS status, "
    "b.legal_basis AS legal_basis, b.capture_method AS capture_method, "
    "b.terms_hash AS terms_hash, b.witness AS witness, b.occurred_at AS occurred_at, "
    "b.recorded_at AS recorded_at"
)


def member_ledger_sql(*, tenant_id: uuid.UUID, member: User) -> tuple[str, list[Any]]:
    """`member_ledger`'s statement, for a caller that asks it within another; its rows go
    to `member_ledger_of`. Erased events have no body, so the join leaves them out."""
    events, bodies = ConsentEvent._meta.db_table, ConsentEventBody._meta.db_table
    sql = (
        f"SELECT {_LEDGER_COLUMNS} FROM {events} AS e JOIN {bodies} AS b "  # noqa: S608
        "ON b.event_id = e.id WHERE e.tenant_id = %s AND e.member_id = %s ORDER BY e.position"
    )
    return sql, [plainsql.prep(ConsentEvent, "tenant", tenant_id), member.pk]


def member_ledger_of(rows: Iterable[Sequence[Any]], *, member: User) -> list[LedgerEvent]:
    """`member_ledger_sql`'s rows as events, read as they are or through JSON (ids and
    times as text)."""
    return [
        LedgerEvent(
            event_id=str(event_id),
            member_id=str(member.public_id),
            position=int(position),
            kind=kind,
            consent_type=consent_type,
            status=status,
            legal_basis=legal_basis,
            capture_method=capture_method,
            terms_hash=terms_hash,
            witness=witness,
            occurred_at=_moment(occurred_at),
            recorded_at=_moment(recorded_at),
            record_version=int(version),
        )
        for (
            event_id,
            position,
            version,
            kind,
            consent_type,
            status,
            legal_basis,
            capture_method,
            terms_hash,
            witness,
            occurred_at,
            recorded_at,
        ) in rows
    ]


def _moment(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def active_consent_types(*, tenant_id: uuid.UUID, member: User) -> frozenset[str]:
    """Consent types whose deciding event is a grant: what recall may rely on."""
    return ledger.active_granted(member_ledger(tenant_id=tenant_id, member=member))


def opted_out_categories(*, tenant_id: uuid.UUID, member: User) -> frozenset[str]:
    return ledger.opted_out(member_ledger(tenant_id=tenant_id, member=member))


def consent_entries(*, tenant_id: uuid.UUID, member: User) -> list[ConsentEntry]:
    """The per-category ConsentEntry view a memory carries (spec: ConsentEntrySchema)."""
    return ledger.consent_entries(member_ledger(tenant_id=tenant_id, member=member))


def scope_policies(
    *, tenant_id: uuid.UUID, member: User, consumer: str | None = None
) -> dict[AdapterScope, ScopePolicy]:
    """Every adapter scope's policy for this member; `consumer=None` is the member's view."""
    history = member_ledger(tenant_id=tenant_id, member=member)
    return evaluate_scope_policies(
        active_consents=ledger.active_granted(history),
        opted_out=ledger.opted_out(history),
        consumer=consumer,
    )


def current_consent_event_id(
    *, tenant_id: uuid.UUID, member: User, consent_type: str
) -> uuid.UUID | None:
    """The id of the deciding event for `consent_type` when it is a grant, else None.

    The snapshot id an inspection or a continuation token cites as "consent current".
    Reads only that type's events: the deciding event depends on nothing else.
    """
    rows = _chain(tenant_id, member).filter(
        body__kind=EventKind.CONSENT, body__consent_type=consent_type
    )
    events = [e for e in (ledger_event(r, member=member) for r in rows) if e is not None]
    deciding = ledger.active_consents(events).get(consent_type)
    if deciding is None or deciding.status != ConsentStatus.GRANTED:
        return None
    return uuid.UUID(deciding.event_id)


def verify_member_chain(*, tenant_id: uuid.UUID, member: User) -> int | None:
    """The first position at which the member's chain fails to verify, or None.

    Recomputes each body's fingerprint and every link (`consent.ledger.validate_chain`);
    an erased row is checked by its link only. The chain row's unhashed copy of
    `recorded_at` must also agree with its body.
    """
    chain: list[ChainRow] = []
    broken: list[int] = []
    for row in _chain(tenant_id, member):
        event = ledger_event(row, member=member)
        canonical = None
        if event is not None:
            if row.recorded_at != event.recorded_at:
                broken.append(row.position)
            try:
                canonical = ledger.canonical_body(event, nonce=row.body.nonce)
            except ValueError:  # a nonce rewritten into something that is not one
                broken.append(row.position)
                canonical = b""
        chain.append(
            ChainRow(
                position=row.position,
                fingerprint=row.fingerprint,
                prev_hash=row.prev_hash,
                chain_hash=row.chain_hash,
                body=canonical,
            )
        )
    first = ledger.validate_chain(chain)
    if first is not None:
        broken.append(first)
    return min(broken, default=None)


def member_events(
    *,
    tenant_id: uuid.UUID,
    member: User,
    before: int | None = None,
    limit: int = 50,
) -> list[ConsentEvent]:
    """A page of the member's stored events, newest first, erased ones included (their
    body is None). `before` is a position: the page holds only earlier events."""
    rows = _chain(tenant_id, member).order_by("-position")
    if before is not None:
        rows = rows.filter(position__lt=before)
    return list(rows[: max(1, min(limit, MAX_PAGE))])


@dataclass(frozen=True)
class ConsentOverview:
    """Everything a consent page or the `consents/active` call shows, from one read."""

    deciding: dict[str, LedgerEvent]  # consent type -> its deciding event
    granted: dict[str, LedgerEvent]  # the deciding events that are grants
    opted_out: dict[str, LedgerEvent]  # opt-out category -> the opt-out in force
    entries: list[ConsentEntry]
    scopes: dict[AdapterScope, ScopePolicy]
    trail: list[TrailStep]  # arrival order
    erased_count: int


def consent_overview(
    *, tenant_id: uuid.UUID, member: User, consumer: str | None = None
) -> ConsentOverview:
    rows = _whole_chain(tenant_id, member)
    history = [e for e in (ledger_event(r, member=member) for r in rows) if e is not None]
    deciding = ledger.active_consents(history)
    granted = {t: e for t, e in deciding.items() if e.status == ConsentStatus.GRANTED}
    in_force = ledger.opted_out(history)
    opted = {c: e for c, e in ledger.active_opt_outs(history).items() if c in in_force}
    return ConsentOverview(
        deciding=deciding,
        granted=granted,
        opted_out=opted,
        entries=ledger.consent_entries(history),
        scopes=evaluate_scope_policies(
            active_consents=frozenset(granted), opted_out=frozenset(opted), consumer=consumer
        ),
        trail=ledger.audit_trail(history),
        erased_count=len(rows) - len(history),
    )
