"""The master key: MultiFernet for secrets, and HMAC keys derived from it per purpose.

`IRIS_MASTER_KEY` holds Fernet keys, newest first. The derived keys never live in the
database, which is what lets audit checkpoints catch a rewrite by a database administrator.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class MasterKeyError(Exception):
    pass


def _raw_keys(value: str | None = None) -> list[str]:
    raw = settings.IRIS_MASTER_KEY if value is None else value
    keys = [part.strip() for part in raw.split(",") if part.strip()]
    if not keys:
        raise MasterKeyError("IRIS_MASTER_KEY holds no key")
    return keys


@lru_cache(maxsize=8)
def _fernets(value: str) -> tuple[Fernet, ...]:
    try:
        return tuple(Fernet(k.encode()) for k in _raw_keys(value))
    except (ValueError, TypeError) as exc:
        # Never echo the key itself.
        raise MasterKeyError("IRIS_MASTER_KEY is not a list of valid Fernet keys") from exc


def multifernet() -> MultiFernet:
    return MultiFernet(list(_fernets(settings.IRIS_MASTER_KEY)))


def check_master_key() -> int:
    """Raise MasterKeyError unless every key is valid and round-trips; return the key count."""
    fernets = _fernets(settings.IRIS_MASTER_KEY)
    probe = b"iris-doctor-probe"
    try:
        for f in fernets:
            if f.decrypt(f.encrypt(probe)) != probe:
                raise MasterKeyError("a master key does not round-trip")
    except InvalidToken as exc:
        raise MasterKeyError("a master key does not round-trip") from exc
    return len(fernets)


def derived_keys(purpose: str) -> list[tuple[str, bytes]]:
    """(key id, key) per master key, newest first, for one purpose (HKDF-SHA256)."""
    out = []
    for raw in _raw_keys():
        material = base64.urlsafe_b64decode(raw.encode())
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(
            material
        )
        key_id = hashlib.sha256(key).hexdigest()[:16]
        out.append((key_id, key))
    return out


def sign(purpose: str, message: bytes) -> tuple[str, str]:
    key_id, key = derived_keys(purpose)[0]
    return key_id, hmac.new(key, message, hashlib.sha256).hexdigest()


TEXT_FINGERPRINT_PURPOSE = "iris-memory-fingerprint-v1"


@lru_cache(maxsize=4)
def _text_fingerprint_key(master: str) -> bytes:
    return derived_keys(TEXT_FINGERPRINT_PURPOSE)[0][1]


def text_fingerprint(text: str) -> str:
    """HMAC-SHA256 of `text` under a key derived from the master key (hex).

    What audit events, forget records, question rows and run histories keep of a member's
    text. Keyed rather than a bare SHA-256: memory bodies are short and guessable ("I am
    pregnant"), and records that outlive the text must not let anyone confirm a guess
    offline. Equal text gives equal fingerprints, which is all those records need.
    """
    key = _text_fingerprint_key(settings.IRIS_MASTER_KEY)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def verify_signature(purpose: str, message: bytes, key_id: str, mac: str) -> bool:
    for candidate_id, key in derived_keys(purpose):
        if candidate_id == key_id:
            expected = hmac.new(key, message, hashlib.sha256).hexdigest()
            return hmac.compare_digest(expected, mac)
    return False
