"""Memory listens to consent: a revoked sensitive consent deletes the memory it covered.

Consent announces the revocation after it committed (`consent.signals`); memory answers
by queueing ONE idempotent task, never by deleting inside the signal. Connected from
`MemoryConfig.ready()`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from consent.signals import sensitive_consent_revoked
from governance.after_commit import after_commit

DISPATCH_UID = "memory.receivers.cascade_on_revocation"


def cascade_on_revocation(
    sender: Any,
    *,
    tenant_id: uuid.UUID,
    member_id: int,
    consent_type: str,
    categories: Iterable[str],
    event_id: uuid.UUID,
    **_: Any,
) -> None:
    from memory.tasks import cascade_consent_revocation

    after_commit(
        cascade_consent_revocation,
        tenant_id=str(tenant_id),
        member_id=int(member_id),
        consent_type=str(consent_type),
        categories=sorted(str(c) for c in categories),
        event_id=str(event_id),
    )


def connect() -> None:
    sensitive_consent_revoked.connect(cascade_on_revocation, dispatch_uid=DISPATCH_UID)
