"""What each kind of data-rights request carries, validated (spec: the delete, export and
access payloads). Takes the wire JSON, returns the normalised payload that is stored, or
raises RuleError naming the field and the rule. Plain Python: no Django."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from consent.enums import Category
from dsar.enums import DeleteMode, DeliveryChannel, ExportFormat, RequestKind
from governance.rules import RuleError
from memory.enums import ScopeKind
from memory.rules.retention import SOFT_DELETE_GRACE

# A soft delete may wait at most this long before its purge.
MAX_GRACE_MS = 90 * 24 * 3600 * 1000
DEFAULT_GRACE_MS = int(SOFT_DELETE_GRACE.total_seconds() * 1000)
PASSPHRASE_MIN = 12
PASSPHRASE_MAX = 200

EXPORT_FLAGS = (
    "includeConsents",
    "includeOptOuts",
    "includeNotebooks",
    "includeSessionMemory",
    "includeSceneMemory",
    "includePoseMemory",
)
# Scene and pose memory leave only when the member opts in to each.
OPT_IN_FLAGS = {"includeSceneMemory": ScopeKind.SCENE, "includePoseMemory": ScopeKind.POSE}
FLAG_OF_SCOPE = {
    ScopeKind.NOTEBOOK: "includeNotebooks",
    ScopeKind.SESSION: "includeSessionMemory",
    ScopeKind.SCENE: "includeSceneMemory",
    ScopeKind.POSE: "includePoseMemory",
}

_FIELDS: dict[RequestKind, frozenset[str]] = {
    RequestKind.DELETE: frozenset(
        {"mode", "scopes", "categories", "purgeConsentLedger", "retentionGraceMs"}
    ),
    RequestKind.EXPORT: frozenset(
        {"scopes", "format", "deliveryChannel", "encrypted", "passphrase", *EXPORT_FLAGS}
    ),
    RequestKind.ACCESS: frozenset({"scopes"}),
}


def _flag(data: Mapping[str, Any], name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise RuleError(name, "wrong-type", f"{name} must be true or false.")
    return value


def _choices(data: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> list[str]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuleError(name, "wrong-type", f"{name} must be a list of names.")
    for item in value:
        if item not in allowed:
            raise RuleError(name, "invalid_choice", f"{name} names an unknown value.", allowed)
    if len(set(value)) != len(value):
        raise RuleError(name, "duplicate", f"{name} names a value twice.")
    return sorted(value)


def _choice(data: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = data.get(name, default)
    if value not in allowed:
        raise RuleError(
            name, "invalid_choice", f"{name} is not one of the allowed values.", allowed
        )
    return str(value)


SCOPES = tuple(s.value for s in ScopeKind)
CATEGORIES = tuple(c.value for c in Category)


def validate(kind: str, data: Any) -> dict[str, Any]:
    """The stored payload of a request of `kind`. The export passphrase is returned under
    `passphrase` for the caller to move into the vault; it is never stored in the payload."""
    try:
        request_kind = RequestKind(kind)
    except ValueError:
        raise RuleError(
            "kind", "invalid_choice", "kind is not a data-rights kind.", list(RequestKind)
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RuleError("payload", "wrong-type", "payload must be an object.")
    unknown = sorted(set(data) - _FIELDS[request_kind])
    if unknown:
        raise RuleError(
            f"payload.{unknown[0]}",
            "unknown-field",
            f"A {request_kind} request has no such field.",
            sorted(_FIELDS[request_kind]),
        )
    if request_kind is RequestKind.DELETE:
        return _delete(data)
    if request_kind is RequestKind.EXPORT:
        return _export(data)
    return {"scopes": _choices(data, "scopes", SCOPES)}


def _delete(data: Mapping[str, Any]) -> dict[str, Any]:
    mode = data.get("mode")
    if mode is None:
        raise RuleError("payload.mode", "required", "Say soft or hard.", list(DeleteMode))
    mode = _choice({"payload.mode": mode}, "payload.mode", tuple(DeleteMode), "")
    scopes = _prefixed(_choices, data, "scopes", SCOPES)
    categories = _prefixed(_choices, data, "categories", CATEGORIES)
    if not scopes and not categories:
        raise RuleError(
            "payload.scopes",
            "scope-or-category-required",
            "Name at least one scope or category to delete.",
        )
    grace = data.get("retentionGraceMs", 0 if mode == DeleteMode.HARD else DEFAULT_GRACE_MS)
    if not isinstance(grace, int) or isinstance(grace, bool):
        raise RuleError("payload.retentionGraceMs", "wrong-type", "retentionGraceMs is a number.")
    if mode == DeleteMode.HARD and grace != 0:
        raise RuleError(
            "payload.retentionGraceMs",
            "hard-delete-has-no-grace",
            "A hard delete has no grace window: retentionGraceMs must be 0.",
        )
    if not 0 <= grace <= MAX_GRACE_MS:
        raise RuleError(
            "payload.retentionGraceMs",
            "out-of-range",
            f"retentionGraceMs is between 0 and {MAX_GRACE_MS}.",
        )
    return {
        "mode": mode,
        "scopes": scopes,
        "categories": categories,
        "purgeConsentLedger": _prefixed(_flag, data, "purgeConsentLedger", False),
        "retentionGraceMs": grace,
    }


def _export(data: Mapping[str, Any]) -> dict[str, Any]:
    scopes = _prefixed(_choices, data, "scopes", SCOPES)
    flags = {
        name: _prefixed(_flag, data, name, name in ("includeConsents", "includeOptOuts"))
        for name in EXPORT_FLAGS
    }
    for flag, scope in OPT_IN_FLAGS.items():
        if scope.value in scopes and not flags[flag]:
            raise RuleError(
                f"payload.{flag}",
                "opt-in-required",
                f"{scope.value} memory leaves only when {flag} is true.",
            )
    encrypted = _prefixed(_flag, data, "encrypted", False)
    passphrase = data.get("passphrase")
    if encrypted:
        if (
            not isinstance(passphrase, str)
            or not PASSPHRASE_MIN <= len(passphrase) <= PASSPHRASE_MAX
        ):
            raise RuleError(
                "payload.passphrase",
                "passphrase-length",
                f"An encrypted export needs a passphrase of {PASSPHRASE_MIN} to "
                f"{PASSPHRASE_MAX} characters.",
            )
    elif passphrase is not None:
        raise RuleError(
            "payload.passphrase", "not-encrypted", "A passphrase goes with encrypted: true."
        )
    return {
        "scopes": scopes,
        "format": _choice(
            {"payload.format": data.get("format", ExportFormat.JSON)},
            "payload.format",
            tuple(ExportFormat),
            ExportFormat.JSON,
        ),
        "deliveryChannel": _choice(
            {"payload.deliveryChannel": data.get("deliveryChannel", DeliveryChannel.DOWNLOAD)},
            "payload.deliveryChannel",
            tuple(DeliveryChannel),
            DeliveryChannel.DOWNLOAD,
        ),
        "encrypted": encrypted,
        **flags,
        **({"passphrase": passphrase} if encrypted else {}),
    }


def _prefixed(rule: Any, data: Mapping[str, Any], name: str, *args: Any) -> Any:
    """Run a field rule and report its field as `payload.<name>`."""
    try:
        return rule(data, name, *args)
    except RuleError as exc:
        raise RuleError(f"payload.{exc.field}", exc.rule, exc.message, exc.allowed) from None


def exported_scopes(payload: Mapping[str, Any]) -> list[str]:
    """The scope kinds an export carries: those named (all when none are), less those
    whose include flag is off."""
    named = payload.get("scopes") or list(SCOPES)
    return sorted(
        s
        for s in named
        if ScopeKind(s) not in FLAG_OF_SCOPE or payload.get(FLAG_OF_SCOPE[ScopeKind(s)])
    )
