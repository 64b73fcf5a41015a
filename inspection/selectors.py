"""Reads of inspections, tenant first; the snapshot view built from the exact revisions a
grant recorded; the member's access log.

Every function takes the requesting principal (or the member whose log it is) and scopes
by tenant before anything else. Another tenant's inspection, or any inspection asked for
by a member or a surface, is 404: operators alone see inspections, and only their own
tenant's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Min, QuerySet

from consent.enums import ConsentType, is_sensitive
from consent.selectors import current_consent_event_id
from governance import vault
from governance.errors import NotFound
from governance.models import User
from governance.principal import Principal
from inspection.enums import OPEN_STATES, InspectionState, NoticeStatus, Sensitivity
from inspection.models import (
    DEFAULT_GRANT_HOURS,
    DEFAULT_PENDING_HOURS,
    Inspection,
    InspectionPolicy,
    SnapshotItem,
)
from memory.enums import Lifecycle, RecallSurface
from memory.models import ForgottenValue, MemoryEntry
from memory.rules.masking import redact_multi_actor

# A grant shows at most this many entries; a wider look needs a narrower scope.
MAX_SNAPSHOT = 500
SNAPSHOT_LIFECYCLES = (Lifecycle.ACTIVE.value, Lifecycle.PAUSED.value, Lifecycle.DRAFT.value)
NOT_FOUND = "No such inspection."


def is_operator(principal: Principal) -> bool:
    return principal.kind == "operator" and principal.tenant_id is not None


def tenant_of(principal: Principal) -> uuid.UUID:
    """The operator's tenant; the caller has checked `is_operator`."""
    if principal.tenant_id is None:
        raise NotFound("No such inspection.")
    return principal.tenant_id


def time_boxes(tenant_id: uuid.UUID) -> tuple[int, int]:
    """(grant hours, pending hours) of the tenant."""
    policy = InspectionPolicy.objects.filter(tenant_id=tenant_id).first()
    if policy is None:
        return DEFAULT_GRANT_HOURS, DEFAULT_PENDING_HOURS
    return policy.grant_hours, policy.pending_hours


def current_consent_snapshot(member: User) -> uuid.UUID | None:
    """The member's current consent snapshot for sensitive memory: the id of the deciding
    `sensitive_data` consent event while it is a grant, else None."""
    return current_consent_event_id(
        tenant_id=member.tenant_id, member=member, consent_type=ConsentType.SENSITIVE_DATA.value
    )


def member_of_tenant(principal: Principal, user_id: uuid.UUID | str | None) -> User:
    """An operator's target: an active member of the operator's own tenant, else 404."""
    if not is_operator(principal) or user_id is None:
        raise NotFound("No such member.")
    try:
        key = uuid.UUID(str(user_id))
    except ValueError:
        raise NotFound("No such member.") from None
    member = User.objects.filter(
        tenant_id=tenant_of(principal), public_id=key, kind=User.Kind.MEMBER, is_active=True
    ).first()
    if member is None:
        raise NotFound("No such member.")
    return member


def inspections_for(
    principal: Principal, *, state: str | None = None, open_only: bool = False
) -> QuerySet[Inspection]:
    """The tenant's inspections, newest first; nothing for anyone but its operators."""
    if not is_operator(principal):
        return Inspection.objects.none()
    rows = Inspection.objects.filter(tenant_id=tenant_of(principal))
    if state:
        rows = rows.filter(state=state)
    if open_only:
        rows = rows.filter(state__in=[s.value for s in OPEN_STATES])
    return rows.select_related("member", "requester", "reviewer").order_by("-requested_at", "id")


def inspection_get(principal: Principal, inspection_id: uuid.UUID | str) -> Inspection:
    if not is_operator(principal):
        raise NotFound(NOT_FOUND)
    try:
        key = uuid.UUID(str(inspection_id))
    except ValueError:
        raise NotFound(NOT_FOUND) from None
    row = (
        Inspection.objects.filter(tenant_id=tenant_of(principal), id=key)
        .select_related("member", "requester", "reviewer", "tenant")
        .first()
    )
    if row is None:
        raise NotFound(NOT_FOUND)
    return row


# --------------------------------------------------------------------------- snapshots


def snapshot_candidates(member: User, *, scope_key: str, sensitivity: str) -> list[MemoryEntry]:
    """The current revisions a grant would show now: the member's live entries in the
    scope, sensitive ones only for a sensitive inspection. Oldest first."""
    rows = MemoryEntry.objects.filter(
        tenant_id=member.tenant_id,
        member=member,
        is_current=True,
        scope_key=scope_key,
        lifecycle__in=SNAPSHOT_LIFECYCLES,
    ).order_by("created_at", "entry_id")
    chosen = []
    for row in rows.iterator():
        if sensitivity != Sensitivity.SENSITIVE and entry_is_sensitive(row):
            continue
        chosen.append(row)
        if len(chosen) >= MAX_SNAPSHOT:
            break
    return chosen


def entry_is_sensitive(entry: MemoryEntry) -> bool:
    return is_sensitive(entry.category) or entry.sensitive_interaction


@dataclass(frozen=True)
class SnapshotView:
    """What the requester sees (and a replay shows again): one item per granted revision,
    the text of a forgotten entry never."""

    inspection_id: str
    path: str
    granted_at: datetime | None
    expires_at: datetime | None
    items: list[dict[str, Any]] = field(default_factory=list)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def snapshot_view(inspection: Inspection) -> SnapshotView:
    """The granted snapshot, rebuilt from the recorded revision ids (immutable rows), so it
    reads the same however often it is built. An entry the member forgot since (tombstoned,
    or its rows deleted) shows as "forgotten since <date>", without its text. Outside a
    data-rights fulfilment, people the member mentions are redacted (spec: Multi-Actor
    Memory) and identifiers become the member's PII tokens (`governance.pii`)."""
    dsar = inspection.path == InspectionState.DSAR_FULFILLMENT
    items = list(
        SnapshotItem.objects.filter(tenant_id=inspection.tenant_id, inspection=inspection).order_by(
            "position"
        )
    )
    entry_ids = [i.entry_id for i in items]
    base = MemoryEntry.objects.filter(
        tenant_id=inspection.tenant_id, member_id=inspection.member_id
    )
    revisions = {
        r.revision_id: r for r in base.filter(revision_id__in=[i.revision_id for i in items])
    }
    tombstones = dict(
        base.filter(entry_id__in=entry_ids, lifecycle=Lifecycle.TOMBSTONED).values_list(
            "entry_id", "updated_at"
        )
    )
    traces = dict(
        ForgottenValue.objects.filter(
            tenant_id=inspection.tenant_id, member_id=inspection.member_id, entry_id__in=entry_ids
        )
        .values("entry_id")
        .annotate(first=Min("created_at"))
        .values_list("entry_id", "first")
    )
    out: list[dict[str, Any]] = []
    for item in items:
        revision = revisions.get(item.revision_id)
        common = {
            "entryId": str(item.entry_id),
            "revisionId": str(item.revision_id),
            "category": item.category,
        }
        if revision is None or item.entry_id in tombstones:
            since = tombstones.get(item.entry_id) or traces.get(item.entry_id)
            out.append({**common, "forgotten": True, "forgottenSince": _iso(since)})
            continue
        multi = None
        if revision.actor_handle is not None:
            multi = {
                "actorHandle": revision.actor_handle,
                "relationshipNote": revision.relationship_note,
                "sensitiveInteraction": revision.sensitive_interaction,
            }
        body = revision.body
        if not dsar:
            body = vault.pii_tokenise_for_member(
                body, tenant=inspection.tenant, owner=inspection.member
            )
        out.append(
            {
                **common,
                "forgotten": False,
                "scope": {"kind": revision.scope_kind, **revision.scope_identifiers},
                "body": body,
                "origin": revision.origin,
                "revision": revision.revision,
                "multiActor": redact_multi_actor(multi, surface=RecallSurface.ADMIN, dsar=dsar),
                "createdAt": _iso(revision.created_at),
                "updatedAt": _iso(revision.updated_at),
            }
        )
    return SnapshotView(
        inspection_id=str(inspection.id),
        path=inspection.path,
        granted_at=inspection.granted_at,
        expires_at=inspection.expires_at,
        items=out,
    )


# --------------------------------------------------------------------------- the member's log


@dataclass(frozen=True)
class AccessLogLine:
    """One operator access to the member's memory, as the member reads it."""

    inspection_id: str
    role: str
    granted_at: datetime
    closed_at: datetime | None
    path: str
    reason_code: str
    categories: list[str]
    notice_status: str  # queued | sending | delivered | not-required
    notice_due_at: datetime | None
    notice_delivered_at: datetime | None


def member_access_log(*, member: User) -> list[AccessLogLine]:
    """Every grant of access to the member's memory, newest first (role, when, path,
    reason code, categories seen, notice status). A grant closed under an investigation
    carve-out is left out: telling the member is exactly what the carve-out withholds
    (docs/decisions/inspection.md)."""
    rows = (
        Inspection.objects.filter(
            tenant_id=member.tenant_id,
            member=member,
            granted_at__isnull=False,
            carve_out=False,
        )
        .select_related("notice")
        .order_by("-granted_at", "id")
    )
    lines = []
    for row in rows:
        notice = getattr(row, "notice", None)
        status = notice.status if notice is not None else "not-required"
        if notice is not None and status == NoticeStatus.SENDING:
            status = NoticeStatus.QUEUED.value  # a claim in flight is still owed
        lines.append(
            AccessLogLine(
                inspection_id=str(row.id),
                role=", ".join(row.requester_roles) or "operator",
                granted_at=row.granted_at,  # type: ignore[arg-type]
                closed_at=row.finished_at,
                path=row.path,
                reason_code=row.reason_code,
                categories=list(row.categories),
                notice_status=status,
                notice_due_at=notice.due_at if notice else None,
                notice_delivered_at=notice.delivered_at if notice else None,
            )
        )
    return lines


def member_access_records(member: User) -> Iterator[dict[str, Any]]:
    """The access log as plain records, for the member's export and access report
    (registered with `governance.member_data` as "operator-accesses")."""
    for line in member_access_log(member=member):
        yield {
            "inspectionId": line.inspection_id,
            "role": line.role,
            "grantedAt": line.granted_at.isoformat(),
            "closedAt": line.closed_at.isoformat() if line.closed_at else None,
            "path": line.path,
            "reasonCode": line.reason_code,
            "categories": list(line.categories),
            "noticeStatus": line.notice_status,
            "noticeDueAt": line.notice_due_at.isoformat() if line.notice_due_at else None,
            "noticeDeliveredAt": (
                line.notice_delivered_at.isoformat() if line.notice_delivered_at else None
            ),
        }
