from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import IrisError
from governance.models import Tenant, User
from governance.principal import Principal
from inspection.incidents import DEFAULT_TTL_HOURS, MAX_TTL_HOURS
from inspection.services import incident_reference_issue


class Command(BaseCommand):
    help = (
        "Issue a signed, single-use incident reference for one member, as a trust-and-safety "
        "operator of the member's tenant. Prints the reference once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="the tenant's slug")
        parser.add_argument("operator", help="the issuing operator's username")
        parser.add_argument("member", help="the member's id (UUID)")
        parser.add_argument(
            "--hours",
            type=int,
            default=DEFAULT_TTL_HOURS,
            help=f"how long it is valid (1 to {MAX_TTL_HOURS})",
        )

    def handle(
        self, *args: Any, tenant: str, operator: str, member: str, hours: int, **options: Any
    ) -> None:
        row = Tenant.objects.filter(slug=tenant).first()
        if row is None:
            raise CommandError(f"no tenant with the slug {tenant!r}")
        issuer = User.objects.filter(
            tenant=row, username=operator, kind=User.Kind.OPERATOR, is_active=True
        ).first()
        if issuer is None:
            raise CommandError(f"no active operator {operator!r} in {row.slug}")
        target = User.objects.filter(
            tenant=row, public_id=member, kind=User.Kind.MEMBER, is_active=True
        ).first()
        if target is None:
            raise CommandError("no such member in this tenant")
        principal = Principal(
            kind="operator",
            id=issuer.public_id,
            tenant_id=row.id,
            roles=frozenset(issuer.groups.values_list("name", flat=True)),
        )
        try:
            issued = incident_reference_issue(principal=principal, member=target, hours=hours)
        except IrisError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(issued.reference)
        self.stderr.write(f"valid until {issued.row.expires_at.isoformat()}, for one grant")
