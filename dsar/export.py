"""The export work of a data-rights request: a signed, optionally encrypted zip of
everything Iris holds about the member (`dsar.collect`), built in the staging folder
(`settings.IRIS_EXPORT_DIR`), downloadable until it expires, then deleted.

Building (`run_export`, called by `dsar.work.process`):
1. governed as Iris itself (`dsar.export.build`, a read of member data);
2. claims the request's `ExportBundle` with a lease (`cursor.run`, `cursor.leaseUntil`):
   a second worker finds the lease held and leaves the build to the first;
3. writes each section as a file (and its part of `index.html`) under
   `<staging>/<request id>.parts/`, recording in `cursor.sections` each section done with
   its SHA-256, so a worker killed half-way leaves a build that a retry finishes from the
   first section not done (the beat job `requeue_stalled` breaks a dead worker's lease);
4. writes the manifest and its Ed25519 signature, zips (and, when asked, seals the zip
   under the member's passphrase: `dsar.bundle`), moves it into place, and in one
   transaction marks the bundle ready with its expiry, deletes the passphrase from the
   vault and audits `DSAR_EXPORT_BUILT` (ids and counts, never content).
The result fingerprint is the SHA-256 of `manifest.json`.

The signing key is derived from the master key (`governance.keys.derived_keys`, purpose
SIGNING_PURPOSE): one Ed25519 key per master key, newest first, so bundles signed before a
key rotation still verify. Its public half is published at
`GET /api/v1/data-rights/signing-key`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import shutil
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from dsar import bundle as fmt
from dsar import collect
from dsar.enums import DeliveryChannel, RequestKind, RequestState
from dsar.models import DataRightsRequest, ExportBundle
from dsar.services import _audit, _govern
from governance import keys, vault
from governance.actions import AuditAction
from governance.after_commit import after_commit, enqueue
from governance.errors import Conflict, IrisError, NotFound
from governance.models import Tenant, User
from governance.pipeline import Effect, record_pending
from governance.principal import Principal
from memory.recall.pipeline import rfc3339

SIGNING_PURPOSE = "iris-dsar-export-signing-v1"
# A build that has not moved for this long is taken to be dead: its lease lapses and the
# beat job queues it again. Every finished section renews the lease.
STALL_AFTER = timedelta(minutes=15)
S = RequestState
B = ExportBundle.State


class BundleGone(IrisError):
    status = 410
    code = "bundle-expired"
    title = "Gone"


class _LeaseLost(Exception):
    """Another worker took the build over; this one stops and leaves it."""


# ------------------------------------------------------------------------- keys


def signing_keys() -> list[Ed25519PrivateKey]:
    """The export signing keys, one per master key, newest first."""
    return [fmt.signing_key(seed) for _, seed in keys.derived_keys(SIGNING_PURPOSE)]


def public_keys() -> dict[str, Ed25519PublicKey]:
    """Key id -> public key, for every key a bundle of this deployment may be signed by."""
    return {fmt.key_id(k.public_key()): k.public_key() for k in signing_keys()}


def published_keys() -> list[dict[str, str]]:
    """What the signing-key endpoint publishes, newest first."""
    return [
        {
            "algorithm": fmt.ALGORITHM,
            "keyId": fmt.key_id(k.public_key()),
            "publicKey": base64.b64encode(fmt.raw_public(k.public_key())).decode(),
            "publicKeyPem": fmt.public_pem(k.public_key()),
        }
        for k in signing_keys()
    ]


# ------------------------------------------------------------------------- paths


def staging_dir() -> Path:
    path = Path(settings.IRIS_EXPORT_DIR)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _parts_dir(request_id: uuid.UUID) -> Path:
    return staging_dir() / f"{request_id}.parts"


def _file_name(request: DataRightsRequest) -> str:
    return f"{request.id}.zip" + (".enc" if request.payload.get("encrypted") else "")


def _download_name(request: DataRightsRequest) -> str:
    stem = f"iris-export-{request.received_at:%Y-%m-%d}-{str(request.id)[:8]}.zip"
    return stem + (".enc" if request.payload.get("encrypted") else "")


# ------------------------------------------------------------------------- building


def run_export(request: DataRightsRequest) -> str | None:
    """Build (or finish building) the request's bundle; its manifest's SHA-256, or None
    when another worker holds the build. Safe to call again at any point."""
    member = request.member
    system = Principal.system("dsar-export", tenant_id=request.tenant_id)
    decided: list[dict[str, Any]] = []
    _govern(
        system,
        member,
        "dsar.export.build",
        subject_ids=(str(request.id),),
        arguments={"scopes": collect.subject_of(member, request.payload).scopes},
        effect=Effect.READ,
        pending=decided,
    )
    run = uuid.uuid4().hex
    now = timezone.now()
    with transaction.atomic(durable=True):
        record_pending(decided)
        row, status = _claim(request, run, now)
    if status == "ready":
        return row.manifest_sha256
    if status == "busy":
        return None
    try:
        return _build(request, row, run)
    except _LeaseLost:
        return None


def _lease_until(now: datetime) -> str:
    return (now + STALL_AFTER).isoformat()


def _claim(request: DataRightsRequest, run: str, now: datetime) -> tuple[ExportBundle, str]:
    row = (
        ExportBundle.objects.select_for_update()
        .filter(tenant_id=request.tenant_id, request=request)
        .first()
    )
    if row is None:
        row = ExportBundle.objects.create(
            request=request,
            tenant_id=request.tenant_id,
            started_at=now,
            cursor={"run": run, "leaseUntil": _lease_until(now), "attempts": 1, "sections": {}},
        )
        return row, "claimed"
    if row.state == B.READY:
        return row, "ready"
    if row.state == B.EXPIRED:
        # An appealed export is built again: the old file is gone with its window.
        row.state = B.BUILDING
        row.file_name = row.manifest_sha256 = ""
        row.size_bytes = 0
        row.started_at = now
        row.ready_at = row.expires_at = row.deleted_at = None
        row.cursor = {"run": run, "leaseUntil": _lease_until(now), "attempts": 1, "sections": {}}
        row.save()
        return row, "claimed"
    lease = row.cursor.get("leaseUntil")
    if lease and datetime.fromisoformat(lease) > now and row.cursor.get("run") != run:
        return row, "busy"
    row.cursor = {
        **row.cursor,
        "run": run,
        "leaseUntil": _lease_until(now),
        "attempts": int(row.cursor.get("attempts", 0)) + 1,
    }
    row.save(update_fields=["cursor"])
    return row, "claimed"


def _progress(request: DataRightsRequest, run: str, sections: Mapping[str, Any]) -> None:
    """Record the sections done and renew the lease, unless another worker took over."""
    with transaction.atomic(durable=True):
        row = ExportBundle.objects.select_for_update().get(
            tenant_id=request.tenant_id, request=request
        )
        if row.cursor.get("run") != run or row.state != B.BUILDING:
            raise _LeaseLost
        row.cursor = {
            **row.cursor,
            "sections": dict(sections),
            "leaseUntil": _lease_until(timezone.now()),
        }
        row.save(update_fields=["cursor"])


def _build(request: DataRightsRequest, row: ExportBundle, run: str) -> str:
    member = request.member
    subject = collect.subject_of(member, request.payload)
    sections = collect.plan(request.payload)
    parts = _parts_dir(request.id)
    parts.mkdir(exist_ok=True, mode=0o700)
    done: dict[str, Any] = dict(row.cursor.get("sections") or {})
    for section in sections:
        if _intact(parts, section, done.get(section.name)):
            continue
        done[section.name] = _write_section(parts, section, subject)
        _progress(request, run, done)

    now = timezone.now()
    index = parts / fmt.INDEX
    _write_index(index, request, member, sections, done, now)
    files = [(s.file_name, parts / s.file_name) for s in sections] + [(fmt.INDEX, index)]
    listed = [
        {
            "name": name,
            "bytes": path.stat().st_size,
            "sha256": done[s.name]["sha256"] if s else fmt.sha256_file(path),
        }
        for (name, path), s in zip(files, [*sections, None], strict=True)
    ]
    meta = {
        "requestId": str(request.id),
        "tenantId": str(request.tenant_id),
        "userId": str(member.public_id),
        "createdAt": rfc3339(now),
        "scopes": list(subject.scopes),
        "sections": [
            {"name": s.name, "file": s.file_name, "records": done[s.name]["records"]}
            for s in sections
        ],
        "encrypted": bool(request.payload.get("encrypted")),
    }
    manifest = fmt.manifest_bytes(meta, listed)
    (parts / fmt.MANIFEST).write_bytes(manifest)
    (parts / fmt.SIGNATURE).write_bytes(fmt.signature_bytes(signing_keys()[0], manifest))
    files += [(fmt.MANIFEST, parts / fmt.MANIFEST), (fmt.SIGNATURE, parts / fmt.SIGNATURE)]
    zipped = parts / "bundle.zip.tmp"
    fmt.write_zip(zipped, files)
    built = zipped
    if request.payload.get("encrypted"):
        passphrase = vault.vault_get(request.passphrase_handle, tenant=member.tenant, owner=member)
        built = parts / "bundle.enc.tmp"
        with zipped.open("rb") as source, built.open("wb") as target:
            fmt.seal(source, target, passphrase)
    final = staging_dir() / _file_name(request)
    os.replace(built, final)
    fingerprint = hashlib.sha256(manifest).hexdigest()

    with transaction.atomic(durable=True):
        row = ExportBundle.objects.select_for_update().get(
            tenant_id=request.tenant_id, request=request
        )
        if row.state == B.READY:
            return row.manifest_sha256
        if row.cursor.get("run") != run:
            raise _LeaseLost
        row.state = B.READY
        row.file_name = final.name
        row.manifest_sha256 = fingerprint
        row.size_bytes = final.stat().st_size
        row.ready_at = now
        row.expires_at = now + timedelta(hours=settings.IRIS_EXPORT_TTL_HOURS)
        row.cursor = {"sections": done, "attempts": row.cursor.get("attempts", 1)}
        row.save()
        if request.passphrase_handle:
            _forget_passphrase(request)
        _audit(
            Principal.system("dsar-export", tenant_id=request.tenant_id),
            request,
            AuditAction.DSAR_EXPORT_BUILT,
            payload={
                "files": len(files),
                "records": {name: int(entry["records"]) for name, entry in done.items()},
                "bytes": row.size_bytes,
                "encrypted": bool(request.payload.get("encrypted")),
                "attempts": int(row.cursor["attempts"]),
                "manifestSha256": fingerprint,
            },
        )
        after_commit(shutil.rmtree, parts, ignore_errors=True)
        if request.payload.get("deliveryChannel") == DeliveryChannel.EMAIL_LINK:
            after_commit(_mail_ready, request.id)
    return fingerprint


def _mail_ready(request_id: uuid.UUID) -> None:
    """Tell the member their export is ready. No link in the mail: a link to a file of
    everything about someone is what a phishing mail would imitate; they sign in instead."""
    row = ExportBundle.objects.select_related("request__member").get(request_id=request_id)
    member = row.request.member
    if not member.email or row.expires_at is None:
        return
    send_mail(
        "Your data export is ready",
        (
            "The export of your data you asked for is ready. Sign in and open your data "
            f"requests page to download it, until {row.expires_at:%d %B %Y %H:%M} UTC; "
            "after that it is deleted."
        ),
        None,
        [member.email],
    )


def _forget_passphrase(request: DataRightsRequest) -> None:
    """Inside the caller's transaction: the passphrase's work is done."""
    try:
        vault.vault_delete(
            request.passphrase_handle,
            tenant=request.member.tenant,
            owner=request.member,
            actor=Principal.system("dsar-export", tenant_id=request.tenant_id).actor,
        )
    except NotFound:
        pass
    DataRightsRequest.objects.filter(tenant_id=request.tenant_id, id=request.id).update(
        passphrase_handle=""
    )
    request.passphrase_handle = ""


def _intact(parts: Path, section: collect.Section, done: Mapping[str, Any] | None) -> bool:
    """A section recorded done whose files are still there as written."""
    if not done:
        return False
    data, page = parts / section.file_name, parts / f"{section.name}.html"
    return (
        data.is_file()
        and page.is_file()
        and fmt.sha256_file(data) == done.get("sha256")
        and fmt.sha256_file(page) == done.get("htmlSha256")
    )


class _HashingWriter:
    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if type(value) is str:
        return html.escape(value)
    if type(value) is int:
        return str(value)
    return html.escape(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _write_section(
    parts: Path, section: collect.Section, subject: collect.Subject
) -> dict[str, Any]:
    """Write one section's file and its part of the index, each under a temporary name
    moved into place when whole, so a crash never leaves a half section that looks done."""
    data_tmp = parts / f"{section.file_name}.tmp"
    page_tmp = parts / f"{section.name}.html.tmp"
    records = 0
    with data_tmp.open("wb") as data_handle, page_tmp.open("wb") as page_handle:
        data = _HashingWriter(data_handle)
        page = _HashingWriter(page_handle)
        title = html.escape(section.title)
        page.write(f'<section id="{section.name}"><h2>{title}</h2>\n')
        if section.lines:
            head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in section.columns)
            page.write(f"<table><thead><tr>{head}</tr></thead><tbody>\n")
            for record in section.records(subject):
                data.write(collect.dumps(record) + "\n")
                cells = "".join(f"<td>{_cell(record.get(c))}</td>" for c in section.columns)
                page.write(f"<tr>{cells}</tr>\n")
                records += 1
            page.write("</tbody></table>\n")
        else:
            for record in section.records(subject):
                text = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False)
                data.write(text + "\n")
                page.write(f"<pre>{html.escape(text)}</pre>\n")
                records += 1
        page.write(
            f"<p>{records} record(s), in <code>{html.escape(section.file_name)}</code>.</p>"
            "</section>\n"
        )
    os.replace(data_tmp, parts / section.file_name)
    os.replace(page_tmp, parts / f"{section.name}.html")
    return {
        "records": records,
        "sha256": data.digest.hexdigest(),
        "bytes": data.size,
        "htmlSha256": page.digest.hexdigest(),
    }


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem;color:#111}"
    "table{border-collapse:collapse;font-size:.85rem}"
    "th,td{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top;text-align:left}"
    "pre{background:#f5f5f5;padding:1rem;overflow:auto}"
)


def _write_index(
    path: Path,
    request: DataRightsRequest,
    member: User,
    sections: list[collect.Section],
    done: Mapping[str, Any],
    now: datetime,
) -> None:
    with path.open("wb") as handle:
        out = _HashingWriter(handle)
        out.write(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            # Defence in depth for a page people open from disk: even text that escaped
            # escaping could run no script and load nothing.
            '<meta http-equiv="Content-Security-Policy" '
            "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Your Iris data export</title><style>{_STYLE}</style></head><body>\n"
            "<main><h1>Your Iris data export</h1>\n"
            f"<p>Request <code>{request.id}</code>, made {html.escape(rfc3339(now))} for member "
            f"<code>{member.public_id}</code>. The same data is in the JSON files beside this "
            "page; <code>manifest.json</code> lists every file's SHA-256 and "
            "<code>manifest.sig</code> signs it.</p>\n<nav><ul>\n"
        )
        for s in sections:
            out.write(
                f'<li><a href="#{s.name}">{html.escape(s.title)}</a> '
                f"({int(done[s.name]['records'])})</li>\n"
            )
        out.write("</ul></nav>\n")
        for s in sections:
            with (path.parent / f"{s.name}.html").open("rb") as part:
                fmt.copy_stream(part, handle)
        out.write("</main></body></html>\n")


# ------------------------------------------------------------------------- download


def bundle_for_download(
    *, principal: Principal, member: User, request_id: uuid.UUID
) -> tuple[Path, str]:
    """The staging file of the member's ready export and the name to download it as.
    The member's own session or a surface acting for them; anyone else gets 404, a bundle
    still being built 409, an expired one 410. Audited (`DSAR_EXPORT_DOWNLOADED`)."""
    if principal.kind not in {"member", "surface"} or principal.tenant_id != member.tenant_id:
        raise NotFound("No such data-rights request.")
    if principal.kind == "member" and str(principal.id) != str(member.public_id):
        raise NotFound("No such data-rights request.")
    request = (
        DataRightsRequest.objects.select_related("member")
        .filter(tenant_id=member.tenant_id, member=member, id=request_id)
        .first()
    )
    if request is None or request.kind != RequestKind.EXPORT:
        raise NotFound("No such data-rights request.")
    row = ExportBundle.objects.filter(tenant_id=member.tenant_id, request=request).first()
    if row is None or row.state == B.BUILDING:
        raise Conflict(
            "The export is not ready yet.", code="bundle-not-ready", field="id", rule="not-ready"
        )
    now = timezone.now()
    path = staging_dir() / row.file_name
    if row.state == B.EXPIRED or (row.expires_at and row.expires_at <= now) or not path.is_file():
        raise BundleGone("The export's download window has ended.")
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        member,
        "dsar.export.download",
        subject_ids=(str(request.id),),
        effect=Effect.READ,
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        ExportBundle.objects.filter(tenant_id=member.tenant_id, request=request).update(
            downloads=F("downloads") + 1
        )
        _audit(
            principal,
            request,
            AuditAction.DSAR_EXPORT_DOWNLOADED,
            payload={"bytes": row.size_bytes},
        )
    return path, _download_name(request)


# ------------------------------------------------------------------------- jobs


def expire_bundles(*, tenant: Tenant, now: datetime | None = None, batch: int = 100) -> int:
    """Delete the staging files of this tenant's bundles whose download window ended, and
    the half-built parts of exports that failed or were stopped; each bundle becomes
    `expired` (audited `DSAR_EXPORT_EXPIRED`). Safe to run twice."""
    now = now or timezone.now()
    system = Principal.system("dsar-export", tenant_id=tenant.id)
    due = list(
        ExportBundle.objects.filter(tenant_id=tenant.id)
        .filter(
            Q(state=B.READY, expires_at__lte=now)
            | Q(state=B.BUILDING, request__state__in=[S.FAILED, S.CANCELLED, S.EXPIRED])
        )
        .select_related("request__member")
        .order_by("expires_at")[:batch]
    )
    return sum(_expire(system, row.request, now=now) for row in due)


def bundles_discard(
    *,
    principal: Principal,
    member: User,
    reason_code: str = "member-data-deleted",
    now: datetime | None = None,
) -> int:
    """Delete now every export bundle of the member, ready or being built, with its staging
    files (a deletion request calls this, so nothing it erases survives in a bundle).
    Each becomes `expired`, audited with `reason_code`. Safe to run twice."""
    now = now or timezone.now()
    rows = list(
        ExportBundle.objects.filter(tenant_id=member.tenant_id, request__member=member)
        .exclude(state=B.EXPIRED)
        .select_related("request__member")
    )
    return sum(_expire(principal, row.request, now=now, reason=reason_code) for row in rows)


def _expire(
    principal: Principal, request: DataRightsRequest, *, now: datetime, reason: str = ""
) -> bool:
    decided: list[dict[str, Any]] = []
    _govern(
        principal,
        request.member,
        "dsar.export.expire",
        subject_ids=(str(request.id),),
        pending=decided,
    )
    with transaction.atomic(durable=True):
        record_pending(decided)
        locked = ExportBundle.objects.select_for_update().get(
            tenant_id=request.tenant_id, request_id=request.id
        )
        if locked.state == B.EXPIRED:
            return False
        if not reason:
            reason = "download-window-ended" if locked.state == B.READY else "build-abandoned"
        # The file goes first: a crash after this leaves a bundle the download refuses (its
        # file is missing) and the next run marks expired.
        if locked.file_name:
            (staging_dir() / locked.file_name).unlink(missing_ok=True)
        shutil.rmtree(_parts_dir(request.id), ignore_errors=True)
        locked.state = B.EXPIRED
        locked.deleted_at = now
        locked.cursor = {}
        locked.save()
        if request.passphrase_handle:
            _forget_passphrase(request)
        _audit(principal, request, AuditAction.DSAR_EXPORT_EXPIRED, reason_code=reason)
    return True


def requeue_stalled(*, tenant: Tenant, now: datetime | None = None, batch: int = 100) -> int:
    """Queue again this tenant's export and access requests that stopped moving: verified
    but never started, or in progress with no live build lease for STALL_AFTER (a worker
    died). A dead worker's lease is broken so the retry may take the build over."""
    now = now or timezone.now()
    stale = now - STALL_AFTER
    system = Principal.system("dsar-export", tenant_id=tenant.id)
    rows = list(
        DataRightsRequest.objects.filter(
            tenant_id=tenant.id,
            kind__in=[RequestKind.EXPORT, RequestKind.ACCESS],
            state__in=[S.VERIFIED, S.IN_PROGRESS],
            updated_at__lte=stale,
        )
        .select_related("member")
        .order_by("updated_at")[:batch]
    )
    queued = 0
    for request in rows:
        row = ExportBundle.objects.filter(tenant_id=tenant.id, request=request).first()
        if row is not None and row.state == B.BUILDING:
            lease = row.cursor.get("leaseUntil")
            if lease and datetime.fromisoformat(lease) > now:
                continue  # a live build
        decided: list[dict[str, Any]] = []
        _govern(
            system,
            request.member,
            "dsar.export.requeue",
            subject_ids=(str(request.id),),
            pending=decided,
        )
        with transaction.atomic(durable=True):
            record_pending(decided)
            if row is not None and row.state == B.BUILDING:
                locked = ExportBundle.objects.select_for_update().get(
                    tenant_id=tenant.id, request=request
                )
                locked.cursor = {**locked.cursor, "run": None, "leaseUntil": None}
                locked.save(update_fields=["cursor"])
            after_commit(_queue, request.id)
        queued += 1
    return queued


def _queue(request_id: uuid.UUID) -> None:
    from dsar import tasks

    enqueue(tasks.process, str(request_id))
