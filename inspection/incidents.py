"""Signed incident references: how an incident escalation shows a legitimate interest.

Issued by an operator with the trust-and-safety role (`incident_reference_issue`, or
`manage.py issue_incident_reference`) for one member of their tenant, valid for a few
hours (at most MAX_TTL_HOURS), good for one grant. The reference is a string

    iris-inc1.<reference id>.<expires, unix seconds>.<key id>.<HMAC-SHA256 hex>

whose MAC covers the id, the tenant, the member and the expiry under a key derived from
the master key for PURPOSE (`governance.keys.sign`), so it cannot be forged or moved to
another member without the master key. The issued row is kept too (who issued it, for
whom, until when, which grant spent it): a reference that verifies but has no row, or
whose row disagrees, is refused as forged, and spending it is a conditional UPDATE in the
grant's transaction, so it is used once.

This module is the pure part: the message, the text format and the verdict. Plain
Python: no Django.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from inspection.enums import IncidentReferenceStatus

PURPOSE = "iris-inspection-incident-reference-v1"
PREFIX = "iris-inc1"
DEFAULT_TTL_HOURS = 24
MAX_TTL_HOURS = 72
MAX_LENGTH = 200
_FORMAT = re.compile(
    rf"^{PREFIX}\.(?P<id>[0-9a-f]{{32}})\.(?P<exp>[0-9]{{1,12}})\."
    r"(?P<key>[0-9a-f]{16})\.(?P<mac>[0-9a-f]{64})$"
)


@dataclass(frozen=True, slots=True)
class ParsedReference:
    reference_id: uuid.UUID
    expires_at: datetime
    key_id: str
    mac: str


@dataclass(frozen=True, slots=True)
class IssuedReference:
    """What the issued row says."""

    tenant_id: str
    member_id: str
    expires_at: datetime
    spent_by: str | None  # the inspection whose grant used it


def message(reference_id: uuid.UUID, tenant_id: str, member_id: str, expires_at: datetime) -> bytes:
    return b"\x00".join(
        (
            PURPOSE.encode(),
            reference_id.hex.encode(),
            str(tenant_id).encode(),
            str(member_id).encode(),
            str(int(expires_at.timestamp())).encode(),
        )
    )


def encode(reference_id: uuid.UUID, expires_at: datetime, key_id: str, mac: str) -> str:
    return f"{PREFIX}.{reference_id.hex}.{int(expires_at.timestamp())}.{key_id}.{mac}"


def parse(text: object) -> ParsedReference | None:
    """The parts of a reference, or None when it is not one (wrong shape or length)."""
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    match = _FORMAT.match(text.strip())
    if match is None:
        return None
    try:
        expires = datetime.fromtimestamp(int(match["exp"]), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return ParsedReference(uuid.UUID(match["id"]), expires, match["key"], match["mac"])


def verdict(
    *,
    cited: bool,
    parsed: ParsedReference | None,
    mac_verifies: bool,
    issued: IssuedReference | None,
    tenant_id: str,
    member_id: str,
    inspection_id: str,
    now: datetime,
) -> IncidentReferenceStatus:
    """Whether a cited reference lets `inspection_id` (for `member_id` of `tenant_id`) be
    granted at `now`. The caller checks the MAC (it needs the key) over the issued row's
    own tenant and member, so a reference moved to another member reads as mismatched."""
    st = IncidentReferenceStatus
    if not cited:
        return st.MISSING
    if parsed is None:
        return st.FORGED
    if not mac_verifies or issued is None or issued.expires_at != parsed.expires_at:
        return st.FORGED
    if str(issued.tenant_id) != str(tenant_id) or str(issued.member_id) != str(member_id):
        return st.MISMATCHED
    if issued.spent_by is not None and str(issued.spent_by) != str(inspection_id):
        return st.USED
    if now >= issued.expires_at:
        return st.EXPIRED
    return st.VALID
