"""Forget-completeness suite (spec: "deletion verified across storage, summaries,
downstream uses, retrievals, and audit references (the DSAR resultFingerprint is the
durable proof)"; DESIGN invariant 7).

A member's notebook holds two canary memories: one corrected (two revisions), stored
with an idempotency key (so an API answer quoting it is kept), recalled (the worker's
recall snapshot and history hold it), summarised into a profile memory that quotes it (a
downstream use), exported (a bundle in the staging folder holds it) and contradicted (an
open question quotes the other canary). Then it is erased in each of the three ways a
member can: a hard data-rights deletion, a soft one after its grace window, and forgetting
each memory followed by memory's own purge. Afterwards no table, column, staging file,
journal line, log line or recall answer holds either canary; the audit chain still
verifies and keeps only ids and fingerprints; a data-rights deletion's resultFingerprint
is the SHA-256 of the sorted ids this test knows it wrote."""

from __future__ import annotations

import hashlib
import logging
import random
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from dsar import tasks as dsar_tasks
from dsar import work
from governance.models import AuditEvent
from memory import tasks as memory_tasks
from memory.rules.retention import SOFT_DELETE_GRACE
from tests.evals.generators import T0, canary
from tests.evals.support import MEMORIES, ask
from tests.factories import payload
from tests.helpers_db import find_in_database

pytestmark = pytest.mark.django_db

SEED = 2608
NOTEBOOK = {"kind": "notebook", "notebookId": "nb-1"}
PATHS = ["data-rights-hard", "data-rights-soft", "forget-then-purge"]


@pytest.fixture(autouse=True)
def _files_in_tmp(tmp_path, settings):
    settings.IRIS_EXPORT_DIR = tmp_path / "exports"
    settings.IRIS_ERASURE_JOURNAL_PATH = tmp_path / "erasure-journal.jsonl"


def files_holding(root: Path, words: set[str]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")) if root.exists() else []:
        if path.is_file():
            data = path.read_bytes()
            if zipfile.is_zipfile(path):  # a bundle: its files are compressed
                with zipfile.ZipFile(path) as archive:
                    data += b"".join(archive.read(n) for n in archive.namelist())
            if any(w.encode() in data for w in words):
                found.append(path.name)
    return found


def places_holding(words: set[str], tmp_path: Path) -> list[str]:
    places = [f"{t}.{c}" for w in sorted(words) for t, c in find_in_database(w)]
    return places + files_holding(tmp_path, words)


@pytest.fixture
def remembered(ready, surface_api, member_api, clock, django_capture_on_commit_callbacks):
    rng = random.Random(SEED)
    user = str(ready.public_id)
    bike, rival = canary(rng), canary(rng)
    scope = {**NOTEBOOK, "userId": user}
    first = surface_api.post(
        MEMORIES,
        payload(
            ready, body=f"My bike is a green {bike} folding bike", scope=scope, category="fact"
        ),
        format="json",
        headers={"Idempotency-Key": "bike-1"},
    )
    assert first.status_code == 201, first.content
    bike_id = first.json()["id"]
    corrected = surface_api.patch(
        f"{MEMORIES}/{bike_id}",
        {"userId": user, "body": f"My bike is a red {bike} folding bike"},
        format="json",
    )
    assert corrected.status_code == 200, corrected.content
    diary = surface_api.post(
        MEMORIES,
        payload(
            ready, body=f"I ride to the {bike} market on Sundays", scope=scope, category="goal"
        ),
        format="json",
    ).json()
    question = surface_api.post(
        MEMORIES,
        payload(ready, body=f"My bike is a {rival} racing bike", scope=scope, category="fact"),
        format="json",
    )
    assert question.status_code == 409, question.content
    summary = surface_api.post(
        MEMORIES,
        payload(
            ready,
            body=f"Summary: rides a red {bike} folding bike",
            origin="summarized-from-session",
            subject="weekly summary",
            provenanceChain=[
                {
                    "kind": "session-summary",
                    "ref": corrected.json()["revisionId"],
                    "capturedAt": "2026-03-02T09:00:00Z",
                },
            ],
        ),
        format="json",
    )
    assert summary.status_code == 201, summary.content
    kept = surface_api.post(MEMORIES, payload(ready, body="I like tea"), format="json").json()
    recall = ask(surface_api, ready, "which bike do I have", scope=NOTEBOOK)
    assert bike in recall.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        export = member_api.post("/api/v1/data-rights", {"kind": "export"}, format="json")
    assert export.status_code == 201, export.content
    return {
        "words": {bike, rival},
        "erased_ids": {bike_id, diary["id"], summary.json()["id"]},
        "source_ids": [bike_id, diary["id"]],
        "kept_id": kept["id"],
        "export_id": export.json()["id"],
    }


@pytest.mark.parametrize("path", PATHS)
def test_erasure_leaves_no_trace_but_ids_and_fingerprints(
    path,
    remembered,
    ready,
    surface_api,
    member_api,
    clock,
    tmp_path,
    caplog,
    django_capture_on_commit_callbacks,
    metric,
) -> None:
    caplog.set_level(logging.DEBUG)
    words = remembered["words"]
    user = str(ready.public_id)
    before = places_holding(words, tmp_path)
    assert len(before) >= 4, before  # the canaries really were spread around
    assert files_holding(Path(django_settings.IRIS_EXPORT_DIR), words)  # in the export too

    request_id = None
    if path.startswith("data-rights"):
        mode = path.removeprefix("data-rights-")
        body = {"kind": "delete", "payload": {"mode": mode, "scopes": ["notebook"]}}
        if mode == "soft":
            body["payload"]["retentionGraceMs"] = 3_600_000
        with django_capture_on_commit_callbacks(execute=True):
            filed = member_api.post("/api/v1/data-rights", body, format="json")
        assert filed.status_code == 201, filed.content
        request_id = filed.json()["id"]
        work.process(request_id)  # idempotent: finishes whatever the queued run left
        if mode == "soft":
            # Inside the window nothing reaches a surface, but the member may still undo.
            text = _answer_text(surface_api, ready)
            assert not [w for w in words if w in text]
            clock.move_to(T0 + timedelta(hours=2))
            dsar_tasks.purge_soft_deletions.delay()
    else:
        # The member forgets the two notebook memories; the summary quoting one goes with it.
        for entry_id in remembered["source_ids"]:
            forgot = member_api.post(f"{MEMORIES}/{entry_id}/forget", {}, format="json")
            assert forgot.status_code == 200, forgot.content
        # Forgotten at once for every surface, the summary quoting it too.
        assert not [w for w in words if w in _answer_text(surface_api, ready)]
        # The beat as it runs: bundles expire after IRIS_EXPORT_TTL_HOURS, the purge comes
        # after the 14-day grace, so no bundle outlives a forgotten memory's text.
        assert timedelta(hours=django_settings.IRIS_EXPORT_TTL_HOURS) < SOFT_DELETE_GRACE
        clock.move_to(T0 + SOFT_DELETE_GRACE + timedelta(days=1))
        dsar_tasks.expire_bundles.delay()
        memory_tasks.purge.delay(str(ready.tenant_id))

    after = places_holding(words, tmp_path)
    leaked_logs = [w for w in words if w in caplog.text]
    answers = _answer_text(surface_api, ready)
    retrieved = [w for w in words if w in answers]
    metric(
        "forget-completeness",
        **{
            f"{path}_places_before": len(before),
            f"{path}_places_after": len(after) + len(leaked_logs) + len(retrieved),
        },
    )
    assert after == [], after
    assert leaked_logs == []
    assert retrieved == []
    # What was not named stays.
    kept = surface_api.get(f"{MEMORIES}/{remembered['kept_id']}", {"userId": user})
    assert kept.status_code == 200
    for entry_id in remembered["erased_ids"]:
        assert surface_api.get(f"{MEMORIES}/{entry_id}", {"userId": user}).status_code == 404
    # The audit chain still verifies, and refers to what went by id only.
    call_command("verify_audit", stdout=_Sink())
    payloads = " ".join(str(e.payload) for e in AuditEvent.objects.all())
    assert all(entry_id in payloads for entry_id in remembered["erased_ids"])
    if request_id is not None:
        done = member_api.get(f"/api/v1/data-rights/{request_id}").json()
        assert done["state"] == "completed", done
        proof = hashlib.sha256("\n".join(sorted(remembered["erased_ids"])).encode()).hexdigest()
        assert done["resultFingerprint"] == proof


def _answer_text(client, member) -> str:
    return " ".join(
        ask(client, member, q, scope=s).content.decode()
        for q in ("which bike do I have", "", "summary of my rides")
        for s in (NOTEBOOK, {"kind": "profile"})
    )


class _Sink:
    def write(self, text: str) -> None:
        self.text = text
