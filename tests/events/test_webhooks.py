"""Declaring webhooks: the allow-list, https, the vaulted secret, the audit, who may."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from events.models import WebhookEndpoint
from events.services import SECRET_PURPOSE, webhook_create, webhook_deactivate
from governance.actions import AuditAction
from governance.errors import Forbidden, NotFound, ValidationFailed
from governance.models import AuditEvent, VaultSecret
from governance.pipeline import Denied
from governance.principal import Principal, principal_of
from governance.vault import vault_get

ADMIN = Principal.system("tests")

pytestmark = pytest.mark.django_db


def test_the_command_declares_an_endpoint_and_shows_the_secret_once(
    tenant, webhook_settings, capsys
) -> None:
    call_command(
        "create_webhook",
        "--tenant",
        "acme",
        "--url",
        "https://hooks.example.com/iris?team=7",
        "--events",
        "memory.written,recall.completed",
    )
    out = capsys.readouterr().out
    secret = out.split("signing secret (shown once): ")[1].split()[0]
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["memory.written", "recall.completed"]
    assert endpoint.host == "hooks.example.com" and endpoint.active
    # Kept encrypted in the vault; no column holds it in the clear.
    vaulted = VaultSecret.objects.get(purpose=SECRET_PURPOSE, tenant=tenant, owner=None)
    assert secret not in vaulted.ciphertext
    assert secret not in str(WebhookEndpoint.objects.values().get())
    assert vault_get(endpoint.secret_handle, tenant=tenant, owner=None) == secret
    [created] = AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_WEBHOOK_CREATED)
    assert created.payload == {
        "host": "hooks.example.com",
        "eventTypes": ["memory.written", "recall.completed"],
    }
    assert created.subject_ids == [str(endpoint.id)]
    assert secret not in str(AuditEvent.objects.values_list("payload", flat=True))
    call_command("list_webhooks", "--tenant", "acme")
    assert "delivered=0 pending=0 failed=0" in capsys.readouterr().out


REFUSED = [
    ("https://evil.example.org/iris", "host-not-allowed"),
    ("http://hooks.example.com/iris", "https-required"),
    ("http://10.0.0.8/iris", "https-required"),
    ("https://admin:pw@hooks.example.com/", "no-credentials"),
]


@pytest.mark.parametrize(("url", "rule"), REFUSED)
def test_a_url_off_the_rules_is_refused_at_declaration(tenant, webhook_settings, url, rule) -> None:
    with pytest.raises(ValidationFailed) as caught:
        webhook_create(principal=ADMIN, tenant=tenant, url=url, event_types=["memory.written"])
    assert (caught.value.field, caught.value.rule) == ("url", rule)
    assert not WebhookEndpoint.objects.exists()
    assert not VaultSecret.objects.filter(purpose=SECRET_PURPOSE).exists()


def test_plain_http_to_loopback_needs_the_setting(tenant, webhook_settings) -> None:
    webhook_settings.IRIS_WEBHOOK_ALLOW_HTTP_LOOPBACK = False
    with pytest.raises(ValidationFailed) as caught:
        webhook_create(
            principal=ADMIN, tenant=tenant, url="http://127.0.0.1:9/x", event_types="memory.written"
        )
    assert caught.value.rule == "https-required"


def test_the_command_reports_a_refusal_naming_the_rule(tenant, webhook_settings) -> None:
    with pytest.raises(CommandError, match=r"url: host-not-allowed"):
        call_command(
            "create_webhook",
            "--tenant",
            "acme",
            "--url",
            "https://x.invalid/",
            "--events",
            "memory.written",
        )


def test_an_unknown_event_type_is_refused(tenant, webhook_settings) -> None:
    with pytest.raises(ValidationFailed) as caught:
        webhook_create(
            principal=ADMIN,
            tenant=tenant,
            url="https://hooks.example.com/",
            event_types=["memory.read"],
        )
    assert (caught.value.field, caught.value.rule) == ("eventTypes", "choice")


def test_only_an_administrator_or_the_command_line_declares(
    tenant, member, make_operator, webhook_settings
) -> None:
    admin = principal_of(make_operator("admin"))
    webhook_create(
        principal=admin,
        tenant=tenant,
        url="https://hooks.example.com/",
        event_types="memory.written",
    )
    for who in (principal_of(make_operator("support")), principal_of(member)):
        with pytest.raises(Forbidden):
            webhook_create(
                principal=who,
                tenant=tenant,
                url="https://hooks.example.com/",
                event_types="memory.written",
            )
    assert WebhookEndpoint.objects.count() == 1


def test_an_administrator_of_another_tenant_is_refused_by_the_kernel(
    tenant, other_tenant, make_operator, webhook_settings
) -> None:
    foreign_admin = principal_of(make_operator("admin", of_tenant=other_tenant))
    with pytest.raises(Denied) as caught:
        webhook_create(
            principal=foreign_admin,
            tenant=tenant,
            url="https://hooks.example.com/",
            event_types="memory.written",
        )
    assert caught.value.code == "tenant-mismatch"
    assert not WebhookEndpoint.objects.exists()


def test_deactivating_is_audited_once_and_scoped_to_the_tenant(
    tenant, other_tenant, webhook_settings, capsys
) -> None:
    created = webhook_create(
        principal=ADMIN,
        tenant=tenant,
        url="https://hooks.example.com/",
        event_types="memory.written",
    )
    with pytest.raises(NotFound):
        webhook_deactivate(principal=ADMIN, tenant=other_tenant, endpoint_id=created.endpoint.id)
    call_command("deactivate_webhook", "--tenant", "acme", str(created.endpoint.id))
    webhook_deactivate(principal=ADMIN, tenant=tenant, endpoint_id=created.endpoint.id)
    assert not WebhookEndpoint.objects.get().active
    assert AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_WEBHOOK_DEACTIVATED).count() == 1
    assert "is off" in capsys.readouterr().out


def test_declaring_leaves_a_governance_decision(tenant, webhook_settings) -> None:
    webhook_create(
        principal=ADMIN,
        tenant=tenant,
        url="https://hooks.example.com/",
        event_types="memory.written",
    )
    [decision] = [
        e
        for e in AuditEvent.objects.filter(action=AuditAction.GOVERNANCE_DECISION_ALLOW)
        if e.payload["operation"] == "events.webhook_create"
    ]
    assert decision.payload["hook"] == "pre_write"
    assert "tenant-boundary" in [d["check"] for d in decision.payload["decisions"]]
