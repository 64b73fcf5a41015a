"""The continuation-token contract and the last-write-wins rule, as plain Python.

Spec: "Cross-Device Continuity Protocol". A token says where a member was in a surface's
content (a reference and a posture), never what the content was. Everything here takes and
returns plain values and imports no Django, so each rule can be read and tested alone.

- `parse_token` enforces the strict contract (unknown fields refused, content-like fields
  refused by name, ids and references bounded) and the first cross-field rule (the anchor's
  surface is the context's surface);
- `check_cross_device_consent` is the second cross-field rule, given the member's current
  cross-device grant (the caller reads the ledger);
- `decide_write` is last-write-wins by server time within one slot, with the conflict
  notice (see its docstring for who loses).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from consent.enums import SENSITIVE_CATEGORIES, SURFACES
from governance.rules import RuleError
from governance.text import TextRuleError, check_instant, safe_field_name
from memory.rules.scopes import ScopeRuleError, parse_scope_key

# -- vocabulary ----------------------------------------------------------------------------


class Posture(StrEnum):
    """What the member was doing when the checkpoint was written."""

    LISTENING = "listening"  # audio: Tara, voice playback
    READING = "reading"  # text: books, articles, notebooks
    SPEAKING = "speaking"  # live voice with the assistant
    STUDYING = "studying"  # lessons, exercises
    JOURNALING = "journaling"  # writing in a journal (the journal text stays in the surface)
    PRACTICING = "practicing"  # ritual, pose or meditation practice
    CONVERSING = "conversing"  # a text conversation with the assistant
    PAUSED = "paused"  # the member paused; resume is offered, not automatic


class AnchorKind(StrEnum):
    """What kind of place in the content an anchor points at."""

    SEGMENT = "segment"  # an audio/voice segment; offsetMs resumes mid-segment
    TRACK = "track"
    PARAGRAPH = "paragraph"
    PAGE = "page"
    LESSON_STEP = "lesson-step"
    EXERCISE = "exercise"
    SCENE = "scene"
    TURN = "turn"  # a turn of an assistant transcript, by id
    ENTRY = "entry"  # a journal entry, by id


SURFACE_CONTEXT_FIELDS = frozenset({"surface", "sessionId", "itemId", "mode"})
ANCHOR_FIELDS = frozenset({"surface", "kind", "ref", "offsetMs", "position"})
TOKEN_FIELDS = frozenset(
    {
        "userId",
        "scopeKey",
        "surfaceContext",
        "anchorRef",
        "posture",
        "sensitiveCategories",
        "crossDeviceConsentId",
        "deviceId",
        "clientTimestamp",
    }
)
REQUIRED_TOKEN_FIELDS = TOKEN_FIELDS - {"sensitiveCategories", "crossDeviceConsentId"}
# Set by the server; a client that sends them is told so rather than silently ignored.
SERVER_FIELDS = frozenset({"id", "createdAt", "updatedAt", "serverTime", "revision"})

# Field names that carry content rather than a reference. A token that names one of them
# is refused with its own rule, so the surface learns why, not just "unknown field".
CONTENT_FIELDS = frozenset(
    {
        "text",
        "body",
        "content",
        "transcript",
        "excerpt",
        "quote",
        "snippet",
        "summary",
        "message",
        "messages",
        "title",
        "html",
        "markdown",
        "lyrics",
        "caption",
        "note",
        "notes",
        "audio",
        "image",
        "data",
        "payload",
    }
)

REF_MAX_LENGTH = 512
ID_MAX_LENGTH = 128
SCOPE_KEY_MAX_LENGTH = 512
MODE_MAX_LENGTH = 32
OFFSET_MS_MAX = 7 * 24 * 60 * 60 * 1000  # a week of audio is more than any segment
POSITION_MAX = 10_000_000

# Ids and pointers: printable, no whitespace. Content (a sentence, a transcript) has spaces;
# a pointer does not need them. This is a screen, not a proof (see docs/decisions).
_ID = re.compile(r"^[A-Za-z0-9._:~/#@+=-]+$")
_MODE = re.compile(r"^[a-z][a-z0-9-]*$")
_SCOPE_KEY = re.compile(r"^[a-z][a-z-]*(:[A-Za-z0-9._~@+=-]+)*$")


# -- errors --------------------------------------------------------------------------------


class RuleViolation(RuleError):
    """One broken rule of a continuation token: the field (dotted path), a stable rule code
    and a message."""

    def __init__(
        self, field: str, rule: str, message: str, allowed: Iterable[str] | None = None
    ) -> None:
        super().__init__(field, rule, message, allowed)


# -- the contract --------------------------------------------------------------------------


@dataclass(frozen=True)
class SurfaceContext:
    surface: str
    session_id: str | None = None
    item_id: str | None = None
    mode: str | None = None

    def as_contract(self) -> dict[str, Any]:
        out: dict[str, Any] = {"surface": self.surface}
        for key, value in (
            ("sessionId", self.session_id),
            ("itemId", self.item_id),
            ("mode", self.mode),
        ):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class AnchorRef:
    surface: str
    kind: str
    ref: str
    offset_ms: int | None = None
    position: int | None = None

    def as_contract(self) -> dict[str, Any]:
        out: dict[str, Any] = {"surface": self.surface, "kind": self.kind, "ref": self.ref}
        if self.offset_ms is not None:
            out["offsetMs"] = self.offset_ms
        if self.position is not None:
            out["position"] = self.position
        return out


@dataclass(frozen=True)
class TokenDraft:
    user_id: uuid.UUID
    scope_key: str
    surface_context: SurfaceContext
    anchor_ref: AnchorRef
    posture: Posture
    device_id: str
    client_timestamp: datetime
    sensitive_categories: tuple[str, ...] = ()
    cross_device_consent_id: uuid.UUID | None = None

    @property
    def surface(self) -> str:
        return self.surface_context.surface


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RuleViolation(path or "body", "invalid", f"{path or 'The body'} must be an object.")
    return value


def _check_fields(
    data: Mapping[str, Any], allowed: frozenset[str], path: str, required: frozenset[str]
) -> None:
    prefix = f"{path}." if path else ""
    for key in sorted(data, key=str):
        if not isinstance(key, str):
            raise RuleViolation(path or "body", "unknown-field", "Field names are text.")
        if key in allowed:
            continue
        if key in CONTENT_FIELDS or key.lower() in CONTENT_FIELDS:
            # Quoted as the contract spells it: never echo the caller's own text.
            name = key if key in CONTENT_FIELDS else key.lower()
            raise RuleViolation(
                prefix + name,
                "content-not-allowed",
                f"{prefix}{name} would carry content; a continuation token carries only "
                "references and posture.",
            )
        if not path and key in SERVER_FIELDS:
            raise RuleViolation(key, "read-only", f"{key} is set by the server.")
        quoted = safe_field_name(key)
        if quoted is None:
            raise RuleViolation(
                path or "body",
                "unknown-field",
                f"{path or 'The body'} has a field that is not in the contract.",
                sorted(allowed),
            )
        raise RuleViolation(
            prefix + quoted, "unknown-field", f"{prefix}{quoted} is not a field.", sorted(allowed)
        )
    for key in sorted(required):
        if data.get(key) is None:
            raise RuleViolation(prefix + key, "required", f"{prefix}{key} is required.")


def _choice(value: Any, allowed: Iterable[str], path: str) -> str:
    allowed = list(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise RuleViolation(path, "invalid_choice", f"{path} is not an allowed value.", allowed)
    return value


def _identifier(value: Any, path: str, *, max_length: int = ID_MAX_LENGTH) -> str:
    if not isinstance(value, str) or not value:
        raise RuleViolation(path, "invalid", f"{path} must be a non-empty id.")
    if len(value) > max_length:
        raise RuleViolation(path, "max_length", f"{path} must be at most {max_length} characters.")
    if not _ID.match(value):
        raise RuleViolation(
            path,
            "not-a-reference",
            f"{path} must be an id or pointer: printable, without spaces.",
        )
    return value


def _optional_identifier(value: Any, path: str) -> str | None:
    return None if value is None else _identifier(value, path)


def _bounded_int(value: Any, path: str, maximum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleViolation(path, "invalid", f"{path} must be a whole number.")
    if value < 0 or value > maximum:
        raise RuleViolation(path, "out-of-range", f"{path} must be between 0 and {maximum}.")
    return value


def _uuid(value: Any, path: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value)) if isinstance(value, str) else uuid.UUID("")
    except ValueError:
        raise RuleViolation(path, "invalid", f"{path} must be a UUID.") from None


def _timestamp(value: Any, path: str) -> datetime:
    if not isinstance(value, str):
        raise RuleViolation(path, "invalid", f"{path} must be an RFC 3339 timestamp.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise RuleViolation(path, "invalid", f"{path} must be an RFC 3339 timestamp.") from None
    try:
        return check_instant(parsed)
    except TextRuleError as exc:
        raise RuleViolation(path, exc.rule, f"{path}: {exc.message}") from None


def _scope_key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RuleViolation("scopeKey", "invalid", "scopeKey must be a scope key.")
    if len(value) > SCOPE_KEY_MAX_LENGTH:
        raise RuleViolation(
            "scopeKey", "max_length", f"scopeKey must be at most {SCOPE_KEY_MAX_LENGTH} characters."
        )
    if not _SCOPE_KEY.match(value):
        raise RuleViolation(
            "scopeKey", "invalid", "scopeKey is its kind and identifiers, colon-joined."
        )
    try:
        parse_scope_key(value)
    except ScopeRuleError as exc:
        if exc.rule == "unknown-kind":
            raise RuleViolation(
                "scopeKey", "invalid_choice", "scopeKey is not an allowed kind.", exc.allowed
            ) from None
        raise RuleViolation(
            "scopeKey", "invalid", "scopeKey is its kind and identifiers, colon-joined."
        ) from None
    return value


def _surface_context(value: Any) -> SurfaceContext:
    data = _object(value, "surfaceContext")
    _check_fields(data, SURFACE_CONTEXT_FIELDS, "surfaceContext", frozenset({"surface"}))
    mode = data.get("mode")
    if mode is not None and (
        not isinstance(mode, str) or len(mode) > MODE_MAX_LENGTH or not _MODE.match(mode)
    ):
        raise RuleViolation(
            "surfaceContext.mode",
            "invalid",
            f"surfaceContext.mode is a short lowercase code (at most {MODE_MAX_LENGTH}).",
        )
    return SurfaceContext(
        surface=_choice(data["surface"], SURFACES, "surfaceContext.surface"),
        session_id=_optional_identifier(data.get("sessionId"), "surfaceContext.sessionId"),
        item_id=_optional_identifier(data.get("itemId"), "surfaceContext.itemId"),
        mode=mode,
    )


def _anchor_ref(value: Any) -> AnchorRef:
    data = _object(value, "anchorRef")
    _check_fields(data, ANCHOR_FIELDS, "anchorRef", frozenset({"surface", "kind", "ref"}))
    return AnchorRef(
        surface=_choice(data["surface"], SURFACES, "anchorRef.surface"),
        kind=_choice(data["kind"], [k.value for k in AnchorKind], "anchorRef.kind"),
        ref=_identifier(data["ref"], "anchorRef.ref", max_length=REF_MAX_LENGTH),
        offset_ms=_bounded_int(data.get("offsetMs"), "anchorRef.offsetMs", OFFSET_MS_MAX),
        position=_bounded_int(data.get("position"), "anchorRef.position", POSITION_MAX),
    )


def _sensitive_categories(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RuleViolation("sensitiveCategories", "invalid", "sensitiveCategories is a list.")
    allowed = sorted(c.value for c in SENSITIVE_CATEGORIES)
    seen: list[str] = []
    for index, item in enumerate(value):
        category = _choice(item, allowed, f"sensitiveCategories[{index}]")
        if category in seen:
            raise RuleViolation(
                f"sensitiveCategories[{index}]", "duplicate", "Each category appears once."
            )
        seen.append(category)
    return tuple(sorted(seen))


def parse_token(payload: Any) -> TokenDraft:
    """The token a surface sent, validated; raises RuleViolation on the first broken rule.

    Checks run in a fixed order (fields, then each field, then the anchor-surface rule) so
    the same bad input always names the same rule.
    """
    data = _object(payload, "")
    _check_fields(data, TOKEN_FIELDS, "", REQUIRED_TOKEN_FIELDS)
    context = _surface_context(data["surfaceContext"])
    anchor = _anchor_ref(data["anchorRef"])
    consent_id = data.get("crossDeviceConsentId")
    draft = TokenDraft(
        user_id=_uuid(data["userId"], "userId"),
        scope_key=_scope_key(data["scopeKey"]),
        surface_context=context,
        anchor_ref=anchor,
        posture=Posture(_choice(data["posture"], [p.value for p in Posture], "posture")),
        device_id=_identifier(data["deviceId"], "deviceId"),
        client_timestamp=_timestamp(data["clientTimestamp"], "clientTimestamp"),
        sensitive_categories=_sensitive_categories(data.get("sensitiveCategories")),
        cross_device_consent_id=(
            None if consent_id is None else _uuid(consent_id, "crossDeviceConsentId")
        ),
    )
    if anchor.surface != context.surface:
        raise RuleViolation(
            "anchorRef.surface",
            "anchor-surface-mismatch",
            "anchorRef.surface must be the surface of surfaceContext.",
            [context.surface],
        )
    return draft


def check_cross_device_consent(draft: TokenDraft, current_grant_id: uuid.UUID | None) -> None:
    """Sensitive categories travel between devices only under the member's current
    cross-device grant, cited by its ledger event id. `current_grant_id` is the deciding
    cross_device event when it is a grant (None when never granted or revoked)."""
    if not draft.sensitive_categories:
        return
    if draft.cross_device_consent_id is None:
        raise RuleViolation(
            "crossDeviceConsentId",
            "cross-device-consent-required",
            "A token with sensitive categories needs the member's cross-device consent id.",
        )
    if draft.cross_device_consent_id != current_grant_id:
        raise RuleViolation(
            "crossDeviceConsentId",
            "cross-device-consent-not-current",
            "This cross-device consent is not the member's current grant.",
        )


def token_visible(
    sensitive_categories: Iterable[str],
    cross_device_consent_id: uuid.UUID | None,
    current_grant_id: uuid.UUID | None,
) -> bool:
    """A stored token may be handed to another device: no sensitive category, or the
    consent it cites is still the member's current cross-device grant."""
    if not tuple(sensitive_categories):
        return True
    return current_grant_id is not None and cross_device_consent_id == current_grant_id


# -- last write wins -----------------------------------------------------------------------


class Outcome(StrEnum):
    WRITTEN = "written"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class SlotWrite:
    """One write to a slot as the rule sees it: which device, stamped when by the server."""

    device_id: str
    server_time: datetime


@dataclass(frozen=True)
class WriteDecision:
    outcome: Outcome
    created: bool  # the slot had no token: this write creates it
    # The other device in a conflict (None when there is none) and when it wrote.
    other: SlotWrite | None = field(default=None)


def decide_write(
    incoming: SlotWrite, current: SlotWrite | None, window: timedelta
) -> WriteDecision:
    """Last write wins per slot (member, scope key, surface), by server time.

    `server_time` is when Iris received the write, stamped before the write waits for the
    slot's lock; the caller holds that lock while it asks. So the order of writes is the
    order Iris received them, not the order in which they happened to get the lock:

    - no token yet: written;
    - the incoming write is the most recent (received at or after the stored one): written,
      and it replaces the stored token;
    - the incoming write is older than the stored one (another write, received later, got
      the lock first): superseded. Nothing is stored; the answer carries the winning token.

    A conflict is two different devices writing within `window` of each other. Whichever
    write is decided second learns of it in its own answer (`other` names the other
    device): the winner that replaced a token another device wrote moments ago ("this was
    also playing on your other device"), or the loser that was overtaken. A device learns
    that it was overtaken after its answer was sent by reading, or by its next write.
    Ties on the stamp go to the incoming write (it is decided later, so it is the most
    recent write Iris knows of).
    """
    if current is None:
        return WriteDecision(Outcome.WRITTEN, created=True)
    conflicting = (
        incoming.device_id != current.device_id
        and abs(incoming.server_time - current.server_time) <= window
    )
    other = current if conflicting else None
    if incoming.server_time >= current.server_time:
        return WriteDecision(Outcome.WRITTEN, created=False, other=other)
    return WriteDecision(Outcome.SUPERSEDED, created=False, other=other)


CONFLICT_MESSAGE = "This was also playing on your other device"


def expiry_cutoff(now: datetime, ttl: timedelta) -> datetime:
    """Tokens whose last write is before this are expired."""
    return now - ttl


# -- reads ---------------------------------------------------------------------------------

READ_PARAMS = frozenset({"userId", "surface", "limit"})
DEFAULT_READ_LIMIT = 10


def parse_read_query(params: Mapping[str, Any], *, limit_max: int) -> tuple[str | None, int]:
    """`surface` (optional, one of SURFACES) and `limit` (1..limit_max) of a read."""
    for key in sorted(params):
        if key not in READ_PARAMS:
            raise RuleViolation(key, "unknown-field", f"{key} is not a parameter.", READ_PARAMS)
    surface = params.get("surface") or None
    if surface is not None:
        _choice(surface, SURFACES, "surface")
    raw = params.get("limit")
    if raw in (None, ""):
        return surface, min(DEFAULT_READ_LIMIT, limit_max)
    try:
        limit = int(str(raw))
    except ValueError:
        raise RuleViolation("limit", "invalid", "limit must be a whole number.") from None
    if not 1 <= limit <= limit_max:
        raise RuleViolation("limit", "out-of-range", f"limit must be between 1 and {limit_max}.")
    return surface, limit
