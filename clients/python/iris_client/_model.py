"""The base of the generated request and response dataclasses: JSON in and out.

The generated classes only declare their fields (with the wire name where it differs from
the Python one); turning JSON into them and back is done here, from their type hints, so
the generated file stays declarative and this logic is written and tested once.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, Self, Union, get_args, get_origin


class DecodeError(ValueError):
    """An answer that does not have the shape the schema promised."""


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _wire(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("wire", f.name))


def _decode(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = [a for a in get_args(tp) if a is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = get_args(tp)
        return [_decode(item, v) for v in value]
    if origin is dict:
        return dict(value)
    if origin is Literal:
        return value
    if isinstance(tp, type) and issubclass(tp, Model):
        return tp.from_dict(value)
    if tp is datetime:
        return datetime.fromisoformat(value)
    return value


def encode(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("Iris takes timezone-aware datetimes only")
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


class Model:
    """A request or response body. Subclasses are keyword-only dataclasses."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        if not isinstance(data, Mapping):
            raise DecodeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            wire = _wire(f)
            if wire in data:
                try:
                    values[f.name] = _decode(hints[f.name], data[wire])
                except (TypeError, ValueError) as exc:
                    raise DecodeError(f"{cls.__name__}.{wire}: {exc}") from exc
        # Fields the server added after this client was generated are ignored.
        try:
            return cls(**values)
        except TypeError as exc:
            raise DecodeError(f"{cls.__name__}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, camelCase, without the optional fields left unset (None)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[_wire(f)] = encode(value)
        return out
