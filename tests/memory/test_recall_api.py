"""POST /api/v1/recall: the endpoint checklist, the audit event, reference counts, history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance.models import AuditEvent
from memory.models import MemoryEntry
from memory.recall.models import RecallEvent
from memory.recall.service import AUDIT_ACTION, POLICY_ID, _bump_references, recent_recalls
from memory.services import memory_write
from tests.factories import as_member, draft, grant_storage
from tests.helpers_db import run_together

URL = "/api/v1/recall"
PROBLEM = "application/problem+json"
QUERY = "which coffee do I like"


@pytest.fixture(autouse=True)
def lexical(settings) -> None:
    # These tests read lexical rationales ("matches 'coffee'"); the default hybrid ranker
    # has its own tests (test_recall_ranker, test_hybrid_write_and_recall).
    settings.IRIS_RECALL_SEMANTIC = "jaccard"


@pytest.fixture
def remembered(member) -> list[str]:
    grant_storage(member)
    # Each shares a word with QUERY: a question never gets what matches nothing of it.
    bodies = ["I like my coffee black", "I like my cat Tom", "I like living in Berlin"]
    return [
        str(
            memory_write(
                principal=as_member(member), member=member, draft=draft(member, b)
            ).entry.entry_id
        )
        for b in bodies
    ]


def ask(member: Any, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": str(member.public_id),
        "scope": {"kind": "profile"},
        "query": QUERY,
        "surface": "assistant",
        "context": "general",
        "destinationTier": "local",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def recall_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AUDIT_ACTION).order_by("seq"))


def test_a_surface_recalls_ranked_entries_with_rationale(surface_api, member, remembered) -> None:
    response = surface_api.post(URL, ask(member), format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert [e["entry"]["id"] for e in data["entries"]][0] == remembered[0]
    first = data["entries"][0]
    assert first["score"] > data["entries"][1]["score"]
    assert "matches 'coffee'" in first["surfaceRationale"]
    assert first["provenanceChain"] == first["entry"]["provenanceChain"]
    envelope = data["auditEnvelope"]
    assert set(envelope) == {"scopeKey", "returnedIds", "suppressionCounts", "evaluatedCount"}
    assert envelope["scopeKey"] == f"profile:{member.public_id}"
    assert envelope["returnedIds"] == [e["entry"]["id"] for e in data["entries"]]
    assert envelope["evaluatedCount"] >= 3


def test_one_audit_event_without_content(surface_api, member, remembered) -> None:
    surface_api.post(URL, ask(member), format="json")
    (event,) = recall_events()
    assert event.policy_id == POLICY_ID
    assert event.severity == "info"
    assert event.payload["returnedIds"] == remembered[:1] + event.payload["returnedIds"][1:]
    assert event.payload["suppressionCounts"] == {}
    assert set(event.payload) >= {
        "scopeKeyHash",
        "returnedIds",
        "suppressionCounts",
        "evaluatedCount",
    }
    text = str(event.payload)
    assert "coffee" not in text and "Berlin" not in text and str(member.public_id) not in text


def test_reference_counts_and_history_are_updated(surface_api, member, remembered) -> None:
    surface_api.post(URL, ask(member, limit=1), format="json")
    top = MemoryEntry.objects.get(entry_id=remembered[0], is_current=True)
    assert top.reference_count == 1 and top.last_referenced_at is not None
    others = MemoryEntry.objects.filter(entry_id__in=remembered[1:], is_current=True)
    assert all(e.reference_count == 0 and e.last_referenced_at is None for e in others)
    (seen,) = recent_recalls(member=member, entry_id=remembered[0])
    assert (seen.surface, seen.context, seen.scope_key) == (
        "assistant",
        "general",
        f"profile:{member.public_id}",
    )
    assert "coffee" not in seen.rationale  # no query or body words kept
    assert RecallEvent.objects.count() == 1


def test_usage_and_history_commit_with_the_answer_even_if_the_worker_dies_after_it(
    surface_api, member, remembered
) -> None:
    from django.core.signals import request_finished

    from governance import after_response

    # A worker killed once the answer is out never runs what `request_finished` would.
    request_finished.disconnect(dispatch_uid="iris-after-response")
    try:
        response = surface_api.post(URL, ask(member, limit=1), format="json")
        assert response.status_code == 200, response.content
        (event,) = recall_events()
        assert event.payload["returnedIds"] == [remembered[0]]
        top = MemoryEntry.objects.get(entry_id=remembered[0], is_current=True)
        assert top.reference_count == 1
        assert RecallEvent.objects.filter(entry_id=remembered[0]).count() == 1
    finally:
        after_response.run_deferred()
        request_finished.connect(after_response.run_deferred, dispatch_uid="iris-after-response")


def test_the_member_session_recalls_for_itself(member_api, member, remembered) -> None:
    response = member_api.post(URL, ask(member, userId=None), format="json")
    assert response.status_code == 200, response.content
    assert len(response.json()["entries"]) == 3


def test_a_cloud_client_naming_no_tier_gets_cloud_and_personal_text_is_withheld(
    cloud_surface_api, member, remembered
) -> None:
    response = cloud_surface_api.post(URL, ask(member, destinationTier=None), format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["entries"] == []
    assert data["auditEnvelope"]["suppressionCounts"] == {"egress-personal-to-cloud": 3}
    (event,) = recall_events()
    assert event.severity == "warning"
    assert not MemoryEntry.objects.filter(reference_count__gt=0).exists()


def test_a_request_cannot_widen_consent(surface_api, member) -> None:
    grant_storage(member)
    from tests.factories import grant_category

    grant_category(member, "medical")
    memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "I take insulin daily, I like it less than coffee", category="medical"),
    )
    from consent.services import consent_record  # noqa: F401  (ledger stays the word)

    narrowed = surface_api.post(
        URL, ask(member, context="health", consentedCategories=["financial"]), format="json"
    ).json()
    assert narrowed["entries"] == []
    assert narrowed["auditEnvelope"]["suppressionCounts"] == {
        "sensitive-category-without-consent": 1
    }
    allowed = surface_api.post(
        URL, ask(member, context="health", consentedCategories=["medical"]), format="json"
    ).json()
    assert len(allowed["entries"]) == 1


def test_consent_missing_from_the_ledger_cannot_be_asserted(surface_api, member) -> None:
    grant_storage(member)
    from tests.factories import grant_category

    grant_category(member, "medical")
    memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "I take insulin daily, I like it less than coffee", category="medical"),
    )
    from consent.enums import category_consent_type
    from tests.factories import grant

    grant(member, category_consent_type("medical"), status="revoked")
    data = surface_api.post(
        URL, ask(member, context="health", consentedCategories=["medical"]), format="json"
    ).json()
    assert data["entries"] == []


def test_anonymous_is_401(api, member, remembered) -> None:
    response = api.post(URL, ask(member), format="json")
    assert response.status_code == 401
    assert recall_events() == []


def test_another_tenants_member_is_404(surface_api, foreign_member) -> None:
    response = surface_api.post(URL, ask(foreign_member), format="json")
    assert response.status_code == 404, response.content
    assert recall_events() == []


def test_another_tenants_surface_is_404(foreign_surface_token, member, remembered) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign_surface_token}")
    response = client.post(URL, ask(member), format="json")
    assert response.status_code == 404, response.content


def test_a_member_cannot_recall_another_member(member_api, other_member, member) -> None:
    response = member_api.post(URL, ask(other_member), format="json")
    assert response.status_code == 404, response.content


def test_an_operator_is_404(make_operator, member, remembered) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(make_operator("support"))
    response = client.post(URL, ask(member), format="json")
    assert response.status_code == 404, response.content


def test_the_admin_surface_is_403(surface_api, member, remembered) -> None:
    response = surface_api.post(URL, ask(member, surface="admin"), format="json")
    assert response.status_code == 403, response.content
    assert recall_events() == []


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"surface": "desk"}, "surface"),
        ({"surface": None}, "surface"),
        ({"context": "gossip"}, "context"),
        ({"limit": -1}, "limit"),
        ({"destinationTier": "moon"}, "destinationTier"),
        ({"scope": {"kind": "galaxy"}}, "scope"),
        ({"scope": {"kind": "session"}}, "scope"),
        ({"scope": {"kind": "profile", "userId": "00000000-0000-0000-0000-000000000000"}}, "scope"),
        ({"scope": None, "scopeKey": "profile"}, "scopeKey"),
        ({"scope": {"kind": "profile", "colour": "blue"}}, "scope"),
        ({"scope": {"kind": "profile", "sessionId": "s1"}}, "scope"),
        ({"query": None}, "query"),
        ({"runId": "not-a-uuid"}, "runId"),
    ],
)
def test_bad_input_is_400_naming_the_field(surface_api, member, remembered, bad, field) -> None:
    response = surface_api.post(URL, ask(member, **bad), format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    assert field in [e["field"] for e in response.json()["errors"]]
    assert recall_events() == []


def test_scope_key_form_and_session_reach(surface_api, member) -> None:
    grant_storage(member)
    ids = {"userId": str(member.public_id), "sessionId": "s1"}
    memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(member, "We talk about coffee today", kind="session", identifiers=ids),
    )
    memory_write(
        principal=as_member(member),
        member=member,
        draft=draft(
            member,
            "Other coffee session",
            kind="session",
            identifiers={**ids, "sessionId": "s2"},
        ),
    )
    data = surface_api.post(
        URL, ask(member, scope=None, scopeKey=f"session:{member.public_id}:s1"), format="json"
    ).json()
    assert [e["entry"]["body"] for e in data["entries"]] == ["We talk about coffee today"]


def test_recall_runs_in_a_bounded_number_of_queries(
    surface_api, member, remembered, django_assert_max_num_queries
) -> None:
    # The token, the member, the consent ledger, the member's snapshot (built for this
    # recall inside the test's transaction), the count of rows not active, its read-back,
    # the audit INSERT, its event's outbox INSERT (events.outbox), the bump and the
    # history, and the savepoint's two statements around those: 12.
    with django_assert_max_num_queries(12):
        response = surface_api.post(URL, ask(member), format="json")
    assert response.status_code == 200


def test_the_member_page_shows_where_and_when_an_entry_was_recalled(
    surface_api, member, member_api, remembered
) -> None:
    page = member_api.get(f"/memory/{remembered[0]}/").content.decode()
    assert "No recalls recorded yet." in page
    assert surface_api.post(URL, ask(member), format="json").status_code == 200
    page = member_api.get(f"/memory/{remembered[0]}/").content.decode()
    assert "No recalls recorded yet." not in page
    assert "by the assistant" in page


def _profile_ask() -> Any:
    from memory.recall.service import RecallAsk

    return RecallAsk(
        scope_kind="profile",
        scope_identifiers={},
        scope_key=None,
        query=QUERY,
        surface="assistant",
        context="general",
        destination_tier="local",
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_recalls_of_the_same_entries_all_count(require_postgres, member) -> None:
    from memory.recall.service import recall_resolve

    grant_storage(member)
    for body in ["I like my coffee black", "Coffee with oat milk", "Decaf coffee after six"]:
        memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    ask_ = _profile_ask()

    def recall_some() -> None:
        for _ in range(5):
            recall_resolve(principal=as_member(member), member=member, ask=ask_)

    assert run_together(recall_some, threads=4) == []
    counts = MemoryEntry.objects.filter(member=member, is_current=True).values_list(
        "reference_count", flat=True
    )
    # Every one of the 20 recalls surfaced all three entries, and no bump was lost.
    assert sorted(counts) == [20, 20, 20]
    assert RecallEvent.objects.filter(member=member).count() == 60


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_recalls_record_is_one_statement(require_postgres, member) -> None:
    # The audit event, the usage counters and the history: one statement, atomic on its
    # own, so no BEGIN and COMMIT round trips either.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.recall.service import recall_resolve

    grant_storage(member)
    for body in ["I like my coffee black", "Coffee with oat milk"]:
        memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    ask_ = _profile_ask()
    with CaptureQueriesContext(connection) as seen:
        recall_resolve(principal=as_member(member), member=member, ask=ask_)
    writes = [
        q["sql"]
        for q in seen.captured_queries
        if q["sql"].startswith(("WITH", "INSERT", "UPDATE", "DELETE"))
    ]
    assert len(writes) == 1
    assert "UPDATE memory_memoryentry" in writes[0]
    assert "INSERT INTO memory_recallevent" in writes[0]
    assert "governance_auditevent" in writes[0]
    assert AuditEvent.objects.filter(action=AUDIT_ACTION).count() == 1
    assert sorted(
        MemoryEntry.objects.filter(member=member, is_current=True).values_list(
            "reference_count", flat=True
        )
    ) == [1, 1]
    assert RecallEvent.objects.filter(member=member).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_workers_first_recall_of_a_member_builds_its_snapshot_on_the_spot(
    require_postgres, member, monkeypatch, settings
) -> None:
    from memory.recall import snapshot as recall_snapshot
    from memory.recall.service import recall_resolve

    settings.IRIS_RECALL_SEMANTIC = "jaccard"  # the snapshot is held per ranker
    grant_storage(member)
    for body in ["I like my coffee black", "Coffee with oat milk"]:
        memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    from_snapshot: list[int] = []
    real = recall_snapshot.resolve_cached

    def counted(*args: Any, **kwargs: Any) -> Any:
        from_snapshot.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(recall_snapshot, "resolve_cached", counted)

    def ids() -> list[str]:
        wire = recall_resolve(principal=as_member(member), member=member, ask=_profile_ask())
        return [item["entry"]["id"] for item in wire["entries"]]

    assert not recall_snapshot.held(member, "jaccard")
    first = ids()
    assert len(first) == 2
    assert from_snapshot == [1] and recall_snapshot.held(member, "jaccard")
    built = recall_snapshot._CACHE[recall_snapshot._key(member, "jaccard")].built
    assert ids() == first and from_snapshot == [1, 1]
    assert recall_snapshot._CACHE[recall_snapshot._key(member, "jaccard")].built == built
    settings.IRIS_RECALL_SNAPSHOT_SECONDS = 0  # due for a rebuild: rebuilt, same answer
    assert ids() == first and from_snapshot == [1, 1, 1]
    assert recall_snapshot._CACHE[recall_snapshot._key(member, "jaccard")].built > built


_BUMP_AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (None, _BUMP_AT),  # never referenced
        (_BUMP_AT - timedelta(minutes=5), _BUMP_AT),
        (_BUMP_AT - timedelta(seconds=61), _BUMP_AT),
        (_BUMP_AT - timedelta(seconds=60), _BUMP_AT - timedelta(seconds=60)),  # within a minute
        (_BUMP_AT - timedelta(seconds=1), _BUMP_AT - timedelta(seconds=1)),
        (_BUMP_AT + timedelta(seconds=30), _BUMP_AT + timedelta(seconds=30)),  # never moves back
    ],
)
def test_a_bump_counts_every_recall_and_moves_the_time_to_the_minute(
    member, remembered, stored, expected
) -> None:
    MemoryEntry.objects.filter(member=member).update(reference_count=3, last_referenced_at=stored)
    current = MemoryEntry.objects.get(entry_id=remembered[0], is_current=True)
    _bump_references(member, [current.revision_id], _BUMP_AT)
    current.refresh_from_db()
    assert current.reference_count == 4
    assert current.last_referenced_at == expected
    others = MemoryEntry.objects.filter(entry_id__in=remembered[1:], is_current=True)
    assert {(e.reference_count, e.last_referenced_at) for e in others} == {(3, stored)}


@pytest.fixture
def vacuumed(require_postgres, transactional_db) -> None:
    # Earlier tests leave dead row versions behind (autovacuum may be off), and whether a
    # page has room for a new version would otherwise depend on which tests ran first.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM memory_memoryentry")


def test_every_bump_adds_no_index_entry(vacuumed, member, remembered) -> None:
    # HOT: the new row version stays on its page and no index gets an entry for it. That
    # needs room on the page (migration 0007) and no indexed column changed, whether the
    # last referenced time moves or not: no index holds it (migration 0013). Each bump is
    # its own transaction, as each recall is, so the versions it leaves dead can be pruned.
    from django.db import connection, transaction

    revisions = list(
        MemoryEntry.objects.filter(member=member, is_current=True).values_list(
            "revision_id", flat=True
        )
    )

    def hot_updates() -> int:
        # The counter covers the current transaction only.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_stat_get_xact_tuples_hot_updated('memory_memoryentry'::regclass)"
            )
            return int(cursor.fetchone()[0])

    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_memoryentry'")
        assert cursor.fetchone()[0] == ["fillfactor=85"]
    # Four rounds, more versions than a page's free space holds unless the dead are pruned.
    bumps = []
    for start in (_BUMP_AT + timedelta(minutes=10 * n) for n in range(4)):
        bumps += [
            (start, start),  # the time moves (from none, the first time)
            (start + timedelta(seconds=30), start),  # within the minute: it stays
            (start + timedelta(minutes=5), start + timedelta(minutes=5)),  # it moves again
        ]
    for count, (at, expected) in enumerate(bumps, start=1):
        with transaction.atomic():
            before = hot_updates()
            _bump_references(member, revisions, at)
            assert hot_updates() - before == len(revisions) == 3
        counts = MemoryEntry.objects.filter(member=member, is_current=True)
        assert {(e.reference_count, e.last_referenced_at) for e in counts} == {(count, expected)}
