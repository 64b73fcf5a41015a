"""Surface tokens can be listed and revoked, and seed_demo stays off real deployments
(issue 19, finding 7). From outside: management commands and the API."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from governance.actions import AuditAction
from governance.models import AuditEvent, SurfaceClient, Tenant, User

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def api_status(token: str, member) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/v1/consents/active", {"userId": str(member.public_id)}).status_code


def revocations() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_SURFACE_CLIENT_REVOKED))


# -- revoke and list -----------------------------------------------------------------------


def test_revoked_token_gets_401_on_the_api(surface_token, member) -> None:
    assert api_status(surface_token, member) == 200
    out = run("revoke_surface_client", surface_token[:12])
    client = SurfaceClient.objects.get()
    assert client.revoked_at is not None and f"{client.id} (assistant) revoked" in out
    assert api_status(surface_token, member) == 401
    (event,) = revocations()
    assert event.subject_ids == [str(client.id)] and event.tenant_id == client.tenant_id
    assert event.reason_code == "assistant" and surface_token not in str(event.payload)


def test_revoking_twice_changes_nothing_and_writes_one_event(surface_token) -> None:
    client_id = str(SurfaceClient.objects.get().id)
    run("revoke_surface_client", client_id)
    first = SurfaceClient.objects.get().revoked_at
    out = run("revoke_surface_client", client_id)
    assert "already revoked" in out
    assert SurfaceClient.objects.get().revoked_at == first
    assert len(revocations()) == 1


def test_revoking_one_client_leaves_the_others(
    surface_token, foreign_surface_token, foreign_member
) -> None:
    run("revoke_surface_client", surface_token)  # the whole token works too: cut to its prefix
    assert api_status(foreign_surface_token, foreign_member) == 200


def test_revoke_names_what_it_cannot_find(surface_token) -> None:
    for ident in ("iris_nothing", "3f0c1e4e-0000-4000-8000-000000000000", "iris"):
        with pytest.raises(CommandError, match="No surface client"):
            run("revoke_surface_client", ident)
    assert not revocations()


def test_an_ambiguous_prefix_is_refused(tenant, surface_token) -> None:
    SurfaceClient.objects.create(
        tenant=tenant, surface="tara", token_hash="0" * 64, token_prefix=surface_token[:12]
    )
    with pytest.raises(CommandError, match="names 2 clients"):
        run("revoke_surface_client", surface_token[:12])
    assert not SurfaceClient.objects.filter(revoked_at__isnull=False).exists()


def test_the_listing_shows_clients_but_never_a_token(surface_token, foreign_surface_token) -> None:
    run("revoke_surface_client", surface_token[:12])
    out = run("list_surface_clients")
    lines = out.strip().splitlines()
    assert lines[0].split() == [
        "tenant",
        "surface",
        "tier",
        "id",
        "prefix",
        "created",
        "revoked",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"acme", "globex"}
    for client in SurfaceClient.objects.all():
        assert str(client.id) in out and client.token_hash not in out
    assert rows["acme"][2] == "local" and rows["globex"][2] == "cloud"
    assert rows["acme"][6] != "-" and rows["globex"][6] == "-"
    for token in (surface_token, foreign_surface_token):
        assert token not in out and token[:20] not in out
    only = run("list_surface_clients", "--tenant", "globex")
    assert "acme" not in only and "globex" in only


# -- seed_demo -----------------------------------------------------------------------------


def test_seed_demo_is_refused_without_debug(settings) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG"):
        call_command("seed_demo")
    assert not Tenant.objects.filter(slug="demo").exists()
    assert not User.objects.filter(username__startswith="demo-").exists()


def test_seed_demo_refusal_is_one_line_and_a_failing_exit(tmp_path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "iris_site.settings_test",
        "DEBUG": "0",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'never-created.sqlite3'}",
        "REDIS_URL": "",
        "IRIS_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(  # noqa: S603 - our own manage.py, fixed arguments
        [sys.executable, "manage.py", "seed_demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "DEBUG" in lines[0], result.stderr
    assert "iris-demo-pass" not in result.stdout + result.stderr
    assert not (tmp_path / "never-created.sqlite3").exists()


def test_seed_demo_prints_tenant_and_user_id_and_keeps_one_live_token(settings) -> None:
    settings.DEBUG = True
    first = run("seed_demo")
    member = User.objects.get(username="demo-member")
    assert "Tenant slug: demo" in first
    assert f"userId (send it as userId): {member.public_id}" in first
    first_token = first.split("(shown once): ")[1].split()[0]
    assert api_status(first_token, member) == 200

    second = run("seed_demo")
    second_token = second.split("(shown once): ")[1].split()[0]
    assert second_token != first_token
    assert api_status(first_token, member) == 401
    assert api_status(second_token, member) == 200
    demo = SurfaceClient.objects.filter(tenant__slug="demo")
    assert demo.count() == 2 and demo.filter(revoked_at__isnull=True).count() == 1
    assert len(revocations()) == 1


# -- the destination tier ---------------------------------------------------------------


@pytest.mark.parametrize(("args", "tier"), [((), "cloud"), (("--tier", "local"), "local")])
def test_a_client_is_registered_with_its_tier(tenant, args, tier) -> None:
    out = run("create_surface_client", "--tenant", tenant.slug, "--surface", "tara", *args)
    client = SurfaceClient.objects.get()
    assert client.destination_tier == tier and f"(tara, {tier} tier)" in out
    (event,) = AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_SURFACE_CLIENT_CREATED)
    assert event.payload == {"destinationTier": tier}


def test_an_unknown_tier_is_refused_by_the_command(tenant) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'edge'"):
        run("create_surface_client", "--tenant", tenant.slug, "--surface", "tara", "--tier", "edge")
    assert not SurfaceClient.objects.exists()


def test_an_unknown_tier_is_refused_by_the_service(tenant) -> None:
    from governance.errors import ValidationFailed
    from governance.services import surface_client_create
    from tests.conftest import SYSTEM

    with pytest.raises(ValidationFailed) as raised:
        surface_client_create(actor=SYSTEM, tenant=tenant, surface="tara", destination_tier="edge")
    assert raised.value.field == "destinationTier"
    assert not SurfaceClient.objects.exists()
