"""Other people a member mentions: their private handles, and forgetting them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.actions import AuditAction
from governance.effects import run_destructive
from governance.idempotency import forget_subject
from governance.models import User
from governance.pipeline import (
    Effect,
    Hook,
    record_pending,
)
from governance.principal import Principal
from memory.enums import (
    Lifecycle,
)
from memory.models import (
    ActorHandle,
    MemoryEntry,
    PendingConflict,
)
from memory.rules.masking import (
    MultiActorRuleError,
    normalise_actor_name,
    validate_actor_handle,
)
from memory.services.common import (
    _audit,
    _govern,
    _handle_of,
    _invalid,
    _lock_member,
    _operation,
    _tombstone,
)
from memory.services.types import ACTOR_NAME_MAX_LENGTH, ActorsForgetResult

# ------------------------------------------------------------------------- multi-actor


def actor_handle_for(
    *, principal: Principal, member: User, name: str, context: Mapping[str, Any] | None = None
) -> str:
    """The opaque handle `name` gets in the member's namespace (the name is not stored).

    Creates the member's namespace key on first use; registers nothing else.
    """
    if (
        not isinstance(name, str)
        or len(name) > ACTOR_NAME_MAX_LENGTH
        or not normalise_actor_name(name)
    ):
        raise _invalid("actorName", "invalid", "actorName is not usable.")
    decided: list[dict[str, Any]] = []
    _govern(
        Hook.PRE_WRITE,
        name="memory.actor_handle",
        effect=Effect.WRITE,
        principal=principal,
        member=member,
        context=context,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)  # the allow commits with what it allowed, or not at all
        handle = _handle_of(member, name, create=True)
    assert handle is not None
    return handle


def actors_forget(
    *,
    principal: Principal,
    member: User,
    actor_name: str | None = None,
    actor_handle: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> ActorsForgetResult:
    """Forget every mention of a person (spec: "Right to be forgotten by association").

    Tombstones every live entry of the member tagged with the person's handle and removes
    the handle from the member's namespace. Destructive: governed at `pre_destructive`,
    where the owner's approval is asked for (HeldForApproval, HTTP 202) and the call gets
    its side-effect ledger row before it runs. A name is turned into its handle first, so
    the approval and the ledger hold only the handle. Forgetting someone never mentioned
    forgets nothing and says so.
    """
    if (actor_name is None) == (actor_handle is None):
        raise _invalid(
            "actorName",
            "one-of-actorName-actorHandle",
            "Send exactly one of actorName and actorHandle.",
        )
    if actor_handle is not None:
        try:
            handle = validate_actor_handle(actor_handle)
        except MultiActorRuleError:
            raise _invalid("actorHandle", "malformed", "actorHandle is malformed.") from None
    else:
        name = actor_name or ""
        if len(name) > ACTOR_NAME_MAX_LENGTH or not normalise_actor_name(name):
            raise _invalid("actorName", "invalid", "actorName is not usable.")
        # The namespace key is created if missing (a random key, no member data), so that a
        # name always has a handle and the call can be approved and resumed by handle.
        with transaction.atomic():
            handle = _handle_of(member, name, create=True) or ""
    op = _operation(
        name="memory.actors_forget",
        effect=Effect.DESTRUCTIVE,
        principal=principal,
        member=member,
        context=context,
        arguments={"actorHandle": handle},
    )
    return run_destructive(op, _actors_forget, principal, member, handle, now or timezone.now())


def _actors_forget(
    principal: Principal, member: User, handle: str, now: datetime
) -> ActorsForgetResult:
    with transaction.atomic(durable=True):
        _lock_member(member)
        live = list(
            MemoryEntry.objects.filter(
                tenant_id=member.tenant_id, member=member, actor_handle=handle, is_current=True
            )
            .exclude(lifecycle=Lifecycle.TOMBSTONED)
            .select_for_update()
            .order_by("created_at", "entry_id")
        )
        for entry in live:
            _tombstone(principal, member, entry, now=now, reason_code="actor-forgotten")
        # Questions whose proposal would tag the person again go as well.
        open_ids = [
            c.id
            for c in PendingConflict.objects.filter(
                tenant_id=member.tenant_id, member=member, status="open"
            )
            if c.proposal.get("actorHandle") == handle
        ]
        PendingConflict.objects.filter(id__in=open_ids).delete()
        removed, _ = ActorHandle.objects.filter(
            tenant_id=member.tenant_id, member=member, handle=handle
        ).delete()
        forget_subject(member.public_id)
        _audit(
            principal,
            member,
            AuditAction.MEMORY_ACTOR_FORGOTTEN,
            subject_ids=[e.entry_id for e in live],
            reason_code="forget-all-mentions",
            payload={
                "actorHandle": handle,
                "entryCount": len(live),
                "handleRemoved": bool(removed),
            },
        )
    return ActorsForgetResult(
        actor_handle=handle,
        entry_ids=tuple(e.entry_id for e in live),
        handle_removed=bool(removed),
    )
