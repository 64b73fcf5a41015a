"""The vault: secrets encrypted under the master key, addressed by `vault://<id>` handles
(spec 003, "Secrets as handles"; issue 5 item 4).

Every value is encrypted with MultiFernet under `IRIS_MASTER_KEY` (newest key first);
`rotate_all` re-encrypts under the newest key so the old one can be dropped. Every lookup
is scoped to a tenant and an owner, and anything else is a 404 that does not say whether
the handle exists. A value never appears in a log line, an audit payload, an answer or an
exception message: errors name the handle at most, and the audit records ids and purposes.

Helpers here run inside the caller's transaction (`savepoint=False`); the service that
calls them owns the transaction and its own audit event, so a vaulted value and the memory
that points at it commit or roll back together.
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography.fernet import InvalidToken
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance import pii
from governance.actions import AuditAction
from governance.audit import Actor, audit_record
from governance.errors import IrisError, NotFound, ValidationFailed
from governance.keys import multifernet
from governance.models import Tenant, User, VaultSecret

log = logging.getLogger(__name__)

POLICY = "iris-governance-vault-v1"
HANDLE_PREFIX = "vault://"
HANDLE_RE = re.compile(
    r"vault://(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
)
PII_KEY_PURPOSE = "pii-token-key"
DECLARED_SECRET_PURPOSE = "declared-secret"  # noqa: S105 - a purpose code
MEMBER_KEY_BYTES = 32
MAX_PURPOSE_LENGTH = 64


class VaultUnreadable(IrisError):
    """A stored secret no current master key decrypts: a key was dropped before
    `rotate_keys` re-encrypted under its successor."""

    status = 500
    code = "vault-unreadable"
    title = "The vault cannot decrypt a secret"


def _not_found() -> NotFound:
    return NotFound("No such secret.", code="vault-not-found")


def handle_of(secret_id: uuid.UUID) -> str:
    return f"{HANDLE_PREFIX}{secret_id}"


def parse_handle(handle: str) -> uuid.UUID:
    """The id inside a `vault://` handle; a malformed handle is a 404 like a missing one."""
    match = HANDLE_RE.fullmatch(handle.strip().lower()) if isinstance(handle, str) else None
    if match is None:
        raise _not_found()
    return uuid.UUID(match.group("id"))


def is_handle(text: str) -> bool:
    return isinstance(text, str) and HANDLE_RE.fullmatch(text.strip().lower()) is not None


def _encrypt(value: str) -> str:
    if not isinstance(value, str):
        raise ValidationFailed("A vault value must be text.", field="value", rule="type")
    try:
        plaintext = value.encode("utf-8")
    except UnicodeEncodeError:
        # `from None`: the codec error carries the whole value as `.object`.
        raise ValidationFailed(
            "A vault value must be valid text.", field="value", rule="encoding"
        ) from None
    return multifernet().encrypt(plaintext).decode("ascii")


def _decrypt(row: VaultSecret) -> str:
    try:
        return multifernet().decrypt(row.ciphertext.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise VaultUnreadable(
            f"Vault secret {row.id} does not decrypt under the current master keys."
        ) from None


def _scoped(*, tenant: Tenant | None, owner: User | None) -> QuerySet[VaultSecret]:
    # filter(fk=None) is IS NULL: a tenant-wide secret never answers for a member and back.
    return VaultSecret.objects.filter(tenant=tenant, owner=owner)


def _check_scope(*, tenant: Tenant | None, owner: User | None, purpose: str) -> None:
    if owner is not None and (tenant is None or owner.tenant_id != tenant.pk):
        raise ValidationFailed("The owner belongs to another tenant.", field="owner", rule="scope")
    if not purpose or len(purpose) > MAX_PURPOSE_LENGTH:
        raise ValidationFailed(
            "A vault purpose is a short code.", field="purpose", rule="max_length"
        )


def vault_put(
    *,
    tenant: Tenant | None,
    owner: User | None,
    purpose: str,
    value: str,
    actor: Actor | None = None,
) -> str:
    """Encrypt `value` and return its handle, `vault://<uuid>`.

    Records `iris.vault.secret.stored` (the id and purpose, never the value) in the
    caller's transaction.
    """
    _check_scope(tenant=tenant, owner=owner, purpose=purpose)
    ciphertext = _encrypt(value)
    with transaction.atomic(savepoint=False):
        row = VaultSecret.objects.create(
            tenant=tenant, owner=owner, purpose=purpose, ciphertext=ciphertext
        )
        audit_record(
            actor=actor or Actor.system("vault"),
            action=AuditAction.VAULT_SECRET_STORED,
            tenant_id=tenant.pk if tenant else None,
            policy_id=POLICY,
            reason_code=purpose,
            subject_ids=[row.id, *([owner.public_id] if owner else [])],
        )
    return handle_of(row.id)


def vault_get(handle: str, *, tenant: Tenant | None, owner: User | None) -> str:
    """The value behind `handle`, if it belongs to this tenant and owner; 404 otherwise."""
    secret_id = parse_handle(handle)
    row = _scoped(tenant=tenant, owner=owner).filter(id=secret_id).first()
    if row is None:
        raise _not_found()
    return _decrypt(row)


def vault_delete(
    handle: str, *, tenant: Tenant | None, owner: User | None, actor: Actor | None = None
) -> None:
    """Delete the secret behind `handle` (scoped like `vault_get`; 404 otherwise)."""
    secret_id = parse_handle(handle)
    with transaction.atomic(savepoint=False):
        deleted, _ = _scoped(tenant=tenant, owner=owner).filter(id=secret_id).delete()
        if deleted:
            audit_record(
                actor=actor or Actor.system("vault"),
                action=AuditAction.VAULT_SECRET_DELETED,
                tenant_id=tenant.pk if tenant else None,
                policy_id=POLICY,
                subject_ids=[secret_id, *([owner.public_id] if owner else [])],
            )
    # Raised outside the block: a 404 must not doom the caller's transaction.
    if not deleted:
        raise _not_found()


def vault_purge_owner(*, tenant: Tenant, owner: User, actor: Actor | None = None) -> int:
    """Delete every secret a member owns, keys included (erasure). Returns how many.

    Deleting the member's PII key makes every token ever issued for them unresolvable.
    """
    with transaction.atomic(savepoint=False):
        deleted, _ = _scoped(tenant=tenant, owner=owner).delete()
        audit_record(
            actor=actor or Actor.system("vault"),
            action=AuditAction.VAULT_OWNER_PURGED,
            tenant_id=tenant.pk,
            policy_id=POLICY,
            subject_ids=[owner.public_id],
            payload={"deleted": deleted},
        )
    return deleted


def _lock_key_creation(*, tenant: Tenant | None, owner: User | None, purpose: str) -> None:
    """Serialise first use of one member key, so two requests cannot create two keys."""
    if connection.vendor != "postgresql":
        return  # SQLite serialises writers itself
    name = f"iris-vault-key:{tenant.pk if tenant else '-'}:{owner.pk if owner else '-'}:{purpose}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])


def member_key(*, tenant: Tenant | None, owner: User | None, purpose: str) -> bytes:
    """A random 32-byte key for one owner and purpose, created on first use and kept in
    the vault. A random key (not one derived from the master key) keeps everything made
    with it, PII tokens above all, stable across master-key rotation."""

    def oldest() -> VaultSecret | None:
        return (
            _scoped(tenant=tenant, owner=owner)
            .filter(purpose=purpose)
            .order_by("created_at", "id")
            .first()
        )

    row = oldest()
    if row is None:
        _check_scope(tenant=tenant, owner=owner, purpose=purpose)
        with transaction.atomic(savepoint=False):
            _lock_key_creation(tenant=tenant, owner=owner, purpose=purpose)
            row = oldest()
            if row is None:
                fresh = base64.urlsafe_b64encode(secrets.token_bytes(MEMBER_KEY_BYTES)).decode()
                vault_put(tenant=tenant, owner=owner, purpose=purpose, value=fresh)
                # The oldest row wins, should a race have created two anyway.
                row = oldest()
    assert row is not None
    return base64.urlsafe_b64decode(_decrypt(row).encode())


def member_pii_key(*, tenant: Tenant, owner: User) -> bytes:
    return member_key(tenant=tenant, owner=owner, purpose=PII_KEY_PURPOSE)


def pii_tokenise_for_member(text: str, *, tenant: Tenant, owner: User) -> str:
    """Text about `owner` bound for someone else's eyes: identifiers become tokens."""
    if not pii.find_pii(text):
        return text  # no key is created for a member whose text holds no identifier
    return pii.tokenise(text, member_pii_key(tenant=tenant, owner=owner))


def pii_detokenise_for_member(
    text: str, *, tenant: Tenant, owner: User, own_texts: Iterable[str]
) -> str:
    """Resolve `owner`'s tokens in `text` from `own_texts`, the member's own memory bodies.

    Only for the member's own views and a data-rights export; the caller has checked that
    the reader is the member (or the export is theirs). A token whose value the member's
    memory no longer holds stays a token: forgetting is complete.
    """
    if not pii.tokens_in(text):
        return text
    key = member_pii_key(tenant=tenant, owner=owner)
    return pii.detokenise(text, pii.token_map(own_texts, key))


@dataclass(frozen=True)
class VaultedFields:
    """The write's fields after vaulting: declared fields hold handles."""

    fields: dict[str, str]
    handles: dict[str, str]


def store_declared_secrets(
    *,
    tenant: Tenant,
    owner: User,
    fields: Mapping[str, str],
    declared: Iterable[str],
    actor: Actor | None = None,
) -> VaultedFields:
    """Move every field a surface declared secret (`secretFields: ["body"]`) into the
    vault and put its `vault://` handle in its place.

    Call inside the write's transaction, after `govern(PRE_WRITE, …)` allowed the write
    (the secret screen lets a declared field through because of this call). A declared
    field that is not in the write is a 400 naming it; other fields pass unchanged.
    """
    declared = [declared] if isinstance(declared, str) else list(dict.fromkeys(declared))
    unknown = [name for name in declared if name not in fields]
    if unknown:
        raise ValidationFailed(
            "Declared secret fields must be fields of the write.",
            field="secretFields",
            rule="unknown-field",
            allowed=sorted(fields),
        )
    out = dict(fields)
    handles: dict[str, str] = {}
    for name in declared:
        if is_handle(out[name]):
            continue  # already a handle: a replayed or re-governed write
        handle = vault_put(
            tenant=tenant,
            owner=owner,
            purpose=DECLARED_SECRET_PURPOSE,
            value=out[name],
            actor=actor,
        )
        out[name] = handles[name] = handle
    return VaultedFields(fields=out, handles=handles)


def rotate_all(batch: int = 500) -> int:
    """Re-encrypt every vault secret under the newest master key. Returns how many.

    Each batch commits on its own, so a run killed half-way leaves every row readable
    (old or new key) and a second run finishes the job. Drop the old key from
    `IRIS_MASTER_KEY` only after this has run under the new list.
    """
    if batch < 1:
        raise ValueError("batch must be positive")
    fernet = multifernet()
    rotated = 0
    last_id: uuid.UUID | None = None
    while True:
        with transaction.atomic():
            qs = VaultSecret.objects.order_by("id")
            if last_id is not None:
                qs = qs.filter(id__gt=last_id)
            rows = list(qs.select_for_update()[:batch])
            if not rows:
                break
            now = timezone.now()
            for row in rows:
                try:
                    row.ciphertext = fernet.rotate(row.ciphertext.encode("ascii")).decode("ascii")
                except InvalidToken:
                    raise VaultUnreadable(
                        f"Vault secret {row.id} does not decrypt under the current master keys."
                    ) from None
                row.rotated_at = now
            VaultSecret.objects.bulk_update(rows, ["ciphertext", "rotated_at"])
            last_id = rows[-1].id
            rotated += len(rows)
    with transaction.atomic():
        audit_record(
            actor=Actor.system("rotate_keys"),
            action=AuditAction.VAULT_KEYS_ROTATED,
            tenant_id=None,
            policy_id=POLICY,
            payload={"rotated": rotated},
        )
    log.info("vault: re-encrypted %d secrets under the newest master key", rotated)
    return rotated
