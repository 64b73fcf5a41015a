from __future__ import annotations

from django.core.management.base import BaseCommand

from governance.audit import Actor
from governance.models import Tenant, User
from governance.roles import Role
from governance.services import surface_client_create, tenant_create, user_create

DEMO_TENANT = "demo"
DEMO_PASSWORD = "iris-demo-pass"  # noqa: S105 - a public demo login, printed on purpose


class Command(BaseCommand):
    help = "Seed a demo tenant, a member, one operator per role and a surface client."

    def handle(self, *args, **o) -> None:  # type: ignore[no-untyped-def]
        actor = Actor("system", "seed_demo")
        tenant = Tenant.objects.filter(slug=DEMO_TENANT).first()
        if tenant is None:
            tenant = tenant_create(actor=actor, slug=DEMO_TENANT, name="Demo")
        logins = [("member", "demo-member")] + [(r.value, f"demo-{r.value}") for r in Role]
        for role, username in logins:
            if not User.objects.filter(username=username).exists():
                user_create(
                    actor=actor, tenant=tenant, username=username, role=role, password=DEMO_PASSWORD
                )
        self._seed_extras(tenant, actor)
        token = surface_client_create(actor=actor, tenant=tenant, surface="assistant").token
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for role, username in logins:
            self.stdout.write(f"  {role:<18} {username}")
        self.stdout.write(f"Surface token for 'assistant' (shown once): {token}")

    def _seed_extras(self, tenant: Tenant, actor: Actor) -> None:
        """Apps that hold member data add their demo rows here as they arrive."""
        from django.apps import apps

        for config in apps.get_app_configs():
            seed = getattr(config, "seed_demo", None)
            if callable(seed):
                seed(tenant=tenant, actor=actor, member=User.objects.get(username="demo-member"))
