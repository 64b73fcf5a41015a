"""What other apps hold about a member, for the apps that show a member everything.

Apps that sit side by side (data rights and inspection) may not import each other, so an
app that holds something about a member registers a reader here, by name, and the export
and access report ask for it by that name. A reader takes the member and yields plain
JSON-ready records, tenant first like every reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from governance.models import User

Reader = Callable[[User], Iterable[dict[str, Any]]]

_READERS: dict[str, Reader] = {}


def register(name: str, reader: Reader) -> None:
    _READERS[name] = reader


def records(name: str, member: User) -> Iterator[dict[str, Any]]:
    """The records `name` holds about `member`, or none when no app registered it."""
    reader = _READERS.get(name)
    if reader is None:
        return iter(())
    return iter(reader(member))
