"""With the hybrid ranker on, writes store a vector per revision and recall ranks by it."""

from __future__ import annotations

import pytest

from memory.recall.models import MemoryEmbedding
from memory.recall.ranking import embedding
from memory.services import memory_write
from tests.conftest import need_service
from tests.factories import as_member, draft, grant_storage

pytestmark = pytest.mark.django_db


@pytest.fixture
def hybrid(settings):
    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    settings.IRIS_RECALL_SEMANTIC = "hybrid"


def test_each_revision_gets_its_vector_at_write_time(hybrid, member) -> None:
    grant_storage(member)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "I moved to Lisbon")
    ).entry
    stored = MemoryEmbedding.objects.get(revision_id=entry.revision_id)
    vector = embedding.from_bytes(bytes(stored.vector))
    expected = embedding.default_encoder().encode_one("I moved to Lisbon")
    assert float(vector @ expected) > 0.9999


def test_a_write_encodes_its_body_before_taking_the_members_lock(
    hybrid, member, monkeypatch
) -> None:
    """One member's writers took turns at the encoder while it ran under the lock."""
    from memory.recall import service
    from memory.services import write

    grant_storage(member)
    order: list[str] = []
    encode_ahead, share_member = service.encode_ahead, write._share_member

    def encoding(body: str) -> bytes | None:
        order.append("encode")
        return encode_ahead(body)

    def locking(m):  # type: ignore[no-untyped-def]
        order.append("lock")
        share_member(m)

    monkeypatch.setattr(service, "encode_ahead", encoding)
    monkeypatch.setattr(write, "_share_member", locking)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "I moved to Braga")
    ).entry
    assert order == ["encode", "lock"]
    # The bits the write stored are those the ranker computes for a body without a vector.
    stored = bytes(MemoryEmbedding.objects.get(revision_id=entry.revision_id).vector)
    fresh = embedding.default_encoder().encode_one("I moved to Braga", cache=False)
    assert stored == embedding.to_bytes(fresh)


def test_without_the_hybrid_ranker_a_write_encodes_nothing(member, settings, monkeypatch) -> None:
    from memory.recall.ranking import embedding as ranking_embedding

    settings.IRIS_RECALL_SEMANTIC = "lexical"
    grant_storage(member)

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the encoder ran")

    monkeypatch.setattr(ranking_embedding, "default_encoder", refuse)
    entry = memory_write(
        principal=as_member(member), member=member, draft=draft(member, "I moved to Faro")
    ).entry
    assert not MemoryEmbedding.objects.filter(revision_id=entry.revision_id).exists()


def test_the_revision_and_its_vector_are_written_together(hybrid, member) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    grant_storage(member)
    with CaptureQueriesContext(connection) as captured:
        entry = memory_write(
            principal=as_member(member), member=member, draft=draft(member, "I moved to Porto")
        ).entry
    stored = MemoryEmbedding.objects.get(revision_id=entry.revision_id)
    assert bytes(stored.vector) == embedding.to_bytes(
        embedding.default_encoder().encode_one("I moved to Porto", cache=False)
    )
    writes = [q["sql"] for q in captured.captured_queries if "memory_memoryembedding" in q["sql"]]
    if connection.vendor == "postgresql":
        # One statement, one round trip, for the revision and its vector.
        [statement] = writes
        assert "INSERT INTO memory_memoryentry" in statement
    else:
        assert len(writes) == 1


def test_hybrid_recall_finds_a_paraphrased_memory_over_the_api(hybrid, member, surface_api) -> None:
    _paraphrased_recall(member, surface_api)


@pytest.mark.django_db(transaction=True)
def test_hybrid_recall_from_the_worker_snapshot_with_the_query_embedded_alongside(
    require_postgres, hybrid, member, surface_api
) -> None:
    from memory.recall import snapshot as recall_snapshot

    _paraphrased_recall(member, surface_api)
    [key] = recall_snapshot._CACHE  # committed rows, no transaction: the snapshot path
    assert key[2:] == (member.pk, "hybrid")
    assert recall_snapshot._CACHE[key].has_vector[:2].all()
    _paraphrased_recall(member, surface_api, written=True)


def _paraphrased_recall(member, surface_api, *, written: bool = False) -> None:
    if not written:
        grant_storage(member)
        for body in ("I relocated to Lisbon for a bakery job", "My sister plays the cello"):
            memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    response = surface_api.post(
        "/api/v1/recall",
        {
            "userId": str(member.public_id),
            "scope": {"kind": "profile"},
            "query": "which city did I move to for work",
            "surface": "assistant",
            "context": "general",
            "destinationTier": "local",
            "limit": 1,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    [top] = response.json()["entries"]
    assert "Lisbon" in top["entry"]["body"]


def test_the_model_is_warmed_when_the_app_starts_with_hybrid_on(settings, monkeypatch) -> None:
    from memory.recall.service import warm_up

    settings.IRIS_RECALL_SEMANTIC = "lexical"
    assert warm_up() is False
    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    monkeypatch.setattr(embedding, "_ONE_THREAD", None)
    assert warm_up() is True
    assert embedding._default is not None
    # So is the BLAS thread controller that a worker's first hybrid recall scores under.
    assert embedding._ONE_THREAD is not None


def test_the_query_is_embedded_ahead_only_for_a_well_formed_recall(
    hybrid, member, monkeypatch
) -> None:
    from governance.errors import Forbidden, ValidationFailed
    from memory.recall.service import RecallAsk, recall_resolve

    started: list[str] = []
    real = embedding.prefetch
    monkeypatch.setattr(embedding, "prefetch", lambda text: started.append(text) or real(text))
    grant_storage(member)

    def ask(**changes: object) -> RecallAsk:
        fields = {
            "scope_kind": "profile",
            "scope_identifiers": {},
            "scope_key": None,
            "query": "where do I live",
            "surface": "assistant",
            "context": "general",
            "destination_tier": "local",
            **changes,
        }
        return RecallAsk(**fields)

    with pytest.raises(Forbidden):
        recall_resolve(principal=as_member(member), member=member, ask=ask(surface="admin"))
    with pytest.raises(ValidationFailed):
        recall_resolve(principal=as_member(member), member=member, ask=ask(scope_key="nope"))
    assert started == []
    recall_resolve(principal=as_member(member), member=member, ask=ask())
    assert started == ["where do I live"]
