"""What input text and instants Iris accepts at all, for every field of every API.

Plain Python (no Django), so the JSON parser, the query-string check, the serializer
fields and the pure rule modules share one answer. Errors name a rule, never the value:
an error body that echoes raw input can itself fail to render (a lone surrogate cannot
be encoded) or carry back what a caller should not see again.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime

# Lone surrogates cannot be encoded (the JSON decoder combines valid pairs, so any left
# are unpaired); NUL cannot be stored by PostgreSQL; other C0/C1 controls and DEL mean
# nothing in any field. Tab, line feed and carriage return are text.
_UNUSABLE = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")

# A field name is named back to the caller only when it looks like one of ours.
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,31}$")

# Instants outside these are not real dates for Iris, and near the calendar's edge a
# conversion to UTC (or any later arithmetic) overflows. Bounds are in UTC.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


class TextRuleError(ValueError):
    """A value broke a text or instant rule; `rule` is a stable code, `message` is safe."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def unusable_rule(value: str) -> str | None:
    """The rule `value` breaks, or None when it is usable text."""
    match = _UNUSABLE.search(value)
    if match is None:
        return None
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        return "unpaired-surrogate"
    if char == "\x00":
        return "nul-character"
    return "control-character"


UNUSABLE_MESSAGES = {
    "unpaired-surrogate": "Contains an unpaired surrogate (not valid Unicode text).",
    "nul-character": "Contains a NUL character.",
    "control-character": "Contains a control character.",
}


def check_usable(value: str) -> str:
    rule = unusable_rule(value)
    if rule is not None:
        raise TextRuleError(rule, UNUSABLE_MESSAGES[rule])
    return value


def check_identifier_text(value: str) -> str:
    """An id or key part: usable text with no whitespace controls and no invisible format
    characters (bidi overrides, zero-width joiners), which make two ids look alike."""
    check_usable(value)
    for char in value:
        if char in "\t\n\r" or unicodedata.category(char) in {"Cf", "Zl", "Zp"}:
            raise TextRuleError(
                "invisible-character", "Contains a tab, line break or invisible character."
            )
    return value


def safe_field_name(name: object) -> str | None:
    """`name` if it is safe to quote back in an error, else None."""
    if isinstance(name, str) and _FIELD_NAME.match(name):
        return name
    return None


def check_instant(value: datetime) -> datetime:
    """An aware datetime within [EARLIEST, LATEST), or TextRuleError."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise TextRuleError("timezone-required", "Must carry a UTC offset.")
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        in_utc = None
    if in_utc is None or not EARLIEST <= in_utc < LATEST:
        raise TextRuleError(
            "out-of-range",
            f"Must lie between {EARLIEST.year} and {LATEST.year} (UTC).",
        )
    return value


def parse_instant(value: object) -> datetime:
    """An RFC 3339 timestamp with an offset, within range; TextRuleError otherwise."""
    if not isinstance(value, str):
        raise TextRuleError("invalid", "Not an RFC 3339 timestamp.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise TextRuleError("invalid", "Not an RFC 3339 timestamp.") from None
    return check_instant(parsed)
