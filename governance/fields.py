"""Serializer fields whose errors name the rule and the allowed values."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from django.utils.functional import cached_property
from rest_framework import serializers


class EnumField(serializers.ChoiceField):
    def __init__(self, choices: Iterable[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        values = [str(c) for c in choices]
        kwargs.setdefault(
            "error_messages",
            {"invalid_choice": f'"{{input}}" is not allowed; allowed values: {", ".join(values)}.'},
        )
        super().__init__(choices=values, **kwargs)


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
        shared = self._shared.__dict__
        key = type(self)
        if key not in shared:
            blank = key()
            shared[key] = serializers.Serializer.fields.real_func(blank)  # type: ignore[attr-defined]
        return shared[key]
