from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count, Q

from events.models import Delivery, WebhookEndpoint
from governance.models import Tenant


class Command(BaseCommand):
    help = "List a tenant's webhook endpoints with their delivery counts (failed ones too)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)

    def handle(self, *args: Any, **o: Any) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {o['tenant']!r}.")
        endpoints = (
            WebhookEndpoint.objects.filter(tenant=tenant)
            .annotate(
                delivered=Count("deliveries", filter=Q(deliveries__state=Delivery.State.DELIVERED)),
                pending=Count("deliveries", filter=Q(deliveries__state=Delivery.State.PENDING)),
                failed=Count("deliveries", filter=Q(deliveries__state=Delivery.State.FAILED)),
            )
            .order_by("created_at")
        )
        for e in endpoints:
            state = "on" if e.active else "off"
            self.stdout.write(
                f"{e.id} {state} {e.url} [{', '.join(e.event_types)}] "
                f"delivered={e.delivered} pending={e.pending} failed={e.failed}"
            )
