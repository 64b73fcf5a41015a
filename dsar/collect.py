"""Everything Iris holds about one member, as the sections of an export or an access
report. Reads only, tenant first, and streamed: every section is a generator of plain
JSON records that reads its rows with `.iterator(chunk_size=...)`, so an export of a
member with a hundred thousand memories holds one chunk at a time.

Sections (`plan` says which a payload selects, in this order):

- `data-rights`: the member's requests, each with its trail (always);
- `consent-events`, `consents-active`: the consent ledger, erased events as their
  fingerprint only, and the derived current set (`includeConsents`);
- `opt-outs`: opt-out events and the opt-outs in force (`includeOptOuts`);
- `memories`: every revision of every memory in the exported scopes, with provenance,
  consents as at the write, suppression and multi-actor fields, in the wire's shape;
- `pose-aggregates`: pose memory as counts per category and month only, never a body
  (`biometricAggregateOnly: true`), when pose is exported (`includePoseMemory`);
- `recall-log`: when and where each exported memory was recalled (no query text);
- `continuation-tokens`: the member's session hand-off tokens (references only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncMonth

from consent.ledger import EventKind
from consent.models import ConsentEvent
from consent.selectors import body_of, consent_overview
from dsar.models import DataRightsRequest
from dsar.payloads import exported_scopes
from governance import member_data
from governance.models import User
from memory.continuity.models import ContinuationToken
from memory.enums import ScopeKind
from memory.models import MemoryEntry
from memory.recall.models import RecallEvent
from memory.recall.pipeline import rfc3339
from memory.serializers import entry_contract

CHUNK = 1000
POSE = ScopeKind.POSE.value


@dataclass(frozen=True)
class Subject:
    """Whose data, and which of it: the member (tenant first) and the scope kinds."""

    member: User
    scopes: tuple[str, ...]

    @property
    def tenant_id(self) -> Any:
        return self.member.tenant_id

    @property
    def memory_scopes(self) -> tuple[str, ...]:
        """Scopes whose memories leave with their text (pose never does)."""
        return tuple(s for s in self.scopes if s != POSE)


@dataclass(frozen=True)
class Section:
    name: str
    file_name: str
    title: str
    # JSON lines (a record a line) or one JSON document (the generator yields one record).
    lines: bool
    records: Callable[[Subject], Iterator[dict[str, Any]]]
    # The record fields the readable index shows as table columns (lines sections).
    columns: tuple[str, ...] = ()


def _time(value: datetime | None) -> str | None:
    return None if value is None else rfc3339(value)


# ------------------------------------------------------------------------- sections


def data_rights(subject: Subject) -> Iterator[dict[str, Any]]:
    rows = (
        DataRightsRequest.objects.filter(tenant_id=subject.tenant_id, member=subject.member)
        .prefetch_related("trail")
        .order_by("received_at", "id")
    )
    for row in rows.iterator(chunk_size=200):
        trail = sorted(row.trail.all(), key=lambda step: step.position)
        yield {
            "id": str(row.id),
            "kind": row.kind,
            "state": row.state,
            "payload": row.payload,
            "jurisdiction": row.jurisdiction,
            "filedBy": row.filed_by,
            "receivedAt": _time(row.received_at),
            "dueAt": _time(row.due_at),
            "verifiedAt": _time(row.verified_at),
            "verificationMethod": row.verification_method or None,
            "extendedAt": _time(row.extended_at),
            "extensionReason": row.extension_reason or None,
            "finishedAt": _time(row.finished_at),
            "resultFingerprint": row.result_fingerprint or None,
            "graceUntil": _time(row.grace_until),
            "trail": [
                {
                    "fromState": step.from_state or None,
                    "toState": step.to_state,
                    "occurredAt": _time(step.occurred_at),
                    "actorKind": step.actor_kind,
                    "reasonCode": step.reason_code or None,
                }
                for step in trail
            ],
        }


def _ledger_rows(subject: Subject, kind: str) -> Iterator[dict[str, Any]]:
    rows = (
        ConsentEvent.objects.filter(tenant_id=subject.tenant_id, member=subject.member)
        .select_related("body")
        .order_by("position")
    )
    for row in rows.iterator(chunk_size=CHUNK):
        body = body_of(row)
        if body is None:
            if kind == EventKind.CONSENT:  # an erased event: its proof, not its content
                yield {
                    "eventId": str(row.id),
                    "position": row.position,
                    "erased": True,
                    "fingerprint": row.fingerprint,
                    "recordedAt": _time(row.recorded_at),
                }
            continue
        if body.kind != kind:
            continue
        yield {
            "eventId": str(row.id),
            "position": row.position,
            "erased": False,
            "type": body.consent_type,
            "status": body.status,
            "legalBasis": body.legal_basis,
            "captureMethod": body.capture_method,
            "termsHash": body.terms_hash,
            "witness": body.witness,
            "occurredAt": _time(body.occurred_at),
            "recordedAt": _time(body.recorded_at),
            "fingerprint": row.fingerprint,
            "chainHash": row.chain_hash,
        }


def consent_events(subject: Subject) -> Iterator[dict[str, Any]]:
    return _ledger_rows(subject, EventKind.CONSENT)


def consents_active(subject: Subject) -> Iterator[dict[str, Any]]:
    overview = consent_overview(tenant_id=subject.tenant_id, member=subject.member)
    yield {
        "granted": [
            {"type": t, "eventId": e.event_id, "grantedAt": _time(e.occurred_at)}
            for t, e in sorted(overview.granted.items())
        ],
        "entries": [entry.as_contract() for entry in overview.entries],
        "scopes": {
            str(scope): {"enabled": policy.enabled, "mode": str(policy.mode)}
            for scope, policy in sorted(overview.scopes.items())
        },
        "erasedEvents": overview.erased_count,
    }


def opt_outs(subject: Subject) -> Iterator[dict[str, Any]]:
    overview = consent_overview(tenant_id=subject.tenant_id, member=subject.member)
    yield {
        "inForce": [
            {"category": c, "eventId": e.event_id, "optedOutAt": _time(e.occurred_at)}
            for c, e in sorted(overview.opted_out.items())
        ],
        "events": list(_ledger_rows(subject, EventKind.OPT_OUT)),
    }


def memory_record(entry: MemoryEntry, member: User) -> dict[str, Any]:
    """One revision as exported: the wire's MemoryEntry and the columns it leaves out."""
    record = entry_contract(entry, member=member)
    record["adapterScope"] = entry.adapter_scope
    record["isCurrent"] = entry.is_current
    record["readOnlyCopyOf"] = (
        None if entry.read_only_copy_of is None else str(entry.read_only_copy_of)
    )
    return record


def memories(subject: Subject) -> Iterator[dict[str, Any]]:
    rows = (
        MemoryEntry.objects.filter(
            tenant_id=subject.tenant_id,
            member=subject.member,
            scope_kind__in=subject.memory_scopes,
        )
        # The term index is derived from the body; the export carries the body itself.
        .defer("recall_terms")
        .order_by("entry_id", "revision")
    )
    for entry in rows.iterator(chunk_size=CHUNK):
        yield memory_record(entry, subject.member)


def pose_aggregates(subject: Subject) -> Iterator[dict[str, Any]]:
    """Counts only: pose memory is biometric-adjacent, so no body, subject or scope
    identifier leaves, even to the member's own export (docs/decisions/data-rights.md)."""
    counts = (
        MemoryEntry.objects.filter(
            tenant_id=subject.tenant_id, member=subject.member, scope_kind=POSE
        )
        .annotate(month=TruncMonth("created_at"))
        .values("category", "month")
        .annotate(
            entries=Count("entry_id", distinct=True),
            revisions=Count("revision_id"),
        )
        .order_by("month", "category")
    )
    yield {
        "biometricAggregateOnly": True,
        "counts": [
            {
                "category": row["category"],
                "month": row["month"].strftime("%Y-%m"),
                "entries": row["entries"],
                "revisions": row["revisions"],
            }
            for row in counts
        ],
    }


def recall_log(subject: Subject) -> Iterator[dict[str, Any]]:
    exported = MemoryEntry.objects.filter(
        tenant_id=subject.tenant_id,
        member=subject.member,
        scope_kind__in=subject.memory_scopes,
        is_current=True,
    ).values("entry_id")
    rows = (
        RecallEvent.objects.filter(
            tenant_id=subject.tenant_id, member=subject.member, entry_id__in=exported
        )
        .order_by("recalled_at", "id")
        .values_list(
            "entry_id", "surface", "context", "scope_key", "score", "rationale", "recalled_at"
        )
    )
    for entry_id, surface, context, scope_key, score, rationale, recalled_at in rows.iterator(
        chunk_size=CHUNK
    ):
        yield {
            "entryId": str(entry_id),
            "surface": surface,
            "context": context,
            "scopeKey": scope_key,
            "score": score,
            "rationale": rationale,
            "recalledAt": _time(recalled_at),
        }


def continuation_tokens(subject: Subject) -> Iterator[dict[str, Any]]:
    kinds = set(subject.memory_scopes)
    rows = ContinuationToken.objects.filter(
        tenant_id=subject.tenant_id, member=subject.member
    ).order_by("updated_at", "id")
    for token in rows.iterator(chunk_size=CHUNK):
        if token.scope_key.partition(":")[0] not in kinds:
            continue
        yield {
            "id": str(token.id),
            "scopeKey": token.scope_key,
            "surface": token.surface,
            "surfaceContext": token.surface_context,
            "anchorRef": token.anchor_ref,
            "posture": token.posture,
            "sensitiveCategories": token.sensitive_categories,
            "crossDeviceConsentId": None
            if token.cross_device_consent_id is None
            else str(token.cross_device_consent_id),
            "deviceId": token.device_id,
            "clientTimestamp": _time(token.client_timestamp),
            "createdAt": _time(token.created_at),
            "updatedAt": _time(token.updated_at),
            "revision": token.revision,
        }


DATA_RIGHTS = Section(
    "data-rights",
    "data-rights.jsonl",
    "Your data-rights requests",
    True,
    data_rights,
    ("id", "kind", "state", "receivedAt", "dueAt", "finishedAt"),
)
CONSENT_EVENTS = Section(
    "consent-events",
    "consent-events.jsonl",
    "Consent events",
    True,
    consent_events,
    ("position", "type", "status", "legalBasis", "captureMethod", "occurredAt", "erased"),
)
CONSENTS_ACTIVE = Section(
    "consents-active", "consents-active.json", "Consents now", False, consents_active
)
OPT_OUTS = Section("opt-outs", "opt-outs.json", "Opt-outs", False, opt_outs)
MEMORIES = Section(
    "memories",
    "memories.jsonl",
    "Memories (every revision)",
    True,
    memories,
    ("id", "revision", "lifecycle", "scopeKey", "category", "body", "origin", "updatedAt"),
)
POSE_AGGREGATES = Section(
    "pose-aggregates", "pose-aggregates.json", "Pose memory (counts only)", False, pose_aggregates
)
RECALL_LOG = Section(
    "recall-log",
    "recall-log.jsonl",
    "When your memories were recalled",
    True,
    recall_log,
    ("entryId", "surface", "context", "score", "recalledAt"),
)
CONTINUATION_TOKENS = Section(
    "continuation-tokens",
    "continuation-tokens.jsonl",
    "Session hand-off tokens",
    True,
    continuation_tokens,
    ("id", "scopeKey", "surface", "posture", "deviceId", "updatedAt"),
)


def operator_accesses(subject: Subject) -> Iterator[dict[str, Any]]:
    """Every time an operator was granted a look at the member's memory (inspection's
    access log, through `governance.member_data`)."""
    return member_data.records("operator-accesses", subject.member)


OPERATOR_ACCESSES = Section(
    "operator-accesses",
    "operator-accesses.jsonl",
    "When an operator looked at your memory",
    True,
    operator_accesses,
    ("role", "grantedAt", "closedAt", "path", "reasonCode", "noticeStatus"),
)


def plan(payload: Mapping[str, Any]) -> list[Section]:
    """The sections an export (or access) payload selects, in bundle order."""
    scopes = exported_scopes(payload)
    sections = [DATA_RIGHTS]
    if payload.get("includeConsents"):
        sections += [CONSENT_EVENTS, CONSENTS_ACTIVE]
    if payload.get("includeOptOuts"):
        sections.append(OPT_OUTS)
    sections.append(MEMORIES)
    if POSE in scopes:
        sections.append(POSE_AGGREGATES)
    sections += [RECALL_LOG, CONTINUATION_TOKENS, OPERATOR_ACCESSES]
    return sections


def subject_of(member: User, payload: Mapping[str, Any]) -> Subject:
    return Subject(member=member, scopes=tuple(exported_scopes(payload)))


def dumps(record: Any) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
