"""Serializer fields whose errors name the rule and the allowed values."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework import serializers


class EnumField(serializers.ChoiceField):
    def __init__(self, choices: Iterable[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        values = [str(c) for c in choices]
        kwargs.setdefault(
            "error_messages",
            {"invalid_choice": f'"{{input}}" is not allowed; allowed values: {", ".join(values)}.'},
        )
        super().__init__(choices=values, **kwargs)
