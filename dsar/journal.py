"""The erasure journal: what data-rights deletion erased, by id, outside the database.

A backup restored after a deletion would bring the deleted memory back. So each erasure,
once committed, is also appended to a JSON-lines file at `settings.IRIS_ERASURE_JOURNAL_PATH`
(kept on storage that database backups do not restore, see docs/operations), and
`manage.py reapply_erasures` deletes again everything it names. A line holds ids only —
tenant, member (public id), request, the erased ids and what kind of thing they are, when
— never a body, a category or a reason: the journal outlives the member's data and must
not become a copy of it.

Each line is signed (HMAC-SHA256 under a key derived from the master key, with its key
id, so a rotated key still verifies): a line that was edited or forged is refused when the
journal is read, so nobody can use the journal to delete someone else's data. The file is
only ever appended to, under an exclusive lock, and flushed to disk before `append`
returns.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from django.conf import settings

from governance import keys
from governance.audit import canonical_json

PURPOSE = "iris-dsar-erasure-journal-v1"
VERSION = 1


class Kind(StrEnum):
    MEMORY_ENTRIES = "memory-entries"  # entry ids: every revision of each was deleted
    CONSENT_EVENTS = "consent-events"  # consent event ids whose bodies were erased
    CONTINUATION_TOKENS = "continuation-tokens"  # token ids that were deleted


@dataclass(frozen=True)
class Erasure:
    tenant_id: uuid.UUID
    member_id: uuid.UUID  # the member's public id
    request_id: uuid.UUID
    kind: Kind
    ids: tuple[uuid.UUID, ...]
    at: datetime

    def fields(self) -> dict[str, object]:
        return {
            "v": VERSION,
            "tenantId": str(self.tenant_id),
            "memberId": str(self.member_id),
            "requestId": str(self.request_id),
            "kind": self.kind.value,
            "ids": sorted(str(i) for i in self.ids),
            "at": self.at.isoformat(),
        }


class JournalLineRefused(ValueError):
    """A line that does not parse, or whose signature does not verify."""


def path() -> Path:
    return Path(settings.IRIS_ERASURE_JOURNAL_PATH)


def _signed_line(erasure: Erasure) -> str:
    fields = erasure.fields()
    key_id, mac = keys.sign(PURPOSE, canonical_json(fields))
    return json.dumps({**fields, "keyId": key_id, "mac": mac}, sort_keys=True) + "\n"


def append(erasures: Iterable[Erasure]) -> int:
    """Append one signed line per erasure (none for an erasure of no ids); returns how
    many. Raises OSError when the journal cannot be written."""
    lines = [_signed_line(e) for e in erasures if e.ids]
    if not lines:
        return 0
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_APPEND and one write per call: concurrent workers never interleave inside a line.
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, "".join(lines).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(lines)


def parse(line: str) -> Erasure:
    """The erasure a journal line records, or JournalLineRefused."""
    try:
        data = json.loads(line)
        key_id = data.pop("keyId")
        mac = data.pop("mac")
        if not isinstance(key_id, str) or not isinstance(mac, str):
            raise TypeError("keyId and mac are text")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise JournalLineRefused("not a journal line") from None
    if not keys.verify_signature(PURPOSE, canonical_json(data), key_id, mac):
        raise JournalLineRefused("signature does not verify")
    try:
        if data["v"] != VERSION:
            raise ValueError("unknown version")
        return Erasure(
            tenant_id=uuid.UUID(data["tenantId"]),
            member_id=uuid.UUID(data["memberId"]),
            request_id=uuid.UUID(data["requestId"]),
            kind=Kind(data["kind"]),
            ids=tuple(uuid.UUID(i) for i in data["ids"]),
            at=datetime.fromisoformat(data["at"]),
        )
    except (ValueError, KeyError, TypeError):
        raise JournalLineRefused("a signed line with unknown fields") from None


@dataclass(frozen=True)
class Reading:
    erasures: list[Erasure]
    refused: int  # lines that did not parse or verify


def read(*, since: datetime | None = None) -> Reading:
    """Every verified erasure recorded at or after `since`, in journal order."""
    found: list[Erasure] = []
    refused = 0
    for line in _lines():
        try:
            erasure = parse(line)
        except JournalLineRefused:
            refused += 1
            continue
        if since is None or erasure.at >= since:
            found.append(erasure)
    return Reading(found, refused)


def _lines() -> Iterator[str]:
    target = path()
    if not target.exists():
        return
    with target.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield line
