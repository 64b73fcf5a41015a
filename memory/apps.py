from __future__ import annotations

from typing import Any

from django.apps import AppConfig


def _member_of(call: Any) -> Any:
    from governance.models import User

    return User.objects.get(tenant_id=call.principal.tenant_id, public_id=call.member_id)


def _resume_hard_delete(call: Any) -> Any:
    from memory.services import memory_hard_delete

    args = call.arguments
    return memory_hard_delete(
        principal=call.principal,
        member=_member_of(call),
        entry_ids=args.get("entryIds") or None,
        category=args.get("category"),
        sensitive_interactions=bool(args.get("sensitiveInteractions")),
        include_derived=bool(args.get("includeDerived", True)),
        reason_code=args.get("reasonCode") or "member-request",
        limit=args.get("limit"),
        context=call.attributes,
    )


def _resume_actors_forget(call: Any) -> Any:
    from memory.services import actors_forget

    return actors_forget(
        principal=call.principal,
        member=_member_of(call),
        actor_handle=call.arguments["actorHandle"],
        context=call.attributes,
    )


def _resume_forget(call: Any) -> Any:
    from memory.services import memory_forget

    return memory_forget(
        principal=call.principal,
        member=_member_of(call),
        entry_id=call.arguments["entryId"],
        reason_code=call.arguments.get("reasonCode") or "member-request",
        context=call.attributes,
    )


def _resume_clear(call: Any) -> Any:
    from memory.services import memory_clear

    return memory_clear(
        principal=call.principal,
        member=_member_of(call),
        category=call.arguments.get("category"),
        context=call.attributes,
    )


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def seed_demo(self, *, tenant: Any, actor: Any, member: Any) -> None:
        from memory.demo import seed

        seed(tenant=tenant, member=member)

    def ready(self) -> None:
        from governance.doctor import register_health_note
        from governance.operations import describe_operation, register_resumable
        from governance.pipeline import register, registered_checks
        from memory import checks  # registers memory's doctor checks
        from memory.controls import ControlOwnerGate
        from memory.rules.retention import SOFT_DELETE_GRACE
        from memory.services import MemoryWriteGate

        # A forget can be undone until the purge (memory/rules/retention.py).
        undo = f"{SOFT_DELETE_GRACE.days} days"

        # The memory write gate is a governance check, so its decisions (scope policy,
        # allowed consumer, sensitive-category consent) land in the audit chain with the
        # check's name like every other decision (DESIGN invariant 8).
        names = {check.name for check in registered_checks()}
        if MemoryWriteGate.name not in names:
            register(MemoryWriteGate())
        # Who may lift a pause or off the record (memory/controls.py), decided and audited
        # by the kernel like the write gate.
        if ControlOwnerGate.name not in names:
            register(ControlOwnerGate())
        # Calls held for the owner's approval resume from their stored arguments (ids and
        # codes only). A correction is not resumable: its new text is never stored in an
        # approval, so the caller repeats it with the approval id.
        register_resumable(
            "memory.hard_delete", _resume_hard_delete, action="permanently delete a memory"
        )
        register_resumable(
            "memory.actors_forget",
            _resume_actors_forget,
            action="forget every memory that mentions one person",
        )
        register_resumable("memory.forget", _resume_forget, action="forget a memory", undo=undo)
        # The card says what the member asked for; the topic stays off it (a raw code).
        register_resumable(
            "memory.clear_category",
            _resume_clear,
            action="forget every memory about one topic",
            undo=undo,
        )
        register_resumable(
            "memory.clear_all",
            _resume_clear,
            action="forget everything Iris remembers about you",
            undo=undo,
        )
        describe_operation("memory.correct", "correct a memory")
        # `/api/v1/health` says which ranker recall uses (BM25 when the model cannot load).
        register_health_note("recall", checks.recall_ranking_note)
        # A revoked sensitive consent queues the hard-delete cascade (memory/receivers.py).
        from memory import receivers

        receivers.connect()
