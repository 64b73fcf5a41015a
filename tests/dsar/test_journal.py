"""The erasure journal: signed lines of ids, kept outside the database, and
`manage.py reapply_erasures` that deletes again what it names."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from dsar import journal
from dsar.deletion import erasures_reapply
from governance.actions import AuditAction
from governance.models import AuditEvent
from memory.models import MemoryEntry
from tests.factories import written

T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _journal_in_tmp(tmp_path, settings):
    settings.IRIS_ERASURE_JOURNAL_PATH = tmp_path / "journal" / "erasures.jsonl"


def erasure(member, ids, *, at=T0, kind=journal.Kind.MEMORY_ENTRIES) -> journal.Erasure:
    return journal.Erasure(
        tenant_id=member.tenant_id,
        member_id=member.public_id,
        request_id=uuid.uuid4(),
        kind=kind,
        ids=tuple(ids),
        at=at,
    )


def lines(settings) -> list[str]:
    return settings.IRIS_ERASURE_JOURNAL_PATH.read_text().splitlines()


@pytest.mark.django_db
def test_a_line_holds_ids_only_and_is_signed(member, settings):
    ids = [uuid.uuid4(), uuid.uuid4()]
    assert journal.append([erasure(member, ids), erasure(member, [])]) == 1
    [line] = lines(settings)
    data = json.loads(line)
    assert set(data) == {
        "v",
        "tenantId",
        "memberId",
        "requestId",
        "kind",
        "ids",
        "at",
        "keyId",
        "mac",
    }
    assert data["ids"] == sorted(str(i) for i in ids)
    [read] = journal.read().erasures
    assert set(read.ids) == set(ids) and read.member_id == member.public_id


@pytest.mark.django_db
def test_lines_are_only_ever_appended(member, settings):
    journal.append([erasure(member, [uuid.uuid4()])])
    first = lines(settings)
    journal.append([erasure(member, [uuid.uuid4()], at=T0 + timedelta(hours=1))])
    assert lines(settings)[:1] == first and len(lines(settings)) == 2


@pytest.mark.django_db
def test_an_edited_line_is_refused(member, settings):
    journal.append([erasure(member, [uuid.uuid4()])])
    [line] = lines(settings)
    data = json.loads(line)
    data["memberId"] = str(uuid.uuid4())  # point it at someone else
    settings.IRIS_ERASURE_JOURNAL_PATH.write_text(json.dumps(data) + "\nnot json\n")
    reading = journal.read()
    assert (reading.erasures, reading.refused) == ([], 2)


@pytest.mark.django_db
def test_since_selects_what_was_erased_after_the_backup(member):
    journal.append([erasure(member, [uuid.uuid4()], at=T0)])
    journal.append([erasure(member, [uuid.uuid4()], at=T0 + timedelta(days=2))])
    assert len(journal.read(since=T0 + timedelta(days=1)).erasures) == 1


@pytest.mark.django_db
def test_reapply_deletes_what_the_journal_names_and_nothing_else(ready):
    # What a restored backup looks like: rows the journal says were erased are back.
    back = written(ready, "My bike is a red Brompton")
    kept = written(ready, "Piano lessons on Tuesdays", category="goal")
    journal.append([erasure(ready, [back.entry_id])])
    report = erasures_reapply()
    assert (report.lines, report.entries) == (1, 1)
    assert not MemoryEntry.objects.filter(entry_id=back.entry_id).exists()
    assert MemoryEntry.objects.filter(entry_id=kept.entry_id).exists()
    event = AuditEvent.objects.get(action=AuditAction.DSAR_ERASURES_REAPPLIED)
    assert event.payload["entries"] == 1
    # Idempotent: a second run finds nothing to delete.
    assert erasures_reapply().entries == 0


@pytest.mark.django_db
def test_the_command_refuses_a_forged_line(ready, settings):
    victim = written(ready, "My bike is a red Brompton")
    forged = erasure(ready, [victim.entry_id]).fields()
    forged.update({"keyId": "k1", "mac": "0" * 64})
    settings.IRIS_ERASURE_JOURNAL_PATH.parent.mkdir(parents=True, exist_ok=True)
    settings.IRIS_ERASURE_JOURNAL_PATH.write_text(json.dumps(forged) + "\n")
    with pytest.raises(CommandError, match="signature"):
        call_command("reapply_erasures")
    assert MemoryEntry.objects.filter(entry_id=victim.entry_id).exists()


@pytest.mark.django_db
def test_the_command_takes_since(ready, capsys):
    old = written(ready, "My bike is a red Brompton")
    journal.append([erasure(ready, [old.entry_id], at=T0)])
    call_command("reapply_erasures", since="2026-02-01T00:00:00Z")
    assert MemoryEntry.objects.filter(entry_id=old.entry_id).exists()
    call_command("reapply_erasures", since="2026-01-01T00:00:00Z")
    assert not MemoryEntry.objects.filter(entry_id=old.entry_id).exists()
    with pytest.raises(CommandError, match="time zone"):
        call_command("reapply_erasures", since="2026-01-01T00:00:00")


@pytest.mark.django_db
def test_a_member_no_longer_present_is_counted_not_an_error(member, other_tenant):
    ghost = erasure(member, [uuid.uuid4()])
    journal.append(
        [
            journal.Erasure(
                tenant_id=other_tenant.id,
                member_id=ghost.member_id,
                request_id=ghost.request_id,
                kind=ghost.kind,
                ids=ghost.ids,
                at=ghost.at,
            )
        ]
    )
    assert erasures_reapply().members_missing == 1
