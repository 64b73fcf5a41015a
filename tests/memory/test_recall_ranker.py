"""Which ranker recall uses: hybrid by default, jaccard and BM25 by setting, and BM25 when
the embedding model cannot load, which `doctor` and `/api/v1/health` then say."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from governance.models import AuditEvent
from memory.recall import service as recall_service
from memory.recall.models import MemoryEmbedding
from memory.recall.ranking import embedding, semantic
from memory.services import memory_write
from tests.conftest import need_service
from tests.factories import as_member, draft, grant_storage

pytestmark = pytest.mark.django_db


@pytest.fixture
def model() -> None:
    need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")


@pytest.fixture
def model_missing(monkeypatch, tmp_path: Path) -> None:
    """This process as if the model package had no files: the loaded encoder is set aside
    for the test (and put back after it, so the model still loads once per process)."""
    empty = tmp_path / "model"
    empty.mkdir()
    monkeypatch.setattr(embedding, "_default", None)
    monkeypatch.setattr(embedding, "_load_failure", None)
    monkeypatch.setattr(embedding, "model_dir", lambda: empty)
    monkeypatch.setattr(recall_service, "_logged_fallback", set())


@pytest.fixture
def model_broken(monkeypatch) -> list[int]:
    """The files are there but loading them fails; returns a list counting load attempts."""
    attempts: list[int] = []

    def fail(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        raise OSError("weights truncated")

    monkeypatch.setattr(embedding, "_default", None)
    monkeypatch.setattr(embedding, "_load_failure", None)
    monkeypatch.setattr(embedding, "available", lambda: True)
    monkeypatch.setattr(embedding.Encoder, "load", classmethod(fail))
    monkeypatch.setattr(recall_service, "_logged_fallback", set())
    return attempts


def test_the_default_ranker_is_hybrid(settings, monkeypatch, model) -> None:
    del settings.IRIS_RECALL_SEMANTIC
    monkeypatch.delenv("IRIS_RECALL_SEMANTIC", raising=False)
    assert recall_service.ranker_name() == "hybrid"
    name, prepare = recall_service.ranker()
    assert (name, prepare) == ("hybrid", semantic.hybrid)


def test_the_settings_default_is_hybrid() -> None:
    from iris_site import settings as production

    source = Path(production.__file__).read_text()
    assert 'IRIS_RECALL_SEMANTIC = env_str("IRIS_RECALL_SEMANTIC", "hybrid")' in source


@pytest.mark.parametrize(
    ("setting", "name", "ranker"),
    [
        ("jaccard", "jaccard", semantic.jaccard),
        ("lexical", "lexical", semantic.lexical),
        (" LEXICAL ", "lexical", semantic.lexical),
        ("hybrid", "hybrid", semantic.hybrid),
    ],
)
def test_the_setting_selects_the_ranker(settings, model, setting, name, ranker) -> None:
    settings.IRIS_RECALL_SEMANTIC = setting
    assert recall_service.ranker() == (name, ranker)
    state = recall_service.ranker_state()
    assert (state.configured, state.active, state.fallback) == (name, name, False)


def test_the_environment_selects_the_ranker_when_settings_do_not(settings, monkeypatch) -> None:
    settings.IRIS_RECALL_SEMANTIC = ""
    monkeypatch.setenv("IRIS_RECALL_SEMANTIC", "jaccard")
    assert recall_service.ranker() == ("jaccard", semantic.jaccard)


def test_an_unknown_ranker_is_refused_not_replaced(settings) -> None:
    settings.IRIS_RECALL_SEMANTIC = "vector"
    with pytest.raises(ValueError, match="IRIS_RECALL_SEMANTIC must be one of"):
        recall_service.ranker()


def test_without_the_model_recall_falls_back_to_bm25(settings, model_missing, caplog) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    state = recall_service.ranker_state()
    assert (state.configured, state.active, state.fallback) == ("hybrid", "lexical", True)
    assert state.reason is not None and "model files missing" in state.reason
    assert recall_service.ranker() == ("lexical", semantic.lexical)
    assert "recall ranks with lexical" in caplog.text
    # Logged once per reason, not on every recall.
    caplog.clear()
    recall_service.ranker_state()
    assert "recall ranks with" not in caplog.text


def test_a_model_that_fails_to_load_is_tried_once_per_process(settings, model_broken) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    first = recall_service.ranker_state()
    second = recall_service.ranker_state()
    assert first.active == second.active == "lexical"
    assert first.reason is not None and "OSError: weights truncated" in first.reason
    assert second.reason == first.reason
    assert model_broken == [1]
    assert recall_service.warm_up() is False


def test_a_jaccard_deployment_never_loads_the_model(settings, model_broken) -> None:
    settings.IRIS_RECALL_SEMANTIC = "jaccard"
    assert recall_service.ranker_state().fallback is False
    assert model_broken == []


def test_writes_and_recalls_work_in_the_fallback(
    settings, model_missing, member, surface_api
) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    grant_storage(member)
    for body in ("I drink green tea every morning", "My sister plays the cello"):
        memory_write(principal=as_member(member), member=member, draft=draft(member, body))
    assert not MemoryEmbedding.objects.exists()  # no vector without the model
    response = surface_api.post(
        "/api/v1/recall",
        {
            "userId": str(member.public_id),
            "scope": {"kind": "profile"},
            "query": "what tea do I drink",
            "surface": "assistant",
            "context": "general",
            "destinationTier": "local",
            "limit": 1,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    [top] = response.json()["entries"]
    assert "green tea" in top["entry"]["body"]
    (event,) = AuditEvent.objects.filter(action=recall_service.AUDIT_ACTION)
    assert event.payload["ranker"] == "lexical"


def doctor() -> str:
    out = io.StringIO()
    call_command("doctor", stdout=out)
    return out.getvalue()


def test_doctor_says_recall_falls_back_and_why(settings, model_missing) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    out = doctor()
    assert "recall ranking: hybrid is configured but the embedding model cannot load" in out
    assert "model files missing" in out and "ranks with lexical (BM25)" in out
    assert "[memory.W001]" in out
    assert out.strip().splitlines()[-1] == "doctor: working, with warnings: recall ranking"


def test_doctor_is_quiet_about_ranking_when_the_model_loads(settings, model) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    out = doctor()
    assert "recall ranking" not in out
    assert out.strip().splitlines()[-1] == "doctor: all good"


def test_health_says_recall_falls_back_in_words_and_a_field(settings, api, model_missing) -> None:
    settings.IRIS_RECALL_SEMANTIC = "hybrid"
    response = api.get("/api/v1/health")
    # Ranking with BM25 is working, not down: a load balancer keeps the node.
    assert response.status_code == 200
    recall = response.json()["recall"]
    assert recall["fallback"] is True
    assert (recall["ranker"], recall["configuredRanker"]) == ("lexical", "hybrid")
    assert "cannot load" in recall["detail"] and "BM25" in recall["detail"]
    # The reason may name paths on disk: doctor gives it, the anonymous endpoint does not.
    assert "model files missing" not in recall["detail"]


@pytest.mark.parametrize("setting", ["hybrid", "jaccard"])
def test_health_names_the_ranker_in_use(settings, api, setting) -> None:
    if setting == "hybrid":
        need_service(embedding.available(), f"embedding model: {embedding.unavailable_reason()}")
    settings.IRIS_RECALL_SEMANTIC = setting
    recall = api.get("/api/v1/health").json()["recall"]
    assert recall == {
        "ranker": setting,
        "configuredRanker": setting,
        "fallback": False,
        "detail": f"Recall ranks with {setting}, as configured.",
    }
