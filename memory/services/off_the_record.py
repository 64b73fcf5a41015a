"""Off the record: while it is on, nothing a surface sends is remembered."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consent.enums import (
    SURFACES,
)
from governance.actions import AuditAction
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from memory import controls
from memory.models import (
    OffTheRecord,
)
from memory.services.common import _audit, _govern, _invalid, _lock_member, _session_id


def off_the_record_set(
    *,
    principal: Principal,
    member: User,
    enabled: bool,
    session_id: str | None = None,
    surface: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> OffTheRecord | None:
    """Switch off-the-record on or off for one session (or, without a session, for every
    session) and one surface (or every surface). While on, memory writes that match store
    nothing at all. Returns the toggle row while on, None once off. Idempotent.

    The member switches off any toggle of theirs; a surface only one it switched on itself
    (`memory.controls`: refused 403, on record as a deny)."""
    now = now or timezone.now()
    session = _session_id(session_id)
    if surface is not None and surface not in SURFACES:
        raise _invalid("surface", "invalid_choice", "surface is not a known surface.", SURFACES)

    def toggles() -> Any:
        return OffTheRecord.objects.filter(
            tenant_id=member.tenant_id, member=member, session_id=session, surface=surface or ""
        )

    attributes: dict[str, Any] = {}
    if not enabled:
        existing = toggles().first()
        if existing is not None:
            attributes[controls.SET_BY_ATTRIBUTE] = existing.set_by
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.off_the_record",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        arguments={
            "enabled": enabled,
            "sessionId": session or None,
            "surface": surface,
        },
        attributes=attributes,
        pending=decided,
        texts={"sessionId": session},
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        _lock_member(member)
        rows = toggles()
        row = rows.first()
        if enabled and row is None:
            row = OffTheRecord.objects.create(
                tenant_id=member.tenant_id,
                member=member,
                session_id=session,
                surface=surface or "",
                since=now,
                set_by=controls.lifter_of(principal),
            )
            changed = True
        elif not enabled and row is not None:
            # Switched on again by someone else since governance read it: the same refusal.
            reason = controls.refusal(row.set_by, principal)
            if reason is not None:
                raise controls.refused(reason)
            rows.delete()
            row, changed = None, True
        else:
            changed = False
        if changed:
            _audit(
                principal,
                member,
                AuditAction.MEMORY_OFF_THE_RECORD_ENABLED
                if enabled
                else AuditAction.MEMORY_OFF_THE_RECORD_DISABLED,
                payload={"allSessions": not session, "surface": surface or "*"},
            )
        return row
