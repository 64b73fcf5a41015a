"""Deletion is complete, proven on PostgreSQL by a canary: a memory whose body is a unique
string is deleted through a data-rights request, then the whole database is dumped with
`pg_dump` and searched, as are the export staging folder, this worker's recall snapshots
and the captured logs. And a backup restored after a deletion is cleaned again by
`manage.py reapply_erasures` from the erasure journal.

These tests commit (`transaction=True`): `pg_dump` and `pg_restore` are other sessions
and see only committed rows. The restore goes into the same test database
(`pg_restore --clean --if-exists`), with Django's connection closed first: a second
database would need a second connection alias that every service would have to be
pointed at, while the same database is exactly what an operator restores into.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from consent.enums import category_consent_type
from consent.models import ConsentEventBody
from dsar import services
from dsar.models import DataRightsRequest
from governance.actions import AuditAction
from governance.models import AuditEvent
from memory.models import MemoryEntry
from memory.recall import snapshot as recall_snapshot
from tests.factories import as_member, grant_category, grant_storage, written

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _files_in_tmp(tmp_path, settings):
    settings.IRIS_ERASURE_JOURNAL_PATH = tmp_path / "erasure-journal.jsonl"
    settings.IRIS_EXPORT_DIR = tmp_path / "exports"
    settings.IRIS_EXPORT_DIR.mkdir()
    settings.IRIS_RECALL_SEMANTIC = "jaccard"


def _pg_env() -> tuple[list[str], dict[str, str]]:
    db = connection.settings_dict
    args = ["-h", db.get("HOST") or "127.0.0.1", "-p", str(db.get("PORT") or 5432)]
    if db.get("USER"):
        args += ["-U", db["USER"]]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    return args, env


def pg_dump_text() -> str:
    args, env = _pg_env()
    done = subprocess.run(  # noqa: S603 (fixed program, arguments from the test settings)
        ["pg_dump", *args, "--no-owner", connection.settings_dict["NAME"]],  # noqa: S607
        capture_output=True,
        env=env,
        check=True,
    )
    return done.stdout.decode("utf-8", errors="replace")


def pg_dump_custom(target: Path) -> None:
    args, env = _pg_env()
    subprocess.run(  # noqa: S603
        ["pg_dump", *args, "-Fc", "-f", str(target), connection.settings_dict["NAME"]],  # noqa: S607
        env=env,
        check=True,
        capture_output=True,
    )


def pg_restore_clean(source: Path) -> None:
    """Put the database back as the dump has it: what an operator's restore does."""
    args, env = _pg_env()
    name = connection.settings_dict["NAME"]
    connection.close()
    subprocess.run(  # noqa: S603
        [  # noqa: S607
            "pg_restore",
            *args,
            "--clean",
            "--if-exists",
            "--no-owner",
            "--single-transaction",
            "-d",
            name,
            str(source),
        ],
        env=env,
        check=True,
        capture_output=True,
    )


def canary() -> str:
    return f"zq{uuid.uuid4().hex}canary"


def recall_once(member) -> None:
    """A recall, so this worker holds a snapshot of the member (committed rows, no
    transaction: the snapshot path)."""
    from memory.recall.service import RecallAsk, recall_resolve

    recall_resolve(
        principal=as_member(member),
        member=member,
        ask=RecallAsk(
            scope_kind="profile",
            scope_identifiers={},
            scope_key=None,
            query="vitamin tablet",
            surface="assistant",
            context="general",
            destination_tier="local",
        ),
    )


def snapshot_text() -> str:
    """Everything this worker's recall snapshots hold, as text."""
    parts: list[str] = []
    for snap in recall_snapshot._CACHE.values():
        parts.extend(snap.codes.names)
        parts.extend(snap._index[2])  # the words of the rows of the last build
        parts.extend(" ".join(w) for w in snap._added.values())
        parts.extend(snap._appended)
        parts.extend(snap.postings)
    return "\n".join(parts)


def test_a_hard_delete_leaves_the_canary_nowhere(require_postgres, member, settings, caplog):
    caplog.set_level(logging.DEBUG)
    grant_storage(member)
    grant_category(member, "medical")
    secret = canary()
    kept = written(member, "I take a daily vitamin D tablet", category="preference")
    doomed = written(member, secret, category="medical")
    recall_once(member)
    assert secret in pg_dump_text()  # the search finds it while it is there
    assert secret in snapshot_text()

    request = services.data_rights_open(
        principal=as_member(member),
        member=member,
        kind="delete",
        payload={"mode": "hard", "categories": ["medical"], "purgeConsentLedger": True},
    )
    request = DataRightsRequest.objects.get(id=request.id)
    assert request.state == "completed"  # verified by the session, run after commit
    assert request.result_fingerprint == hashlib.sha256(str(doomed.entry_id).encode()).hexdigest()

    dump = pg_dump_text()
    assert secret not in dump
    assert str(kept.body) in dump  # the search would have seen it
    for path in Path(settings.IRIS_EXPORT_DIR).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()
    assert secret not in snapshot_text()
    recall_once(member)  # a snapshot built afresh has nothing of it either
    assert secret not in snapshot_text()
    assert secret not in caplog.text
    assert secret not in Path(settings.IRIS_ERASURE_JOURNAL_PATH).read_text()
    assert not ConsentEventBody.objects.filter(
        event__member=member, consent_type=category_consent_type("medical")
    ).exists()


def test_a_soft_delete_keeps_the_text_until_the_purge(require_postgres, member):
    from dsar.deletion import soft_deletions_purge

    grant_storage(member)
    secret = canary()
    doomed = written(member, secret)
    request = services.data_rights_open(
        principal=as_member(member),
        member=member,
        kind="delete",
        payload={"mode": "soft", "categories": ["preference"], "retentionGraceMs": 3_600_000},
    )
    request = DataRightsRequest.objects.get(id=request.id)
    assert request.state == "in-progress" and request.grace_until is not None
    assert secret in pg_dump_text()  # tombstoned, kept for the undo window
    assert MemoryEntry.objects.get(entry_id=doomed.entry_id, is_current=True).lifecycle == (
        "tombstoned"
    )
    assert soft_deletions_purge(tenant=member.tenant, now=request.grace_until) == 1
    assert secret not in pg_dump_text()
    request.refresh_from_db()
    assert request.state == "completed"
    assert request.result_fingerprint == hashlib.sha256(str(doomed.entry_id).encode()).hexdigest()


def test_reapply_erasures_after_restoring_a_dump_taken_before_the_deletion(
    require_postgres, member, tmp_path
):
    grant_storage(member)
    grant_category(member, "medical")
    secret = canary()
    doomed = written(member, secret, category="medical")
    kept = written(member, "I take a daily vitamin D tablet")
    backup = tmp_path / "before.dump"
    pg_dump_custom(backup)

    services.data_rights_open(
        principal=as_member(member),
        member=member,
        kind="delete",
        payload={"mode": "hard", "categories": ["medical"], "purgeConsentLedger": True},
    )
    assert secret not in pg_dump_text()

    pg_restore_clean(backup)
    assert secret in pg_dump_text()  # the restore brought it back
    assert MemoryEntry.objects.filter(entry_id=doomed.entry_id).exists()

    call_command("reapply_erasures")
    assert secret not in pg_dump_text()
    assert MemoryEntry.objects.filter(entry_id=kept.entry_id).exists()
    assert not ConsentEventBody.objects.filter(
        event__member=member, consent_type=category_consent_type("medical")
    ).exists()
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_ERASURES_REAPPLIED).count() == 1
    call_command("reapply_erasures")  # idempotent: nothing left to delete
    assert MemoryEntry.objects.filter(entry_id=kept.entry_id).exists()
    assert AuditEvent.objects.filter(action=AuditAction.DSAR_ERASURES_REAPPLIED).count() == 2
