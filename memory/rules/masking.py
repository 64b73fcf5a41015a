"""Multi-actor masking: people a member mentions, as opaque handles (spec: "Multi-Actor
Memory").

Pure rules: no Django, no database. Iris never stores a profile of a mentioned person:
only an `actorHandle` (a keyed hash of the normalised name, bound to the member's
namespace through the key) and a relationship-only note such as "my partner".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from dataclasses import dataclass
from typing import TypeVar

from governance.rules import RuleError
from memory.enums import RecallSurface

ACTOR_HANDLE_PREFIX = "actor_"
ACTOR_HANDLE_HEX_LENGTH = 32
ACTOR_HANDLE_PATTERN = re.compile(rf"^{ACTOR_HANDLE_PREFIX}[0-9a-f]{{{ACTOR_HANDLE_HEX_LENGTH}}}$")
RELATIONSHIP_NOTE_MAX_LENGTH = 500

# Domain separation so a namespace key can never collide with another use of the master key.


class MultiActorRuleError(RuleError):
    """A multi-actor reference breaks the contract; `field` is the wire name."""


def normalise_actor_name(name: str) -> str:
    """The form two mentions of one person share: "Dr. Anna-Maria  O'Neil" and
    "dr anna maria oneil" normalise alike.

    NFKC and casefold (twice NFKC, since casefolding can undo it); dashes and connectors
    become spaces so "Anna-Maria" meets "Anna Maria"; other punctuation and invisible
    format characters are dropped so "O'Neil" meets "ONeil"; whitespace is collapsed.
    """
    # Dropping a character can let a combining mark meet a new base letter, which NFKC
    # then composes; repeat until nothing changes so the result is a fixed point.
    current = name
    for _ in range(8):
        following = _normalise_once(current)
        if following == current:
            break
        current = following
    return current


def _normalise_once(name: str) -> str:
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    kept: list[str] = []
    for char in folded:
        category = unicodedata.category(char)
        if char.isspace() or category in ("Pd", "Pc"):
            kept.append(" ")
        elif category.startswith("P") or category in ("Cc", "Cf"):
            continue
        else:
            kept.append(char)
    return " ".join("".join(kept).split())


def actor_handle(key: bytes, name: str) -> str:
    """`actor_` + the first 32 hex digits of HMAC-SHA256(key, normalised name)."""
    if not key:
        # Without a secret the handle is a plain hash, and names are easy to guess.
        raise ValueError("key must not be empty")
    normalised = normalise_actor_name(name)
    if not normalised:
        raise MultiActorRuleError("actorName", "empty")
    digest = hmac.new(key, normalised.encode("utf-8"), hashlib.sha256).hexdigest()
    return ACTOR_HANDLE_PREFIX + digest[:ACTOR_HANDLE_HEX_LENGTH]


def validate_relationship_note(note: str) -> str:
    # Length in characters (code points), as the database column counts them.
    if len(note) > RELATIONSHIP_NOTE_MAX_LENGTH:
        raise MultiActorRuleError("relationshipNote", "too-long")
    return note


def validate_actor_handle(handle: str) -> str:
    if not ACTOR_HANDLE_PATTERN.fullmatch(handle):
        raise MultiActorRuleError("actorHandle", "malformed")
    return handle


@dataclass(frozen=True)
class MultiActor:
    """The entry's single nullable `multiActor` object."""

    actor_handle: str
    relationship_note: str
    sensitive_interaction: bool = False

    def __post_init__(self) -> None:
        validate_actor_handle(self.actor_handle)
        validate_relationship_note(self.relationship_note)


T = TypeVar("T")


def redact_multi_actor(
    multi_actor: T | None, *, surface: RecallSurface | str, dsar: bool
) -> T | None:
    """None on the admin surface unless this is a DSAR where the member is the subject.

    Actor handles surface only inside the member's own context. Non-DSAR inspection
    snapshots go through here as the admin surface. An unknown surface is an error, not a
    pass: a new surface must be placed on one side of this rule on purpose.
    """
    if RecallSurface(surface) is RecallSurface.ADMIN and not dsar:
        return None
    return multi_actor
