from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from governance.audit import Actor
from governance.models import SurfaceClient, Tenant, User
from governance.roles import Role
from governance.services import (
    surface_client_create,
    surface_client_revoke,
    tenant_create,
    user_create,
)

DEMO_TENANT = "demo"
DEMO_PASSWORD = "iris-demo-pass"  # noqa: S105 - a public demo login, printed on purpose
# Fixed, so the examples in the API schema and docs/api.md work as written after `make run`.
DEMO_MEMBER_ID = uuid.UUID("7f3b2c1a-9d4e-4f6a-8b5c-2e1d0a9f8c7b")


class Command(BaseCommand):
    help = "Seed a demo tenant, a member, one operator per role and a surface client."

    def handle(self, *args: Any, **o: Any) -> None:
        if not settings.DEBUG:
            # Its logins share a published password: never on a real deployment.
            raise CommandError("seed_demo runs only with DEBUG=1 (it creates public demo logins).")
        actor = Actor("system", "seed_demo")
        tenant = Tenant.objects.filter(slug=DEMO_TENANT).first()
        if tenant is None:
            tenant = tenant_create(actor=actor, slug=DEMO_TENANT, name="Demo")
        logins = [("member", "demo-member")] + [(r.value, f"demo-{r.value}") for r in Role]
        for role, username in logins:
            if not User.objects.filter(username=username).exists():
                user_create(
                    actor=actor,
                    tenant=tenant,
                    username=username,
                    role=role,
                    password=DEMO_PASSWORD,
                    public_id=DEMO_MEMBER_ID if role == "member" else None,
                )
        self._seed_extras(tenant, actor)
        # One live demo token: the one printed last. Earlier ones stop working.
        for client_id in SurfaceClient.objects.filter(
            tenant=tenant, surface="assistant", revoked_at__isnull=True
        ).values_list("id", flat=True):
            surface_client_revoke(actor=actor, client_id=client_id)
        # The demo assistant runs its model locally, so its recalls may carry the member's
        # own memories (a cloud client gets none of them).
        token = surface_client_create(
            actor=actor, tenant=tenant, surface="assistant", destination_tier="local"
        ).token
        member = User.objects.get(username="demo-member")
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for role, username in logins:
            self.stdout.write(f"  {role:<18} {username}")
        self.stdout.write(f"Tenant slug: {tenant.slug}")
        self.stdout.write(f"Demo member's userId (send it as userId): {member.public_id}")
        self.stdout.write(f"Surface token for 'assistant', local tier (shown once): {token}")
        self.stdout.write("  (earlier demo tokens are revoked)")

    def _seed_extras(self, tenant: Tenant, actor: Actor) -> None:
        """Apps that hold member data add their demo rows here as they arrive."""
        from django.apps import apps

        for config in apps.get_app_configs():
            seed = getattr(config, "seed_demo", None)
            if callable(seed):
                seed(tenant=tenant, actor=actor, member=User.objects.get(username="demo-member"))
