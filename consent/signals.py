"""What consent announces to the apps that depend on it (dependencies run one way).

`sensitive_consent_revoked` is sent once per revocation that must delete memory
(`consent.ledger.cascade_due`), after the revocation has committed. Keyword arguments:

- `tenant_id` (UUID) and `member_id` (the member's User pk), `member_public_id` (UUID);
- `consent_type` (str): the revoked type, `category:<name>` or `multi_actor_sensitive`;
- `categories` (list[str]): the memory categories whose entries must go; empty for
  `multi_actor_sensitive`, whose cascade selects entries with a sensitive interaction;
- `event_id` (UUID): the revocation's ledger event.

Receivers should queue idempotent work (the send is robust: a failing receiver is logged
and does not undo the committed revocation).
"""

from __future__ import annotations

from django.dispatch import Signal

sensitive_consent_revoked = Signal()
