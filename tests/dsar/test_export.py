"""Export bundles: built, signed, sealed, resumed, downloaded, expired, and checked."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django.utils import timezone

from consent.models import ConsentEvent
from dsar import bundle, collect, export, work
from dsar.models import DataRightsRequest, ExportBundle
from governance.actions import AuditAction
from governance.models import AuditEvent, VaultSecret
from memory.models import MemoryEntry
from memory.services import Correction, memory_correct
from tests.dsar.export_support import file_request, staging, worked  # noqa: F401
from tests.factories import as_member, grant, grant_category, scope_of, written

pytestmark = pytest.mark.django_db

CANARY = "My cat Ziggurat-7731 sleeps on the <b>red</b> sofa & snores"
PASSPHRASE = "correct horse battery staple"
ROOT = Path(__file__).resolve().parents[2]


def bundle_path(request: DataRightsRequest) -> Path:
    row = ExportBundle.objects.get(request=request)
    return Path(os.fspath(export.staging_dir())) / row.file_name


def zip_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line]


@pytest.fixture
def remembered(ready):
    """Three memories of the member, one corrected (so two revisions)."""
    first = written(ready, CANARY)
    written(ready, "I live in Lisbon", category="fact")
    written(ready, "I prefer tea to coffee")
    outcome = memory_correct(
        principal=as_member(ready),
        member=ready,
        entry_id=first.entry_id,
        correction=Correction(body=CANARY + " loudly"),
    )
    assert outcome.written
    return ready


def test_export_round_trip_is_signed_and_matches_the_database(remembered):
    request = worked(remembered, "export", includeConsents=True, includeOptOuts=True)
    assert request.state == "completed"
    path = bundle_path(request)
    files = zip_files(path)
    assert set(files) == {
        "data-rights.jsonl",
        "consent-events.jsonl",
        "consents-active.json",
        "opt-outs.json",
        "memories.jsonl",
        "recall-log.jsonl",
        "continuation-tokens.jsonl",
        "operator-accesses.jsonl",
        "index.html",
        "manifest.json",
        "manifest.sig",
    }
    # The result fingerprint binds the request to this manifest.
    assert request.result_fingerprint == hashlib.sha256(files["manifest.json"]).hexdigest()
    result = bundle.verify(path, public_keys=export.public_keys())
    assert result.ok, result.failures
    manifest = json.loads(files["manifest.json"])
    for entry in manifest["files"]:
        assert hashlib.sha256(files[entry["name"]]).hexdigest() == entry["sha256"]

    exported = {(r["id"], r["revision"], r["body"]) for r in lines(files["memories.jsonl"])}
    stored = {
        (str(e.entry_id), e.revision, e.body)
        for e in MemoryEntry.objects.filter(tenant_id=remembered.tenant_id, member=remembered)
    }
    assert exported == stored and len(stored) == 4
    record = next(r for r in lines(files["memories.jsonl"]) if r["revision"] == 2)
    assert record["provenanceChain"] is not None and record["supersedes"]
    consent_rows = ConsentEvent.objects.filter(member=remembered).count()
    assert len(lines(files["consent-events.jsonl"])) == consent_rows
    active = json.loads(files["consents-active.json"])
    assert {g["type"] for g in active["granted"]} == {"data_processing", "data_storage"}
    (history,) = lines(files["data-rights.jsonl"])
    assert history["id"] == str(request.id) and history["trail"][0]["toState"] == "submitted"

    page = files["index.html"].decode()
    assert "Ziggurat-7731" in page and "&lt;b&gt;red&lt;/b&gt;" in page and "<b>red" not in page
    assert "default-src 'none'" in page

    (built,) = AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_BUILT.value)
    assert built.payload["records"]["memories"] == 4
    assert built.payload["manifestSha256"] == request.result_fingerprint
    out = io.StringIO()
    call_command("verify_bundle", str(path), stdout=out)
    assert "bundle verifies" in out.getvalue()


def test_the_signing_key_is_published_and_verifies_a_bundle(remembered, api, tmp_path):
    request = worked(remembered, "export")
    answer = api.get("/api/v1/data-rights/signing-key")
    assert answer.status_code == 200
    published = answer.json()
    assert published["algorithm"] == "Ed25519"
    key = bundle.public_key_from_text(published["publicKey"])
    assert bundle.key_id(key) == published["keyId"]
    result = bundle.verify(bundle_path(request), public_keys={published["keyId"]: key})
    assert result.ok, result.failures
    out = io.StringIO()
    call_command(
        "verify_bundle",
        str(bundle_path(request)),
        "--public-key",
        published["publicKeyPem"],
        stdout=out,
    )
    assert published["keyId"] in out.getvalue()


def _rewrite(source: Path, target: Path, changes: dict[str, bytes]) -> None:
    files = zip_files(source)
    files.update(changes)
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def _run_verify(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "iris_site.settings_test"}
    return subprocess.run(
        [sys.executable, "manage.py", "verify_bundle", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_tampered_bundle_fails_verify_bundle_naming_what_fails(remembered, tmp_path):
    request = worked(remembered, "export")
    original = bundle_path(request)
    files = zip_files(original)

    edited = tmp_path / "edited.zip"
    memories = files["memories.jsonl"].replace(b"Lisbon", b"Madrid")
    _rewrite(original, edited, {"memories.jsonl": memories})
    done = _run_verify(edited)
    assert done.returncode != 0
    assert "memories.jsonl: SHA-256 does not match the manifest" in done.stderr

    # Fixing the manifest's hash breaks its signature instead.
    manifest = json.loads(files["manifest.json"])
    for entry in manifest["files"]:
        if entry["name"] == "memories.jsonl":
            entry["sha256"] = hashlib.sha256(memories).hexdigest()
            entry["bytes"] = len(memories)
    rehashed = tmp_path / "rehashed.zip"
    _rewrite(
        original,
        rehashed,
        {"memories.jsonl": memories, "manifest.json": bundle.canonical(manifest)},
    )
    with pytest.raises(CommandError, match="the signature does not match manifest.json"):
        call_command("verify_bundle", str(rehashed))

    # Re-signing with a key of one's own is a key nobody published.
    forged = tmp_path / "forged.zip"
    signature = bundle.signature_bytes(Ed25519PrivateKey.generate(), bundle.canonical(manifest))
    _rewrite(
        original,
        forged,
        {
            "memories.jsonl": memories,
            "manifest.json": bundle.canonical(manifest),
            "manifest.sig": signature,
        },
    )
    with pytest.raises(CommandError, match="signed by an unknown key"):
        call_command("verify_bundle", str(forged))

    # A file slipped in beside the signed ones is named too.
    extra = tmp_path / "extra.zip"
    _rewrite(original, extra, {"notes.txt": b"added later"})
    with pytest.raises(CommandError, match="notes.txt: not in the manifest"):
        call_command("verify_bundle", str(extra))


def test_an_encrypted_export_opens_with_its_passphrase_only(remembered, tmp_path):
    request = worked(remembered, "export", encrypted=True, passphrase=PASSPHRASE)
    assert request.state == "completed"
    path = bundle_path(request)
    assert path.name.endswith(".zip.enc") and bundle.is_sealed(path)
    assert b"Ziggurat" not in path.read_bytes()

    assert bundle.verify(path, public_keys=export.public_keys(), passphrase=PASSPHRASE).ok
    wrong = bundle.verify(path, public_keys=export.public_keys(), passphrase="not the one at all")
    assert wrong.failures == ["the passphrase does not open this bundle"]
    missing = bundle.verify(path, public_keys=export.public_keys())
    assert missing.failures == ["the bundle is encrypted: give its passphrase"]
    with pytest.raises(CommandError, match="passphrase does not open"):
        call_command("verify_bundle", str(path), "--passphrase", "not the one at all")
    secret = tmp_path / "passphrase.txt"
    secret.write_text(PASSPHRASE + "\n")
    out = io.StringIO()
    call_command("verify_bundle", str(path), "--passphrase-file", str(secret), stdout=out)
    assert "bundle verifies" in out.getvalue()

    plain = tmp_path / "plain.zip"
    with path.open("rb") as source, plain.open("wb") as target:
        bundle.unseal(source, target, PASSPHRASE)
    files = zip_files(plain)
    assert request.result_fingerprint == hashlib.sha256(files["manifest.json"]).hexdigest()
    # The passphrase left the vault once the bundle was built.
    assert request.passphrase_handle == ""
    assert not VaultSecret.objects.filter(purpose="dsar-export-passphrase").exists()

    # A flipped byte in the sealed chunks is refused.
    damaged = tmp_path / "damaged.zip.enc"
    data = bytearray(path.read_bytes())
    data[-40] ^= 0x01
    damaged.write_bytes(bytes(data))
    result = bundle.verify(damaged, public_keys=export.public_keys(), passphrase=PASSPHRASE)
    assert result.failures and "altered" in result.failures[0]


def test_the_envelope_round_trips_any_size():
    for size in (0, 1, bundle.CHUNK - 1, bundle.CHUNK, bundle.CHUNK * 2 + 5):
        data = os.urandom(size)
        sealed, opened = io.BytesIO(), io.BytesIO()
        bundle.seal(io.BytesIO(data), sealed, "twelve chars!")
        sealed.seek(0)
        bundle.unseal(sealed, opened, "twelve chars!")
        assert opened.getvalue() == data
        # Dropping the last chunk is noticed, even on a chunk boundary.
        if size >= bundle.CHUNK:
            cut = sealed.getvalue()[: -(len(sealed.getvalue()) % (bundle.CHUNK + 16) or 16)]
            with pytest.raises(bundle.EnvelopeError):
                bundle.unseal(io.BytesIO(cut), io.BytesIO(), "twelve chars!")


def _pose_memories(member, body: str) -> None:
    """Pose memory, written through the memory service with the consents pose needs."""
    grant(member, "sensitive_data")
    grant_category(member, "pose_alignment")
    ids = {"sessionId": "s-1", "sceneId": "sc-1", "poseId": "p-1"}
    for n in range(3):
        written(
            member,
            f"{body} {n}",
            kind="pose",
            category="pose_alignment",
            subject=f"joint {n}",
            identifiers=scope_of(member, "pose", **ids),
        )


def test_pose_memory_leaves_as_aggregates_only(remembered):
    _pose_memories(remembered, "Left knee bends 14 degrees short")
    request = worked(
        remembered,
        "export",
        scopes=["profile", "pose"],
        includePoseMemory=True,
    )
    assert request.state == "completed"
    files = zip_files(bundle_path(request))
    pose = json.loads(files["pose-aggregates.json"])
    assert pose["biometricAggregateOnly"] is True
    assert sum(c["entries"] for c in pose["counts"]) == 3
    assert {c["category"] for c in pose["counts"]} == {"pose_alignment"}
    for name, data in files.items():
        assert b"knee" not in data, name
        assert b"p-1" not in data, name
    assert all(r["scope"]["kind"] == "profile" for r in lines(files["memories.jsonl"]))


class WorkerKilled(BaseException):
    """What a SIGKILL looks like from inside: nothing after it runs, no except catches it."""


def test_a_worker_killed_mid_export_completes_once_on_retry(
    remembered, monkeypatch, django_capture_on_commit_callbacks
):
    real = collect.memory_record
    calls = {"n": 0}

    def dies_once(entry, member):
        calls["n"] += 1
        if calls["n"] == 2:
            raise WorkerKilled
        return real(entry, member)

    monkeypatch.setattr(collect, "memory_record", dies_once)
    request = file_request(remembered, "export", includeConsents=True)
    with pytest.raises(WorkerKilled):
        work.process(request.id)

    request.refresh_from_db()
    assert request.state == "in-progress"
    row = ExportBundle.objects.get(request=request)
    assert row.state == "building"
    assert set(row.cursor["sections"]) == {
        "data-rights",
        "consent-events",
        "consents-active",
        "opt-outs",
    }
    staging_dir = export.staging_dir()
    assert not list(staging_dir.glob("*.zip"))

    # A retry while the dead worker's lease runs leaves the build alone ...
    assert work.process(request.id) == "waiting"
    # ... until the beat job finds it stalled, breaks the lease and queues it again.
    later = timezone.now() + export.STALL_AFTER + timedelta(minutes=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert export.requeue_stalled(tenant=remembered.tenant, now=later) == 1

    request.refresh_from_db()
    assert request.state == "completed"
    assert [s.to_state for s in request.trail.order_by("position")].count("completed") == 1
    assert ExportBundle.objects.filter(request=request).count() == 1
    row.refresh_from_db()
    assert row.state == "ready" and row.cursor["attempts"] == 2
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_BUILT.value).count() == 1
    assert [p.name for p in staging_dir.iterdir()] == [row.file_name]
    files = zip_files(bundle_path(request))
    assert len(lines(files["memories.jsonl"])) == 4
    assert bundle.verify(bundle_path(request), public_keys=export.public_keys()).ok
    # Running the work once more changes nothing.
    assert work.process(request.id) == "completed"
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_BUILT.value).count() == 1


def test_expiry_deletes_the_staging_file_and_the_download_is_gone(remembered, member_api):
    request = worked(remembered, "export")
    row = ExportBundle.objects.get(request=request)
    path = bundle_path(request)
    assert row.expires_at == row.ready_at + timedelta(hours=72)
    assert path.is_file()
    assert (
        export.expire_bundles(tenant=remembered.tenant, now=row.expires_at - timedelta(seconds=1))
        == 0
    )
    assert export.expire_bundles(tenant=remembered.tenant, now=row.expires_at) == 1
    assert not path.exists()
    row.refresh_from_db()
    assert row.state == "expired" and row.deleted_at is not None
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_EXPIRED.value).count() == 1
    assert export.expire_bundles(tenant=remembered.tenant, now=row.expires_at) == 0
    answer = member_api.get(f"/api/v1/data-rights/{request.id}/bundle")
    assert answer.status_code == 410
    assert answer.json()["code"] == "bundle-expired"


def test_a_failed_export_leaves_nothing_in_staging(remembered, monkeypatch):
    def breaks(entry, member):
        raise RuntimeError("disk full")

    monkeypatch.setattr(collect, "memory_record", breaks)
    request = worked(remembered, "export")
    assert request.state == "failed"
    assert list(export.staging_dir().iterdir())  # the parts of the build so far
    assert export.expire_bundles(tenant=remembered.tenant) == 1
    assert not list(export.staging_dir().iterdir())


def test_the_member_downloads_their_bundle(remembered, member_api, surface_api):
    request = worked(remembered, "export")
    answer = member_api.get(f"/api/v1/data-rights/{request.id}/bundle")
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/zip"
    assert "attachment" in answer["Content-Disposition"]
    data = b"".join(answer.streaming_content)
    assert data == bundle_path(request).read_bytes()
    by_surface = surface_api.get(
        f"/api/v1/data-rights/{request.id}/bundle?userId={remembered.public_id}"
    )
    assert by_surface.status_code == 200
    b"".join(by_surface.streaming_content)
    downloads = AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_DOWNLOADED.value)
    assert downloads.count() == 2
    assert ExportBundle.objects.get(request=request).downloads == 2


def test_nobody_else_downloads_a_bundle(
    remembered, other_member, api, foreign_surface_token, make_operator
):
    request = worked(remembered, "export")
    url = f"/api/v1/data-rights/{request.id}/bundle"
    assert api.get(url).status_code in (401, 403)
    api.force_login(other_member)
    assert api.get(url).status_code == 404
    assert api.get(f"{url}?userId={remembered.public_id}").status_code == 404
    api.force_login(make_operator("legal"))
    assert api.get(f"{url}?userId={remembered.public_id}").status_code == 404
    api.logout()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    assert api.get(f"{url}?userId={remembered.public_id}").status_code == 404
    assert not AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_DOWNLOADED.value).exists()


def test_a_bundle_still_being_built_is_409(remembered, member_api):
    request = file_request(remembered, "export")
    answer = member_api.get(f"/api/v1/data-rights/{request.id}/bundle")
    assert answer.status_code == 409
    assert answer.json()["code"] == "bundle-not-ready"


def test_no_memory_body_reaches_the_audit_chain(remembered, member_api):
    request = worked(remembered, "export", encrypted=True, passphrase=PASSPHRASE)
    answer = member_api.get(f"/api/v1/data-rights/{request.id}/bundle")
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/octet-stream"
    assert b"".join(answer.streaming_content) == bundle_path(request).read_bytes()
    row = ExportBundle.objects.get(request=request)
    export.expire_bundles(tenant=remembered.tenant, now=row.expires_at)
    for event in AuditEvent.objects.filter(action__startswith="iris.dsar."):
        text = json.dumps(event.payload)
        assert "Ziggurat" not in text and "Lisbon" not in text and PASSPHRASE not in text
    actions = set(
        AuditEvent.objects.filter(action__startswith="iris.dsar.export.").values_list(
            "action", flat=True
        )
    )
    assert actions == {
        AuditAction.DSAR_EXPORT_BUILT.value,
        AuditAction.DSAR_EXPORT_DOWNLOADED.value,
        AuditAction.DSAR_EXPORT_EXPIRED.value,
    }


def test_a_member_opens_and_checks_a_bundle_without_iris(remembered, tmp_path, monkeypatch):
    request = worked(remembered, "export", encrypted=True, passphrase=PASSPHRASE)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": PASSPHRASE)
    opened = tmp_path / "opened.zip"
    assert bundle.main(["unseal", str(bundle_path(request)), str(opened)]) == 0
    assert "Ziggurat" in zip_files(opened)["memories.jsonl"].decode()
    key = tmp_path / "key.pem"
    key.write_text(export.published_keys()[0]["publicKeyPem"])
    assert bundle.main(["verify", str(opened), "--public-key", str(key)]) == 0
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "a wrong passphrase")
    assert bundle.main(["unseal", str(bundle_path(request)), str(tmp_path / "no.zip")]) == 1
    assert not (tmp_path / "no.zip").exists()


def test_an_appealed_export_is_built_again_after_its_bundle_expired(remembered):
    from dsar import services
    from governance.principal import Principal

    request = worked(remembered, "export")
    first = request.result_fingerprint
    row = ExportBundle.objects.get(request=request)
    export.expire_bundles(tenant=remembered.tenant, now=row.expires_at)
    services.data_rights_transition(
        principal=as_member(remembered), member=remembered, request_id=request.id, to="appealed"
    )
    services.data_rights_transition(
        principal=Principal.system("tests", tenant_id=remembered.tenant_id),
        member=remembered,
        request_id=request.id,
        to="in-progress",
    )
    assert work.process(request.id) == "completed"
    request.refresh_from_db()
    row.refresh_from_db()
    assert row.state == "ready" and bundle_path(request).is_file()
    assert request.result_fingerprint == row.manifest_sha256 != first
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_BUILT.value).count() == 2


def test_a_deletion_discards_the_members_bundles_at_once(remembered):
    from governance.principal import Principal

    request = worked(remembered, "export")
    path = bundle_path(request)
    system = Principal.system("tests", tenant_id=remembered.tenant_id)
    assert export.bundles_discard(principal=system, member=remembered) == 1
    assert not path.exists() and not list(export.staging_dir().iterdir())
    (expired,) = AuditEvent.objects.filter(action=AuditAction.DSAR_EXPORT_EXPIRED.value)
    assert expired.reason_code == "member-data-deleted"
    assert export.bundles_discard(principal=system, member=remembered) == 0


def test_an_email_delivery_tells_the_member_without_a_link(
    remembered, mailoutbox, django_capture_on_commit_callbacks
):
    remembered.email = "ada@example.org"
    remembered.save(update_fields=["email"])
    with django_capture_on_commit_callbacks(execute=True):
        worked(remembered, "export", deliveryChannel="email-link")
    ready = [m for m in mailoutbox if m.subject == "Your data export is ready"]
    assert len(ready) == 1 and ready[0].to == ["ada@example.org"]
    assert "http" not in ready[0].body and "Ziggurat" not in ready[0].body


def test_the_beat_runs_the_export_jobs_for_every_tenant(remembered):
    from dsar import tasks
    from iris_site.beat import BEAT_SCHEDULE
    from iris_site.celery import app

    for name in ("dsar.tasks.requeue_stalled", "dsar.tasks.expire_bundles"):
        assert name in {entry["task"] for entry in BEAT_SCHEDULE.values()}
        assert name in app.tasks
    worked(remembered, "export")
    assert tasks.requeue_stalled.delay().get() == 0  # nothing stalled
    assert tasks.expire_bundles.delay().get() == 0  # nothing due yet
