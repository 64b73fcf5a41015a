"""The outbox: events derived from audit events in the same transaction, then published
(given their tenant's next cursor) after commit, in commit order.

Writing: `governance.audit` hands every batch of audit events to `_on_audit` before it
inserts them, inside the caller's transaction; the events of the catalogue become `Event`
rows, written by the audit events' own INSERT (one statement, one round trip, on
PostgreSQL). A rolled-back change takes its audit rows and its events with it.

Publishing: `publish_pending` runs after commit (when the tenant has endpoints) and on the
beat schedule. Under one lock it gives every committed, unpublished event its tenant's next
cursor and creates a `Delivery` for each active endpoint that subscribes to its type. Only
committed rows are visible to it, so cursors follow commit order: a consumer that read up
to cursor N never later finds an event below N. That is why the cursor is not given at
insert time (an insert-time counter would either serialise every writer of a tenant on one
row, or hand out numbers in start order rather than commit order).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from events.catalogue import SOURCES, derive
from events.models import Delivery, Event, WebhookEndpoint
from governance.after_commit import after_commit
from governance.audit import add_listener
from governance.models import AuditEvent

log = logging.getLogger(__name__)

PUBLISH_BATCH = 500
# How long this process trusts its answer to "does the tenant have endpoints?"; beat
# publishes everything within its own interval whatever this says.
ENDPOINT_CACHE_SECONDS = 10.0

_endpoint_cache: dict[uuid.UUID, tuple[float, bool]] = {}
_cache_lock = threading.Lock()


def listen() -> None:
    add_listener(_on_audit)


def _member_id(subject_ids: list[str]) -> uuid.UUID | None:
    if not subject_ids:
        return None
    try:
        return uuid.UUID(str(subject_ids[0]))
    except ValueError:
        return None


def _on_audit(audit_events: list[AuditEvent]) -> list[Event]:
    """The outbox rows of a batch of audit events, written by the audit events' INSERT."""
    rows: list[Event] = []
    for audit in audit_events:
        if audit.tenant_id is None or audit.action not in SOURCES:
            continue
        derived = derive(audit.action, audit.subject_ids, audit.payload)
        if derived is None:
            continue
        rows.append(
            Event(
                id=uuid.uuid4(),
                tenant_id=audit.tenant_id,
                cursor=None,
                type=derived.type,
                member_id=_member_id(audit.subject_ids),
                audit_event_id=audit.id,
                occurred_at=audit.occurred_at,
                data=derived.data,
            )
        )
    if rows and any(_has_endpoints(t) for t in {r.tenant_id for r in rows}):
        after_commit(_dispatch_soon, once=True)
    return rows


def _dispatch_soon() -> None:
    from events.tasks import dispatch

    try:
        dispatch.delay()
    except Exception:  # the beat task dispatches later; never fail a committed change for it
        log.exception("events: could not queue the dispatch after commit")


def _has_endpoints(tenant_id: uuid.UUID) -> bool:
    now = time.monotonic()
    with _cache_lock:
        cached = _endpoint_cache.get(tenant_id)
    if cached is not None and cached[0] > now:
        return cached[1]
    found = WebhookEndpoint.objects.filter(tenant_id=tenant_id, active=True).exists()
    with _cache_lock:
        _endpoint_cache[tenant_id] = (now + ENDPOINT_CACHE_SECONDS, found)
    return found


def forget_endpoint_cache(tenant_id: uuid.UUID) -> None:
    """After an endpoint is declared or switched off in this process."""
    with _cache_lock:
        _endpoint_cache.pop(tenant_id, None)


def _lock(blocking: bool) -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite serialises writers itself
    fn = "pg_advisory_xact_lock" if blocking else "pg_try_advisory_xact_lock"
    with connection.cursor() as cursor:
        # Per database: test databases side by side on one server do not wait on each other.
        cursor.execute(f"SELECT {fn}(hashtext('iris-events-publish:' || current_database()))")
        row = cursor.fetchone()
    return True if blocking else bool(row[0])


def publish_pending(
    *, batch: int = PUBLISH_BATCH, now: datetime | None = None, blocking: bool = True
) -> int:
    """Give committed events their cursors and their deliveries. Returns how many events.
    Without `blocking`, returns 0 at once if another publisher holds the lock."""
    now = now or timezone.now()
    try:
        with transaction.atomic():
            if not _lock(blocking):
                return 0
            events = list(Event.objects.filter(cursor__isnull=True).order_by("seq")[:batch])
            if not events:
                return 0
            tenants = sorted({e.tenant_id for e in events})
            heads = {
                tenant: Event.objects.filter(tenant_id=tenant, cursor__isnull=False).aggregate(
                    top=Max("cursor")
                )["top"]
                or 0
                for tenant in tenants
            }
            for event in events:
                heads[event.tenant_id] += 1
                event.cursor = heads[event.tenant_id]
            Event.objects.bulk_update(events, ["cursor"])
            endpoints = list(WebhookEndpoint.objects.filter(tenant_id__in=tenants, active=True))
            Delivery.objects.bulk_create(
                [
                    Delivery(
                        tenant_id=event.tenant_id,
                        event=event,
                        endpoint=endpoint,
                        next_attempt_at=now,
                    )
                    for event in events
                    for endpoint in endpoints
                    if endpoint.tenant_id == event.tenant_id and event.type in endpoint.event_types
                ]
            )
    except IntegrityError:
        # Two publishers on SQLite (no advisory lock) raced; the other one published these.
        return 0
    if len(events) == batch:
        return batch + publish_pending(batch=batch, now=now, blocking=blocking)
    return len(events)
