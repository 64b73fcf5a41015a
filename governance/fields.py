"""Serializer fields and the input base every API body uses: errors name the field and the
rule (and the allowed values), never the value that was sent."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.http import QueryDict
from django.utils.functional import cached_property
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.settings import api_settings

from governance.text import (
    TextRuleError,
    check_identifier_text,
    check_instant,
    parse_instant,
    safe_field_name,
)


class EnumField(serializers.ChoiceField):
    def __init__(self, choices: Iterable[str], **kwargs: Any) -> None:
        values = [str(c) for c in choices]
        kwargs.setdefault(
            "error_messages",
            {"invalid_choice": f"Not an allowed value; allowed values: {', '.join(values)}."},
        )
        super().__init__(choices=values, **kwargs)


class InstantField(serializers.DateTimeField):
    """An RFC 3339 timestamp with an offset, within `governance.text`'s range (at the
    calendar's edge a conversion to UTC overflows)."""

    default_error_messages = {
        "invalid": "Not an RFC 3339 timestamp.",
        "timezone": "The timestamp needs a UTC offset (e.g. 2025-01-31T09:00:00Z).",
        "out-of-range": "The timestamp is out of range.",
    }

    def to_internal_value(self, value: Any) -> datetime:
        try:
            return parse_instant(value)
        except TextRuleError as exc:
            if exc.rule == "timezone-required":
                self.fail("timezone")
            if exc.rule == "out-of-range":
                raise serializers.ValidationError(exc.message, code="out-of-range") from None
            self.fail("invalid")


def in_range(value: datetime) -> bool:
    try:
        check_instant(value)
    except TextRuleError:
        return False
    return True


class IdentifierField(serializers.CharField):
    """An id the caller chose (a session, a notebook): no whitespace controls, no invisible
    format characters."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return check_identifier_text(value)
        except TextRuleError as exc:
            raise serializers.ValidationError(exc.message, code=exc.rule) from None


def _json_types(field: serializers.Field) -> tuple[type, ...] | None:
    """The JSON types a body may send for `field` (None: the field checks for itself)."""
    if isinstance(field, serializers.BooleanField):
        return (bool,)
    if isinstance(field, serializers.IntegerField):
        return (int,)
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        return (int, float)
    if isinstance(field, serializers.MultipleChoiceField | serializers.ListField):
        return (list,)
    if isinstance(field, serializers.ListSerializer):
        return (list,)
    if isinstance(
        field,
        serializers.CharField
        | serializers.ChoiceField
        | serializers.UUIDField
        | serializers.DateTimeField,
    ):
        return (str,)
    if isinstance(field, serializers.DictField | serializers.Serializer):
        return (dict,)
    return None


_TYPE_NAMES = {bool: "true or false", int: "a whole number", list: "a list", dict: "an object"}


def _text_child(field: serializers.Field) -> bool:
    child = getattr(field, "child", None)
    return isinstance(child, serializers.CharField | serializers.ChoiceField)


def _type_error(field: serializers.Field, value: Any) -> str | None:
    types = _json_types(field)
    if types is None:
        return None
    # JSON has no int/bool distinction Python would honour: True is an int in Python.
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        return f"Must be {_TYPE_NAMES.get(types[0], 'text')}."
    if _text_child(field):
        items = value.values() if isinstance(value, dict) else value
        if any(not isinstance(item, str) for item in items):
            return "Every item must be text."
    return None


class StrictInput:
    """Mix into every input serializer of a JSON body.

    A body names only this request's fields (an unknown one is refused, not ignored: a
    misspelt `crisisFrame` must not silently become false), and each value has its JSON
    type (`"yes"` is not true, `42` is not text). Query strings stay DRF's: they have no
    types, and proxies add parameters of their own.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            fields = self.fields  # type: ignore[attr-defined]
            errors: dict[str, list[ErrorDetail]] = {}
            for key in data:
                field = fields.get(key) if isinstance(key, str) else None
                if field is None or field.read_only:
                    name = safe_field_name(key)
                    message = (
                        f"{name} is not a field of this request."
                        if name
                        else ("A field name is not a field of this request.")
                    )
                    errors.setdefault(name or api_settings.NON_FIELD_ERRORS_KEY, []).append(
                        ErrorDetail(message, code="unknown-field")
                    )
                    continue
                value = data[key]
                if value is None:
                    continue  # allow_null decides
                problem = _type_error(field, value)
                if problem:
                    errors[key] = [ErrorDetail(problem, code="wrong-type")]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]


class SharedFieldsInput:
    """For input serializers that only validate `data=`.

    DRF deep-copies every declared field for each serializer instance, which cost a write
    more than its validation did. These serializers build their bound fields once per class
    and thread and share them. The fields are bound to a blank instance (so no request's
    data stays reachable from them), so such a serializer must not read `context`, `parent`
    or `partial`.
    """

    _shared = threading.local()

    @cached_property
    def fields(self) -> Any:
        # The thread's own dict, keyed by serializer class rather than attribute name.
        shared: dict[Any, Any] = self._shared.__dict__
        key = type(self)
        if key not in shared:
            blank = key()
            shared[key] = serializers.Serializer.fields.real_func(blank)  # type: ignore[attr-defined]
        return shared[key]
