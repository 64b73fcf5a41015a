from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dsar import bundle, export


class Command(BaseCommand):
    help = (
        "Check a data-rights export bundle: the Ed25519 signature over its manifest and the "
        "SHA-256 of every file. Exits non-zero naming what fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the bundle (.zip, or .zip.enc)")
        parser.add_argument("--passphrase", help="the passphrase of an encrypted bundle")
        parser.add_argument(
            "--passphrase-file",
            type=Path,
            help="read the passphrase from this file (keeps it out of the process list)",
        )
        parser.add_argument(
            "--public-key",
            action="append",
            default=[],
            help="verify against this Ed25519 public key (PEM or base64 of the raw 32 "
            "bytes) instead of this deployment's keys; may be given more than once",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        passphrase = o["passphrase"]
        if o["passphrase_file"] is not None:
            passphrase = o["passphrase_file"].read_text().rstrip("\r\n")
        if o["public_key"]:
            try:
                given = [bundle.public_key_from_text(text) for text in o["public_key"]]
            except ValueError as exc:
                raise CommandError(f"--public-key is not an Ed25519 public key: {exc}") from None
            keys = {bundle.key_id(k): k for k in given}
        else:
            keys = export.public_keys()
        result = bundle.verify(o["file"], public_keys=keys, passphrase=passphrase)
        if not result.ok:
            raise CommandError(
                "bundle does NOT verify:\n" + "\n".join(f"  - {f}" for f in result.failures)
            )
        self.stdout.write(
            f"bundle verifies: {result.files} files match manifest.json "
            f"(SHA-256 {result.manifest_sha256}), signed by key {result.key_id}"
        )
