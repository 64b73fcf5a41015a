"""Celery tasks: publish committed events, then post every delivery that is due.

`dispatch` runs after a commit that wrote events for a tenant with endpoints, and every
15 seconds on the beat schedule (which also picks up retries as they fall due and
attempts a killed worker left behind). `deliver` makes one attempt; both are safe to run
twice (a delivery is claimed by a conditional UPDATE before it is posted).
"""

from __future__ import annotations

from celery import shared_task

from events import delivery, outbox, selectors


@shared_task(name="events.tasks.dispatch")
def dispatch() -> int:
    outbox.publish_pending()
    due = selectors.due_deliveries()
    for delivery_id in due:
        deliver.delay(delivery_id)
    return len(due)


@shared_task(name="events.tasks.deliver")
def deliver(delivery_id: str) -> str:
    return delivery.deliver(delivery_id=delivery_id)
