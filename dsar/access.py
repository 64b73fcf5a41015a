"""The access right: everything Iris holds about the member, to read, changing nothing.

The report has the same sections as an export (`dsar.collect`), every one selected (pose
memory as counts only, as in an export). Reading it writes no revision, bumps no reference
count and adds no recall history row: `dsar.collect` reads rows and never goes through
recall. The only rows an access adds are its own governance decision and audit event
(tests/dsar/test_access.py compares every memory table before and after).

`run_access` is the work of an access request (`dsar.work.process`): its result
fingerprint is the SHA-256 of the report's canonical JSON. `access_view` is the member's
page reading it, governed and audited; `access_report` is the read both use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from dsar import collect
from dsar.models import DataRightsRequest
from dsar.payloads import EXPORT_FLAGS
from dsar.services import POLICY_ID, _audit, _govern
from governance.actions import AuditAction
from governance.audit import audit_record, canonical_json
from governance.errors import NotFound
from governance.models import User
from governance.pipeline import Effect, record_pending
from governance.principal import Principal


def access_report(*, member: User, scopes: Sequence[str] | None = None) -> dict[str, Any]:
    """Every section of the member's data (of `scopes`, all when none are named), as plain
    JSON values: lists of records, or one document for the summary sections. Read-only;
    the caller has checked that the reader is the member (or acts for them)."""
    payload: dict[str, Any] = {"scopes": list(scopes or []), **dict.fromkeys(EXPORT_FLAGS, True)}
    subject = collect.subject_of(member, payload)
    sections: dict[str, Any] = {}
    for section in collect.plan(payload):
        records = list(section.records(subject))
        sections[section.name] = records if section.lines else (records[0] if records else None)
    return {
        "userId": str(member.public_id),
        "tenantId": str(member.tenant_id),
        "scopes": list(subject.scopes),
        "sections": sections,
    }


def report_fingerprint(report: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(report)).hexdigest()


def _counts(report: dict[str, Any]) -> dict[str, int]:
    return {
        name: len(value) if isinstance(value, list) else int(value is not None)
        for name, value in report["sections"].items()
    }


def run_access(request: DataRightsRequest) -> str:
    """The access request's work: the report's fingerprint, audited with counts only."""
    member = request.member
    system = Principal.system("dsar-access", tenant_id=request.tenant_id)
    decided: list[dict[str, Any]] = []
    _govern(
        system,
        member,
        "dsar.access.build",
        subject_ids=(str(request.id),),
        effect=Effect.READ,
        pending=decided,
    )
    report = access_report(member=member, scopes=request.payload.get("scopes"))
    fingerprint = report_fingerprint(report)
    with transaction.atomic(durable=True):
        record_pending(decided)
        _audit(
            system,
            request,
            AuditAction.DSAR_ACCESS_VIEWED,
            payload={"records": _counts(report), "reportSha256": fingerprint},
        )
    return fingerprint


def access_view(*, principal: Principal, member: User) -> dict[str, Any]:
    """The member's own page reading their report (or a surface acting for them): the
    report, with the read governed and audited (`DSAR_ACCESS_VIEWED`, counts only)."""
    same_member = principal.kind == "member" and str(principal.id) == str(member.public_id)
    surface_of_tenant = principal.kind == "surface" and principal.tenant_id == member.tenant_id
    if not (same_member or surface_of_tenant):
        raise NotFound("No such member.")
    decided: list[dict[str, Any]] = []
    _govern(principal, member, "dsar.access.view", effect=Effect.READ, pending=decided)
    report = access_report(member=member)
    with transaction.atomic(durable=True):
        record_pending(decided)
        audit_record(
            actor=principal.actor,
            action=AuditAction.DSAR_ACCESS_VIEWED,
            tenant_id=member.tenant_id,
            policy_id=POLICY_ID,
            subject_ids=[member.public_id],
            payload={"records": _counts(report), "reportSha256": report_fingerprint(report)},
        )
    return report
