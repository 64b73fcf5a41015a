"""The vault: encrypted under the master key, scoped to tenant and owner, rotatable, and
silent about its values."""

from __future__ import annotations

import io
import json

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from governance.errors import IrisError, NotFound, ValidationFailed
from governance.models import AuditEvent, VaultSecret
from governance.vault import (
    VaultUnreadable,
    member_key,
    parse_handle,
    rotate_all,
    vault_delete,
    vault_get,
    vault_purge_owner,
    vault_put,
)

VALUE = "sk_live_R4nd0mFakeValue0123456789"


def _new_key() -> str:
    return Fernet.generate_key().decode()


def _everything_said(exc: BaseException) -> str:
    """Every text an exception could show: message, problem body, and its chain."""
    parts = [str(exc), repr(exc)]
    if isinstance(exc, IrisError):
        parts.append(json.dumps(exc.problem()))
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None and not exc.__suppress_context__:
            parts.append(_everything_said(linked))
    return " ".join(parts)


def test_put_and_get_round_trip_and_store_only_ciphertext(member, tenant) -> None:
    handle = vault_put(tenant=tenant, owner=member, purpose="tool-credential", value=VALUE)

    assert handle.startswith("vault://")
    assert vault_get(handle, tenant=tenant, owner=member) == VALUE
    row = VaultSecret.objects.get(id=parse_handle(handle))
    assert VALUE not in row.ciphertext
    assert (row.tenant_id, row.owner_id, row.purpose) == (tenant.id, member.id, "tool-credential")


def test_a_put_is_audited_without_its_value(member, tenant) -> None:
    handle = vault_put(tenant=tenant, owner=member, purpose="tool-credential", value=VALUE)

    event = AuditEvent.objects.get(action="iris.vault.secret.stored")
    assert str(parse_handle(handle)) in event.subject_ids
    assert event.reason_code == "tool-credential"
    dump = json.dumps(list(AuditEvent.objects.values()), default=str)
    assert VALUE not in dump


@pytest.mark.parametrize("who", ["other_member", "foreign_member", "nobody"])
def test_another_owner_or_tenant_gets_the_same_404_as_a_missing_handle(
    who, request, member, tenant
) -> None:
    handle = vault_put(tenant=tenant, owner=member, purpose="p", value=VALUE)
    if who == "nobody":
        owner, owner_tenant = None, tenant
    else:
        owner = request.getfixturevalue(who)
        owner_tenant = owner.tenant

    with pytest.raises(NotFound) as not_found:
        vault_get(handle, tenant=owner_tenant, owner=owner)
    with pytest.raises(NotFound) as missing:
        vault_get("vault://00000000-0000-4000-8000-000000000000", tenant=tenant, owner=member)

    assert not_found.value.problem() == missing.value.problem()
    assert VALUE not in _everything_said(not_found.value)


def test_a_malformed_handle_is_a_404(member, tenant) -> None:
    for handle in ["", "vault://", "vault://not-a-uuid", "https://example.org", "vault:/x"]:
        with pytest.raises(NotFound):
            vault_get(handle, tenant=tenant, owner=member)


def test_a_tenant_secret_is_not_a_members_and_back(member, tenant) -> None:
    tenant_handle = vault_put(tenant=tenant, owner=None, purpose="smtp", value=VALUE)
    member_handle = vault_put(tenant=tenant, owner=member, purpose="smtp", value=VALUE)

    with pytest.raises(NotFound):
        vault_get(tenant_handle, tenant=tenant, owner=member)
    with pytest.raises(NotFound):
        vault_get(member_handle, tenant=tenant, owner=None)
    assert vault_get(tenant_handle, tenant=tenant, owner=None) == VALUE


def test_an_owner_is_never_filed_under_another_tenant(foreign_member, tenant) -> None:
    with pytest.raises(ValidationFailed) as refused:
        vault_put(tenant=tenant, owner=foreign_member, purpose="p", value=VALUE)
    assert VALUE not in _everything_said(refused.value)


def test_delete_is_scoped_and_final(member, other_member, tenant) -> None:
    handle = vault_put(tenant=tenant, owner=member, purpose="p", value=VALUE)

    with pytest.raises(NotFound):
        vault_delete(handle, tenant=tenant, owner=other_member)
    vault_delete(handle, tenant=tenant, owner=member)

    with pytest.raises(NotFound):
        vault_get(handle, tenant=tenant, owner=member)
    with pytest.raises(NotFound):
        vault_delete(handle, tenant=tenant, owner=member)
    assert AuditEvent.objects.filter(action="iris.vault.secret.deleted").count() == 1


def test_purging_an_owner_deletes_their_secrets_only(member, other_member, tenant) -> None:
    vault_put(tenant=tenant, owner=member, purpose="p", value=VALUE)
    member_key(tenant=tenant, owner=member, purpose="pii-token-key")
    kept = vault_put(tenant=tenant, owner=other_member, purpose="p", value=VALUE)

    assert vault_purge_owner(tenant=tenant, owner=member) == 2

    assert not VaultSecret.objects.filter(owner=member).exists()
    assert vault_get(kept, tenant=tenant, owner=other_member) == VALUE


def test_values_never_appear_in_exception_messages(member, tenant) -> None:
    broken = "\ud800" + VALUE  # a lone surrogate cannot be encoded
    with pytest.raises(ValidationFailed) as bad_text:
        vault_put(tenant=tenant, owner=member, purpose="p", value=broken)
    assert VALUE not in _everything_said(bad_text.value)
    assert bad_text.value.__cause__ is None and bad_text.value.__suppress_context__

    with pytest.raises(ValidationFailed) as bad_type:
        vault_put(tenant=tenant, owner=member, purpose="p", value=12345)
    assert "12345" not in _everything_said(bad_type.value)


def test_member_keys_are_random_stable_and_per_owner_and_purpose(
    member, other_member, tenant
) -> None:
    key = member_key(tenant=tenant, owner=member, purpose="pii-token-key")

    assert len(key) == 32
    assert member_key(tenant=tenant, owner=member, purpose="pii-token-key") == key
    assert member_key(tenant=tenant, owner=other_member, purpose="pii-token-key") != key
    assert member_key(tenant=tenant, owner=member, purpose="export-key") != key
    assert VaultSecret.objects.filter(owner=member, purpose="pii-token-key").count() == 1


# -- rotation ------------------------------------------------------------------------------


def test_rotation_prepending_a_new_key_then_dropping_the_old_still_decrypts(
    member, tenant, settings
) -> None:
    old_key = settings.IRIS_MASTER_KEY
    handles = [
        vault_put(tenant=tenant, owner=member, purpose="p", value=f"{VALUE}-{i}") for i in range(5)
    ]
    new_key = _new_key()
    settings.IRIS_MASTER_KEY = f"{new_key},{old_key}"

    assert rotate_all(batch=2) == 5

    settings.IRIS_MASTER_KEY = new_key
    for i, handle in enumerate(handles):
        assert vault_get(handle, tenant=tenant, owner=member) == f"{VALUE}-{i}"
    assert not VaultSecret.objects.filter(rotated_at__isnull=True).exists()
    event = AuditEvent.objects.get(action="iris.vault.keys.rotated")
    assert event.payload == {"rotated": 5}


def test_dropping_the_old_key_without_rotating_fails_without_the_value(
    member, tenant, settings
) -> None:
    handle = vault_put(tenant=tenant, owner=member, purpose="p", value=VALUE)
    settings.IRIS_MASTER_KEY = _new_key()

    with pytest.raises(VaultUnreadable) as unreadable:
        vault_get(handle, tenant=tenant, owner=member)
    assert unreadable.value.status == 500
    assert VALUE not in _everything_said(unreadable.value)
    with pytest.raises(VaultUnreadable):
        rotate_all()


def test_rotate_keys_command_prints_the_count(member, tenant, settings) -> None:
    vault_put(tenant=tenant, owner=member, purpose="p", value=VALUE)
    vault_put(tenant=tenant, owner=None, purpose="smtp", value=VALUE)
    settings.IRIS_MASTER_KEY = f"{_new_key()},{settings.IRIS_MASTER_KEY}"
    out = io.StringIO()

    call_command("rotate_keys", "--batch", "1", stdout=out)

    assert "re-encrypted 2 vault secret(s) under the newest of 2 master key(s)" in out.getvalue()
    assert VALUE not in out.getvalue()


def test_rotate_keys_refuses_a_bad_master_key(db, settings) -> None:
    settings.IRIS_MASTER_KEY = "not-a-fernet-key"
    with pytest.raises(CommandError, match="master key"):
        call_command("rotate_keys", stdout=io.StringIO())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_use_creates_one_member_key(require_postgres, member, tenant) -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    workers = 4
    barrier = Barrier(workers)

    def first_use(_: int) -> bytes:
        try:
            barrier.wait()
            return member_key(tenant=tenant, owner=member, purpose="pii-token-key")
        finally:
            connection.close()

    with ThreadPoolExecutor(workers) as pool:
        keys = set(pool.map(first_use, range(workers)))

    assert len(keys) == 1
    assert VaultSecret.objects.filter(owner=member, purpose="pii-token-key").count() == 1
