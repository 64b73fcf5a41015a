"""docs/api.md cannot drift: every request in it runs, in order, against a fresh demo
(`seed_demo`, as `make run` seeds it) through the whole middleware stack, and every answer
must be the one written under it.

The guide's rule for values that change on every run: a string `<…>` in an answer matches
any value; `<$name>` matches any value the first time and binds it, must be the same value
when it appears again, and stands for that value in later requests; `<token>` in a request
is the demo surface token. `IRIS_WRITE_API_GUIDE=1` rewrites the answers from what Iris
says now, keeping the placeholders that are there.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BLOCK = re.compile(r"```http\n(.*?)```", re.S)
PLACEHOLDER = re.compile(r"^<(\$?)([^<>]*)>$")
NAMED = re.compile(r"<\$([A-Za-z0-9_]+)>")
SHOWN_HEADERS = ("Content-Type", "Location", "Idempotent-Replayed", "Retry-After")
# Values that differ on every run; a rewritten answer shows them as `<key>`.
VOLATILE_KEYS = {
    "id",
    "revisionId",
    "tenantId",
    "createdAt",
    "updatedAt",
    "recordedAt",
    "occurredAt",
    "grantedAt",
    "fingerprint",
    "prevHash",
    "since",
    "expiresAt",
    "eventId",
    "approvalId",
    "conflictId",
    "entryId",
    "returnedIds",
    "clientTimestamp",
    "serverTime",
    "startedAt",
    "lastReferencedAt",
    "supersedes",
    "crossDeviceConsentId",
    "card",
    "score",
    "chainHash",
    "otherWrittenAt",
}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def header_matches(expected: str, actual: str | None) -> bool:
    """A header written with `<…>` in it (an id in a `Location`) matches any value there."""
    parts = re.split(r"<[^<>]*>", expected)
    return actual is not None and re.fullmatch(".+".join(map(re.escape, parts)), actual) is not None


@dataclass
class Exchange:
    request: str
    response: str
    span: tuple[int, int]  # where the response block's text sits in the guide


def exchanges(text: str) -> list[Exchange]:
    blocks = list(BLOCK.finditer(text))
    pairs = []
    for block in blocks:
        if block.group(1).startswith("HTTP/1.1 "):
            continue
        answer = next((b for b in blocks if b.start() > block.end()), None)
        assert answer is not None and answer.group(1).startswith("HTTP/1.1 "), (
            f"a request in docs/api.md has no answer after it: {block.group(1)[:60]!r}"
        )
        pairs.append(Exchange(block.group(1), answer.group(1), answer.span(1)))
    return pairs


def _split(message: str) -> tuple[str, dict[str, str], str]:
    head, _, body = message.partition("\n\n")
    first, *lines = head.splitlines()
    headers = dict(line.split(": ", 1) for line in lines)
    return first, headers, body.strip()


def _substitute(text: str, bound: dict[str, Any], token: str) -> str:
    text = text.replace("<token>", token)
    return NAMED.sub(lambda m: str(bound[m.group(1)]), text)


def matches(expected: Any, actual: Any, bound: dict[str, Any], path: str = "$") -> None:
    if isinstance(expected, str) and (hole := PLACEHOLDER.match(expected)):
        named, name = hole.groups()
        if named and name in bound:
            assert actual == bound[name], f"{path}: <${name}> was {bound[name]!r}, now {actual!r}"
        elif named:
            bound[name] = actual
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        assert set(expected) == set(actual), (
            f"{path}: keys differ: guide {sorted(expected)}, Iris {sorted(actual)}"
        )
        for key in expected:
            matches(expected[key], actual[key], bound, f"{path}.{key}")
        return
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(expected) == len(actual), (
            f"{path}: expected {len(expected)} items, got {actual!r}"
        )
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            matches(e, a, bound, f"{path}[{index}]")
        return
    assert expected == actual, f"{path}: guide says {expected!r}, Iris says {actual!r}"


def rewrite(expected: Any, actual: Any, key: str = "") -> Any:
    """The answer to write into the guide: Iris's, with the guide's placeholders kept."""
    if isinstance(expected, str) and PLACEHOLDER.match(expected):
        return expected
    if key in VOLATILE_KEYS and actual not in (None, [], 0):
        return f"<{key}>"
    if isinstance(actual, dict):
        old = expected if isinstance(expected, dict) else {}
        return {k: rewrite(old.get(k), v, k) for k, v in actual.items()}
    if isinstance(actual, list):
        old = expected if isinstance(expected, list) else []
        return [rewrite(old[i] if i < len(old) else None, v, key) for i, v in enumerate(actual)]
    return actual


def send(client: Client, request: str, bound: dict[str, Any], token: str) -> Any:
    first, headers, body = _split(_substitute(request, bound, token))
    method, path, _version = first.split(" ")
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    extra.pop("HTTP_CONTENT_TYPE", None)
    return client.generic(
        method, path, body.encode(), content_type=headers.get("Content-Type", ""), **extra
    )


def answer_text(response: Any, body: Any) -> str:
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    lines += [
        f"{name}: {UUID.sub('<id>', response[name])}"
        for name in SHOWN_HEADERS
        if response.has_header(name)
    ]
    text = "\n".join(lines) + "\n"
    if body is not None:
        text += "\n" + json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    return text


@pytest.fixture
def demo_token(db, settings) -> str:
    settings.DEBUG = True  # seed_demo runs only in development, as `make run` has it
    out = StringIO()
    call_command("seed_demo", stdout=out)
    found = re.search(r"\(shown once\): (\S+)", out.getvalue())
    assert found is not None, out.getvalue()
    return found.group(1)


def test_the_guide_answers_are_what_iris_answers(demo_token, django_capture_on_commit_callbacks):
    text = GUIDE.read_text()
    steps = exchanges(text)
    assert len(steps) >= 15, "docs/api.md lost its examples"
    client = Client()
    bound: dict[str, Any] = {}
    rewritten: list[tuple[tuple[int, int], str]] = []
    writing = os.environ.get("IRIS_WRITE_API_GUIDE") == "1"
    for step in steps:
        try:
            with django_capture_on_commit_callbacks(execute=True):
                response = send(client, step.request, bound, demo_token)
        except KeyError as unbound:
            if not writing:
                raise AssertionError(f"docs/api.md uses {unbound} before binding it") from None
            break  # write what is known; name the placeholder, then run again

        status_line, headers, body_text = _split(step.response)
        expected_body = json.loads(body_text) if body_text else None
        actual_body = json.loads(response.content) if response.content else None
        where = step.request.splitlines()[0]
        if writing:
            body = rewrite(expected_body, actual_body)
            matches(body, actual_body, bound)
            rewritten.append((step.span, answer_text(response, body)))
            continue
        assert status_line.split(" ")[1] == str(response.status_code), (
            f"{where}: guide says {status_line}, Iris answers {response.status_code}: "
            f"{response.content[:300]!r}"
        )
        for name, value in headers.items():
            assert header_matches(value, response.get(name)), f"{where}: header {name}"
        try:
            matches(expected_body, actual_body, bound)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    if rewritten:
        for (start, end), new in reversed(rewritten):
            text = text[:start] + new + text[end:]
        GUIDE.write_text(text)


def test_placeholders_match_and_bind() -> None:
    bound: dict[str, Any] = {}
    matches({"id": "<$entryId>", "at": "<createdAt>"}, {"id": "e1", "at": "t"}, bound)
    assert bound == {"entryId": "e1"}
    with pytest.raises(AssertionError):
        matches({"id": "<$entryId>"}, {"id": "e2"}, bound)
    with pytest.raises(AssertionError):
        matches({"a": 1}, {"a": 1, "b": 2}, bound)
    assert _substitute("POST /x/<$entryId> <token>", bound, "T") == "POST /x/e1 T"
