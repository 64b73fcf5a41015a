"""Resumable operations: how a held or crashed call is issued again, and what it is called.

A service that may wait for its owner's approval, or that the side-effect ledger may have
to complete after a crash, registers here (in its app's `ready()`) a function that issues
it again from its stored arguments, and the plain-English phrase its approval card uses.
Approvals (`governance.approvals`) and the side-effect ledger (`governance.effects`) both
read this registry; neither imports the other for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from governance.principal import Principal

GENERIC_ACTION = "make a change to your memory"
# Operations a category argument narrows: their phrase names the member's chosen category.
_IN_ONE_CATEGORY = "in one category"

# Plain-English phrases, completing "… wants to <action>"; apps register theirs.
_ACTIONS: dict[str, str] = {}
# How long the member can still undo an operation after it ran ("14 days"); absent when it
# cannot be undone. Cards must not call an undoable change irreversible.
_UNDO: dict[str, str] = {}


@dataclass(frozen=True)
class Resume:
    """A held call issued again: who made it, for whom, with what, under which approval."""

    principal: Principal
    member_id: uuid.UUID | None
    arguments: dict[str, Any]
    approval_id: uuid.UUID | None
    run_id: uuid.UUID | None
    side_effect_id: uuid.UUID | None = None

    @property
    def attributes(self) -> dict[str, Any]:
        """The attributes the resumed service passes on to `govern` (and the ledger)."""
        return {
            "approval_id": str(self.approval_id) if self.approval_id else None,
            "run_id": str(self.run_id) if self.run_id else None,
            "side_effect_id": str(self.side_effect_id) if self.side_effect_id else None,
            "can_pause": True,
        }


ResumableFunc = Callable[[Resume], Any]
_RESUMABLE: dict[str, ResumableFunc] = {}


def register_resumable(
    name: str, func: ResumableFunc, *, action: str | None = None, undo: str | None = None
) -> None:
    """Register how to issue operation `name` again from its stored arguments, and (as
    `undo`, e.g. "14 days") how long the member can undo it afterwards."""
    current = _RESUMABLE.get(name)
    if current is not None and current is not func:
        raise ValueError(f"operation {name!r} already has a resumable function")
    _RESUMABLE[name] = func
    if action:
        describe_operation(name, action)
    if undo:
        _UNDO[name] = undo


def resumable(name: str) -> ResumableFunc | None:
    return _RESUMABLE.get(name)


def describe_operation(name: str, action: str) -> None:
    """The plain-English action shown on cards, completing "… wants to <action>"."""
    _ACTIONS[name] = action


def operation_undo(name: str) -> str | None:
    """How long `name` can be undone after it ran, or None when it cannot be."""
    return _UNDO.get(name)


def operation_action(name: str, arguments: dict[str, Any] | None = None) -> str:
    action = _ACTIONS.get(name, GENERIC_ACTION)
    category = (arguments or {}).get("category")
    if isinstance(category, str) and category.replace("-", "").isalnum() and len(category) < 40:
        action = action.replace(_IN_ONE_CATEGORY, f"in the category “{category}”")
    return action
