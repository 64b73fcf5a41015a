"""The one JSON parser of the API: it refuses, with a 400 naming the field and the rule,
what no field of Iris can use.

- nesting deeper than MAX_DEPTH (no body of the contract is deeper than four; a deep
  document would otherwise exhaust the stack in the decoder or in validation);
- a key sent twice in one object (which one counts would be the parser's guess);
- `NaN` and `Infinity` (not JSON);
- unusable text in any key or string (`governance.text`): unpaired surrogates, NUL and
  other control characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

# get_encoding is DRF's charset check (it refuses bytes-to-bytes codecs); drf-stubs omit it.
from rest_framework.parsers import JSONParser, get_encoding  # type: ignore[attr-defined]

from governance.errors import IrisError, ValidationFailed
from governance.text import UNUSABLE_MESSAGES, safe_field_name, unusable_rule

MAX_DEPTH = 16


class MalformedBody(IrisError):
    status = 400
    code = "malformed-request"
    title = "The request body could not be parsed"


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Duplicate
    return result


def _not_json(_constant: str) -> None:
    raise ValueError("not JSON")


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check_document(document: Any) -> None:
    """Walk a decoded document without recursion; raise at the first unusable part."""
    stack: list[tuple[Any, str, int]] = [(document, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            rule = unusable_rule(value)
            if rule is not None:
                raise ValidationFailed(UNUSABLE_MESSAGES[rule], field=path or "body", rule=rule)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise MalformedBody(
                f"The body is nested deeper than {MAX_DEPTH} levels.",
                field=path or "body",
                rule="too-deep",
            )
        if isinstance(value, list):
            stack.extend((item, _child(path, i), depth + 1) for i, item in enumerate(value))
            continue
        for key, item in value.items():
            rule = unusable_rule(key)
            if rule is not None:
                raise ValidationFailed(
                    "A field name: " + UNUSABLE_MESSAGES[rule], field=path or "body", rule=rule
                )
            # A key is quoted back only when it looks like a field name of ours.
            name = safe_field_name(key)
            stack.append((item, _child(path, name) if name else (path or "body"), depth + 1))


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[Any] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
        except UnicodeDecodeError:
            raise MalformedBody(
                "The body is not valid UTF-8.", field="body", rule="encoding"
            ) from None
        try:
            document = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_not_json)
        except RecursionError:
            raise MalformedBody(
                f"The body is nested deeper than {MAX_DEPTH} levels.",
                field="body",
                rule="too-deep",
            ) from None
        except _Duplicate:
            raise MalformedBody(
                "An object names the same field twice.", field="body", rule="duplicate-field"
            ) from None
        except ValueError:
            # The decoder's message gives a position only, but say nothing of the input.
            raise MalformedBody("The body is not valid JSON.", field="body", rule="json") from None
        check_document(document)
        return document
