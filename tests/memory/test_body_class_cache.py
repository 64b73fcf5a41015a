"""recall_service.body_class: the egress gate's class of a body, screened once per text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance import classify
from governance.classify import Classification, classify_text
from memory.recall import service as recall_service

SECRET_BODY = "my api token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch):
    monkeypatch.setattr(recall_service, "_BODY_CLASSES", {})


def test_a_credential_is_secret_and_plain_text_personal() -> None:
    assert classify_text(SECRET_BODY) is Classification.SECRET  # the screen's own word
    assert recall_service.body_class(SECRET_BODY) is Classification.SECRET
    assert recall_service.body_class("I like tea in Lisbon") is Classification.PERSONAL


def test_each_text_is_screened_once(monkeypatch) -> None:
    screened: list[str] = []
    real = classify.contains_secret

    def counting(text: str) -> bool:
        screened.append(text)
        return real(text)

    monkeypatch.setattr(classify, "contains_secret", counting)
    for _ in range(3):
        recall_service.body_class("I like tea")
        recall_service.body_class(SECRET_BODY)
    assert screened == ["I like tea", SECRET_BODY]


def test_the_cache_holds_digests_not_text_and_stays_bounded(monkeypatch) -> None:
    monkeypatch.setattr(recall_service, "BODY_CLASSES_MAX", 4)
    for i in range(10):
        recall_service.body_class(f"note {i}")
    cache = recall_service._BODY_CLASSES  # noqa: SLF001
    assert 0 < len(cache) <= 4
    assert all(isinstance(k, bytes) and len(k) == 16 for k in cache)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120) | st.sampled_from([SECRET_BODY, "password: hunter2", "tea"]))
def test_the_cached_class_is_the_screens(text: str) -> None:
    assert recall_service.body_class(text) is classify_text(text)
    assert recall_service.body_class(text) is classify_text(text)  # and again, from the cache
