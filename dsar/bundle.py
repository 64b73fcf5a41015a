"""The export bundle's format, its signature and its passphrase envelope, and the check
that `manage.py verify_bundle` runs. Plain Python over files and bytes: no Django, so a
member (or anyone) can check a bundle with this file and the published key alone.

A bundle is a zip of one file per section (JSON lines or one JSON document), a readable
`index.html`, `manifest.json` (format, ids, counts and the SHA-256 and size of every other
file) and `manifest.sig` (an Ed25519 signature over the manifest's exact bytes, with the id
of the key that made it). The request's result fingerprint is the SHA-256 of
`manifest.json`. docs/decisions/data-rights.md, "Export bundles", says why each choice.

An encrypted bundle is that zip inside a small envelope (`seal` / `unseal`):

    b"IRISENC1" | header length (4 bytes, big-endian) | header (JSON) | chunks

The header names the KDF (scrypt, its n/r/p and a random 16-byte salt), the cipher
(AES-256-GCM), the chunk size and a random 7-byte nonce prefix, plus a short key check so
a wrong passphrase is told apart from a damaged file. The zip is cut into chunks of
`chunk` bytes, each sealed on its own with the nonce prefix | chunk counter (4 bytes) |
last-chunk flag (1 byte), and the magic and header as associated data (the STREAM
construction): a reader decrypts chunk by chunk in flat memory, and a reordered, dropped,
truncated or edited chunk or header fails to open.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import struct
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

FORMAT = "iris-export-v1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
INDEX = "index.html"
ALGORITHM = "Ed25519"

MAGIC = b"IRISENC1"
CHUNK = 64 * 1024
TAG = 16
# scrypt at n=2^15, r=8: 32 MiB and about a tenth of a second per try (RFC 7914's
# interactive figure); the passphrase is at least 12 characters (dsar.payloads).
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
_CHECK_LABEL = b"iris-export-passphrase-check-v1"
READ_BLOCK = 1024 * 1024


# ------------------------------------------------------------------------- keys


def signing_key(seed: bytes) -> Ed25519PrivateKey:
    """The Ed25519 key whose 32-byte seed is `seed`."""
    return Ed25519PrivateKey.from_private_bytes(seed)


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def key_id(key: Ed25519PublicKey) -> str:
    """A public key's id: the first 16 hex digits of the SHA-256 of its raw bytes."""
    return hashlib.sha256(raw_public(key)).hexdigest()[:16]


def public_key_from_text(text: str) -> Ed25519PublicKey:
    """A public key given as PEM or as the base64 of its 32 raw bytes."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        loaded = serialization.load_pem_public_key(text.encode())
        if not isinstance(loaded, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        return loaded
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))


# ------------------------------------------------------------------------- writing


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(READ_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_bytes(meta: Mapping[str, Any], files: Iterable[Mapping[str, Any]]) -> bytes:
    """The manifest: `meta` (format, ids, counts) and each file's name, size and SHA-256,
    sorted by name; canonical JSON, so the same bundle always has the same bytes."""
    listed = sorted(
        ({"name": f["name"], "bytes": f["bytes"], "sha256": f["sha256"]} for f in files),
        key=lambda f: f["name"],
    )
    return canonical({**meta, "format": FORMAT, "files": listed})


def signature_bytes(private: Ed25519PrivateKey, manifest: bytes) -> bytes:
    public = private.public_key()
    return canonical(
        {
            "algorithm": ALGORITHM,
            "keyId": key_id(public),
            "signed": MANIFEST,
            "signature": base64.b64encode(private.sign(manifest)).decode(),
        }
    )


def write_zip(target: Path, files: Iterable[tuple[str, Path]]) -> None:
    """Zip `files` (name in the zip, path on disk), streamed from disk."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name, path in files:
            zf.write(path, arcname=name)


# ------------------------------------------------------------------------- envelope


class EnvelopeError(Exception):
    """The envelope did not open: `reason` is a stable code (wrong-passphrase, damaged)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _derive(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))


def _check_value(key: bytes) -> str:
    return hmac.new(key, _CHECK_LABEL, hashlib.sha256).hexdigest()[:16]


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    return prefix + struct.pack(">I", counter) + (b"\x01" if last else b"\x00")


def is_sealed(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(MAGIC)) == MAGIC


def seal(source: IO[bytes], target: IO[bytes], passphrase: str) -> None:
    """Encrypt `source` into `target` under `passphrase` (the envelope above)."""
    salt = os.urandom(16)
    prefix = os.urandom(7)
    key = _derive(passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    header = canonical(
        {
            "version": 1,
            "kdf": {"name": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P},
            "salt": base64.b64encode(salt).decode(),
            "cipher": "AES-256-GCM",
            "chunk": CHUNK,
            "noncePrefix": base64.b64encode(prefix).decode(),
            "keyCheck": _check_value(key),
        }
    )
    aad = MAGIC + header
    aead = AESGCM(key)
    target.write(MAGIC + struct.pack(">I", len(header)) + header)
    counter = 0
    block = source.read(CHUNK)
    while True:
        following = source.read(CHUNK)
        last = not following
        target.write(aead.encrypt(_nonce(prefix, counter, last), block, aad))
        if last:
            return
        block = following
        counter += 1
        if counter >= 2**32:
            raise ValueError("too large to seal")


def unseal(source: IO[bytes], target: IO[bytes], passphrase: str) -> None:
    """Decrypt an envelope into `target`; EnvelopeError if it does not open."""
    if source.read(len(MAGIC)) != MAGIC:
        raise EnvelopeError("damaged", "not an encrypted Iris bundle")
    try:
        (length,) = struct.unpack(">I", source.read(4))
        header = source.read(length)
        fields = json.loads(header)
        kdf = fields["kdf"]
        if kdf["name"] != "scrypt" or fields["cipher"] != "AES-256-GCM":
            raise EnvelopeError("damaged", "unknown envelope parameters")
        # Bounds, so a crafted header cannot ask for gigabytes of scrypt memory.
        if not (2 <= kdf["n"] <= 2**20 and 1 <= kdf["r"] <= 32 and 1 <= kdf["p"] <= 16):
            raise EnvelopeError("damaged", "envelope parameters out of range")
        chunk = int(fields["chunk"])
        if not 1 <= chunk <= 16 * 1024 * 1024:
            raise EnvelopeError("damaged", "envelope chunk size out of range")
        salt = base64.b64decode(fields["salt"])
        prefix = base64.b64decode(fields["noncePrefix"])
        if len(prefix) != 7:
            raise EnvelopeError("damaged", "bad nonce prefix")
        key = _derive(passphrase, salt, kdf["n"], kdf["r"], kdf["p"])
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise EnvelopeError("damaged", "the envelope's header is damaged") from exc
    if not hmac.compare_digest(_check_value(key), str(fields.get("keyCheck", ""))):
        raise EnvelopeError("wrong-passphrase", "the passphrase does not open this bundle")
    aad = MAGIC + header
    aead = AESGCM(key)
    counter = 0
    sealed = source.read(chunk + TAG)
    while True:
        following = source.read(chunk + TAG)
        last = not following
        if not last and len(sealed) != chunk + TAG:
            raise EnvelopeError("damaged", "a chunk of the bundle is cut short")
        try:
            target.write(aead.decrypt(_nonce(prefix, counter, last), sealed, aad))
        except InvalidTag:
            raise EnvelopeError("damaged", f"chunk {counter} of the bundle was altered") from None
        if last:
            return
        sealed = following
        counter += 1


# ------------------------------------------------------------------------- verifying


@dataclass
class Verification:
    """What `verify` found: `failures` empty means the bundle is intact and signed."""

    failures: list[str] = field(default_factory=list)
    manifest_sha256: str = ""
    key_id: str = ""
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def verify(
    path: Path,
    *,
    public_keys: Mapping[str, Ed25519PublicKey],
    passphrase: str | None = None,
) -> Verification:
    """Check a bundle: it opens (with `passphrase` when sealed), its manifest is signed by
    one of `public_keys` (key id -> key), every file the manifest lists is there with its
    SHA-256 and size, and the zip holds nothing else."""
    result = Verification()
    if not path.is_file():
        result.failures.append(f"{path}: no such file")
        return result
    if is_sealed(path):
        if passphrase is None:
            result.failures.append("the bundle is encrypted: give its passphrase")
            return result
        with tempfile.TemporaryFile() as plain, path.open("rb") as source:
            try:
                unseal(source, plain, passphrase)
            except EnvelopeError as exc:
                result.failures.append(str(exc))
                return result
            plain.seek(0)
            _verify_zip(plain, public_keys, result)
        return result
    with path.open("rb") as handle:
        _verify_zip(handle, public_keys, result)
    return result


def _verify_zip(
    handle: IO[bytes], public_keys: Mapping[str, Ed25519PublicKey], result: Verification
) -> None:
    try:
        archive = zipfile.ZipFile(handle)
    except zipfile.BadZipFile:
        result.failures.append("not a zip file")
        return
    with archive:
        names = archive.namelist()
        if len(set(names)) != len(names):
            result.failures.append("the zip names a file twice")
        for required in (MANIFEST, SIGNATURE):
            if required not in names:
                result.failures.append(f"{required}: missing")
        if result.failures:
            return
        manifest = archive.read(MANIFEST)
        result.manifest_sha256 = hashlib.sha256(manifest).hexdigest()
        _check_signature(manifest, archive.read(SIGNATURE), public_keys, result)
        try:
            listed = json.loads(manifest)["files"]
            expected = {f["name"]: (f["sha256"], int(f["bytes"])) for f in listed}
        except (ValueError, KeyError, TypeError):
            result.failures.append(f"{MANIFEST}: not a manifest")
            return
        result.files = len(expected)
        for name in sorted(set(names) - {MANIFEST, SIGNATURE} - set(expected)):
            result.failures.append(f"{name}: not in the manifest")
        for name, (sha256, size) in sorted(expected.items()):
            if name not in names:
                result.failures.append(f"{name}: missing")
                continue
            digest = hashlib.sha256()
            count = 0
            try:
                with archive.open(name) as member:
                    while block := member.read(READ_BLOCK):
                        digest.update(block)
                        count += len(block)
            except (zipfile.BadZipFile, OSError):
                result.failures.append(f"{name}: damaged in the zip")
                continue
            if not hmac.compare_digest(digest.hexdigest(), sha256) or count != size:
                result.failures.append(f"{name}: SHA-256 does not match the manifest")


def _check_signature(
    manifest: bytes,
    signature: bytes,
    public_keys: Mapping[str, Ed25519PublicKey],
    result: Verification,
) -> None:
    try:
        doc = json.loads(signature)
        result.key_id = str(doc["keyId"])
        raw = base64.b64decode(doc["signature"], validate=True)
        if doc.get("algorithm") != ALGORITHM:
            raise ValueError("algorithm")
    except (ValueError, KeyError, TypeError):
        result.failures.append(f"{SIGNATURE}: not a signature")
        return
    key = public_keys.get(result.key_id)
    if key is None:
        result.failures.append(f"{SIGNATURE}: signed by an unknown key {result.key_id}")
        return
    try:
        key.verify(raw, manifest)
    except InvalidSignature:
        result.failures.append(f"{SIGNATURE}: the signature does not match {MANIFEST}")


def copy_stream(source: IO[bytes], target: IO[bytes]) -> None:
    shutil.copyfileobj(source, target, READ_BLOCK)


# ------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """`python -m dsar.bundle unseal BUNDLE.zip.enc OUT.zip` opens an encrypted bundle
    with nothing but this file and `cryptography` installed (the passphrase is asked for,
    not passed on the command line); `verify` checks one against a published key."""
    import argparse
    import getpass
    import sys

    parser = argparse.ArgumentParser(prog="python -m dsar.bundle")
    commands = parser.add_subparsers(dest="command", required=True)
    opening = commands.add_parser("unseal", help="decrypt an encrypted bundle into a zip")
    opening.add_argument("bundle", type=Path)
    opening.add_argument("out", type=Path)
    checking = commands.add_parser("verify", help="check a bundle against a public key")
    checking.add_argument("bundle", type=Path)
    checking.add_argument("--public-key", required=True, help="PEM file or base64 raw key")
    checking.add_argument("--encrypted", action="store_true", help="ask for the passphrase")
    args = parser.parse_args(argv)
    if args.command == "unseal":
        try:
            with args.bundle.open("rb") as source, args.out.open("wb") as target:
                unseal(source, target, getpass.getpass("passphrase: "))
        except EnvelopeError as exc:
            args.out.unlink(missing_ok=True)  # never leave a part of a bundle that failed
            print(f"not opened: {exc}", file=sys.stderr)
            return 1
        return 0
    text = args.public_key
    if Path(text).is_file():
        text = Path(text).read_text()
    key = public_key_from_text(text)
    asked = getpass.getpass("passphrase: ") if args.encrypted else None
    result = verify(args.bundle, public_keys={key_id(key): key}, passphrase=asked)
    for failure in result.failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if result.ok:
        print(f"bundle verifies: {result.files} files, signed by key {result.key_id}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
