"""Secrets never reach a log line or an audit payload, even when the code around them
logs carelessly and raises with the secret in its message."""

from __future__ import annotations

import json
import logging
import logging.config
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from governance.audit import Actor
from governance.models import AuditEvent
from governance.pipeline import Denied, Effect, Hook, Operation, govern
from governance.principal import Principal
from governance.redaction_logging import (
    LOGGING_FILTERS,
    WITHHELD,
    RedactingFilter,
    scrub_log_text,
)
from governance.vault import VaultUnreadable, store_declared_secrets, vault_get, vault_put

log = logging.getLogger("iris.tests.memory_like")
CORPUS = Path(__file__).parent / "corpus"


def _one_secret_per_kind() -> list[tuple[str, str, str]]:
    """(kind, text, secret) for the first corpus line of each kind."""
    seen: dict[str, tuple[str, str, str]] = {}
    for line in (CORPUS / "secrets_positive.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, marked = line.split("\t", 1)
        marked = marked.replace("\\n", "\n")
        secret = marked.split("«", 1)[1].split("»", 1)[0]
        seen.setdefault(kind, (kind, marked.replace("«", "").replace("»", ""), secret))
    return sorted(seen.values())


SECRETS = _one_secret_per_kind()


@pytest.fixture
def redacting_caplog(caplog):
    """caplog's handler with the filter settings.LOGGING puts on every handler, built the
    way dictConfig builds it (from the dotted path)."""
    factory = logging.config.BaseConfigurator({}).resolve(LOGGING_FILTERS["redact"]["()"])
    redacting = factory()
    caplog.handler.addFilter(redacting)
    caplog.set_level(logging.DEBUG)
    yield caplog
    caplog.handler.removeFilter(redacting)


def _captured(caplog) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(record.exc_text or "")
        parts.append(repr(record.args))
    return "\n".join(parts)


def _audit_dump() -> str:
    return json.dumps(list(AuditEvent.objects.values()), default=str)


class StorageFailed(Exception):
    pass


def memory_like_write(member, tenant, body: str, *, secret_fields=()) -> str:
    """What a careless memory service could do: log the body, govern, vault, then fail
    with the body in the exception message."""
    log.info("write requested by %s: %s", member.public_id, body)
    op = Operation(
        name="memory_write",
        effect=Effect.WRITE,
        principal=Principal(kind="member", id=member.public_id, tenant_id=tenant.id),
        tenant_id=tenant.id,
        member_id=member.public_id,
        attributes={"declared_secret_fields": tuple(secret_fields)},
        text=body,
    )
    try:
        govern(Hook.PRE_WRITE, op)
    except Denied:
        log.exception("write refused for body %r", body)
        raise
    with transaction.atomic():
        vaulted = store_declared_secrets(
            tenant=tenant,
            owner=member,
            fields={"body": body},
            declared=secret_fields,
            actor=Actor("member", str(member.public_id)),
        )
        log.debug("stored fields %s", vaulted.fields)
    try:
        raise StorageFailed(f"could not index {body}")
    except StorageFailed:
        log.exception("indexing failed", extra={"body_preview": body[:80]})
    return vaulted.fields["body"]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[k for k, *_ in SECRETS])
def test_a_refused_write_leaves_no_secret_in_logs_errors_or_audit(
    kind, text, secret, redacting_caplog, member, tenant
) -> None:
    body = f"remember this for me: {text}"

    with pytest.raises(Denied) as refused:
        memory_like_write(member, tenant, body)

    assert refused.value.code == "secret-in-memory"
    assert secret not in json.dumps(refused.value.problem())
    captured = _captured(redacting_caplog)
    assert "write refused" in captured
    assert f"[redacted:{kind}]" in captured
    assert secret not in captured
    assert secret not in _audit_dump()
    assert AuditEvent.objects.filter(reason_code="secret-in-memory").exists()


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[k for k, *_ in SECRETS])
def test_a_vaulted_write_that_then_fails_leaves_no_secret_in_logs_or_audit(
    kind, text, secret, redacting_caplog, member, tenant
) -> None:
    body = f"the router: {text}"

    handle = memory_like_write(member, tenant, body, secret_fields=["body"])

    assert vault_get(handle, tenant=tenant, owner=member) == body
    captured = _captured(redacting_caplog)
    assert "indexing failed" in captured
    assert "StorageFailed" in captured  # the traceback is kept, scrubbed
    assert secret not in captured
    assert secret not in _audit_dump()
    assert AuditEvent.objects.filter(action="iris.vault.secret.stored").exists()


def test_a_vault_error_logged_with_its_traceback_holds_no_value(
    redacting_caplog, member, tenant, settings
) -> None:
    from cryptography.fernet import Fernet

    secret = "sk_live_" + "Q7w" * 10
    handle = vault_put(tenant=tenant, owner=member, purpose="p", value=secret)
    settings.IRIS_MASTER_KEY = Fernet.generate_key().decode()
    try:
        vault_get(handle, tenant=tenant, owner=member)
    except VaultUnreadable:
        log.exception("vault read failed")

    captured = _captured(redacting_caplog)
    assert "VaultUnreadable" in captured
    assert secret not in captured


def test_personal_identifiers_are_masked_in_log_lines(redacting_caplog) -> None:
    log.warning("sent the reset to %s (%s)", "ada@example.org", "+44 20 7946 0958")

    captured = _captured(redacting_caplog)
    assert "ada@example.org" not in captured
    assert "7946" not in captured
    assert "sent the reset to [pii:email] ([pii:phone])" in captured


def test_a_record_the_filter_cannot_format_is_kept_without_its_args() -> None:
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "pwd=%s and %d", ("hunter22", "not-a-number"), None
    )
    assert RedactingFilter().filter(record) is True
    assert "hunter22" not in record.getMessage()
    assert record.args == ()


def test_the_filter_fails_closed(monkeypatch) -> None:
    def explode(text: str) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("governance.redaction_logging.scrub_log_text", explode)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "pwd=%s", ("hunter22",), None)

    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == WITHHELD


def test_scrubbing_handles_secrets_and_identifiers_together() -> None:
    assert scrub_log_text("login ada@example.org password: hunter22") == (
        "login [pii:email] password: [redacted:password]"
    )


def test_settings_put_the_filter_on_every_handler() -> None:
    configured = settings.LOGGING.get("filters", {})
    if "redact" not in configured:
        pytest.skip(
            "settings.LOGGING does not wire governance.redaction_logging yet "
            "(docs/decisions/governance-classification.md lists the lines)"
        )
    assert configured["redact"] == LOGGING_FILTERS["redact"]
    for name, handler in settings.LOGGING["handlers"].items():
        assert "redact" in handler.get("filters", []), f"handler {name} logs unredacted"
    live = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    assert any(isinstance(f, RedactingFilter) for h in live for f in h.filters)
