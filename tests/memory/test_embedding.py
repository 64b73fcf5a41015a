"""The numpy all-MiniLM-L6-v2 encoder (memory/embedding.py).

Tests that need the model skip with a reason when the `embeddings` extra or the model
package is missing, and fail instead under IRIS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from memory import embedding
from tests.conftest import need_service

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.fixture
def numpy() -> Any:
    need_service(
        importlib.util.find_spec("numpy") is not None,
        "numpy is not installed (the `embeddings` extra)",
    )
    import numpy

    return numpy


@pytest.fixture(scope="module")
def encoder() -> embedding.Encoder:
    reason = embedding.unavailable_reason()
    need_service(reason is None, f"embedding model unavailable: {reason}")
    model = embedding.Encoder.load(cache_size=4)
    model.warm_up()
    return model


# -- without the model -----------------------------------------------------------------


def test_unavailable_reason_names_the_missing_model_and_how_to_install(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == embedding.MODEL_PACKAGE else real(name, *args)

    monkeypatch.setattr(embedding.importlib.util, "find_spec", find_spec)
    reason = embedding.unavailable_reason()
    assert reason is not None
    assert embedding.MODEL_PACKAGE in reason
    assert "--no-deps" in reason
    assert embedding.available() is False
    with pytest.raises(embedding.EmbeddingUnavailable, match=embedding.MODEL_PACKAGE):
        embedding.Encoder.load()


def test_unavailable_reason_names_missing_python_packages(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "tokenizers" else real(name, *args)

    monkeypatch.setattr(embedding.importlib.util, "find_spec", find_spec)
    reason = embedding.unavailable_reason()
    assert reason is not None and "tokenizers" in reason


def test_locating_the_model_does_not_import_its_package() -> None:
    was_loaded = embedding.MODEL_PACKAGE in sys.modules
    embedding.model_dir()
    embedding.unavailable_reason()
    assert (embedding.MODEL_PACKAGE in sys.modules) is was_loaded


def test_vector_bytes_round_trip_exactly(numpy: Any) -> None:
    vector = numpy.linspace(-1, 1, embedding.DIMENSION, dtype=numpy.float32)
    data = embedding.to_bytes(vector)
    assert len(data) == embedding.VECTOR_BYTES == 1536
    assert data[:4] == numpy.float32(-1.0).tobytes() == b"\x00\x00\x80\xbf"  # little-endian
    back = embedding.from_bytes(data)
    assert back.dtype == numpy.float32 and back.shape == (embedding.DIMENSION,)
    assert back.tobytes() == vector.tobytes()
    assert embedding.from_bytes(memoryview(data)).tobytes() == data


@pytest.mark.parametrize("size", [0, 383, 385, 768])
def test_vector_of_the_wrong_size_is_refused(numpy: Any, size: int) -> None:
    with pytest.raises(ValueError):
        embedding.to_bytes(numpy.zeros(size, dtype=numpy.float32))
    with pytest.raises(ValueError):
        embedding.from_bytes(b"\0" * (size * 4))


def test_non_finite_vector_is_refused(numpy: Any) -> None:
    vector = numpy.zeros(embedding.DIMENSION, dtype=numpy.float32)
    vector[3] = numpy.nan
    with pytest.raises(ValueError, match="NaN"):
        embedding.to_bytes(vector)


def test_erf_approximation_is_float32_accurate(numpy: Any) -> None:
    xs = numpy.linspace(-6, 6, 20001, dtype=numpy.float32)
    expected = numpy.array([math.erf(float(x)) for x in xs])
    assert numpy.abs(embedding.erf(xs).astype(numpy.float64) - expected).max() < 1e-6


# -- with the model --------------------------------------------------------------------


def test_matches_sentence_transformers_reference_vectors(encoder: embedding.Encoder) -> None:
    """Vectors made by sentence-transformers + torch 2.13.0 (data/make_minilm_reference.py),
    rounded to 6 decimals: ours agree to float32 precision, one by one and in a batch."""
    import numpy as np

    cases = json.loads(REFERENCE.read_text(encoding="utf-8"))["cases"]
    texts = [c["text"] for c in cases]
    expected = np.array([c["vector"] for c in cases], dtype=np.float64)
    batch = encoder.encode(texts).astype(np.float64)
    single = np.stack([encoder.encode_one(t, cache=False) for t in texts]).astype(np.float64)
    for ours in (batch, single):
        cosine = (ours * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
        assert cosine.min() >= 0.9999
        assert np.abs(ours - expected).max() < 5e-6
    assert [encoder.token_count(t) for t in texts] == [c["tokens"] for c in cases]


def test_encode_returns_unit_float32_rows_in_input_order(encoder: embedding.Encoder) -> None:
    import numpy as np

    texts = ["a longer sentence about moving to Lisbon for work", "hi", "", "coffee with oat milk"]
    vectors = encoder.encode(texts)
    assert vectors.shape == (4, embedding.DIMENSION) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reversed_ = encoder.encode(texts[::-1])[::-1]
    assert np.allclose(vectors, reversed_, atol=1e-6)
    assert encoder.encode([]).shape == (0, embedding.DIMENSION)


def test_padding_in_a_batch_does_not_change_a_vector(encoder: embedding.Encoder) -> None:
    import numpy as np

    texts = ["short", "a much longer text " * 10, "medium length sentence here"]
    batch = encoder.encode(texts, batch_size=3)
    for text, row in zip(texts, batch, strict=True):
        assert np.allclose(row, encoder.encode_one(text, cache=False), atol=1e-6)


def test_similar_meanings_are_closer_than_unrelated_ones(encoder: embedding.Encoder) -> None:
    memory = encoder.encode_one("I moved to Lisbon in March for a job at a bakery.")
    query = encoder.encode_one("Which city did I relocate to for work?")
    unrelated = encoder.encode_one("My cat sleeps on the sofa all afternoon.")
    assert float(memory @ query) > float(memory @ unrelated) + 0.2


def test_single_encode_is_bit_for_bit_repeatable(encoder: embedding.Encoder) -> None:
    first = encoder.encode_one("when is my sister's birthday?", cache=False)
    second = encoder.encode_one("when is my sister's birthday?", cache=False)
    assert first.tobytes() == second.tobytes()


def test_query_cache_is_lru_keyed_by_digest_and_read_only(encoder: embedding.Encoder) -> None:
    encoder.clear_cache()
    first = encoder.encode_one("secret plans for Friday")
    assert encoder.encode_one("secret plans for Friday") is first
    assert not first.flags.writeable
    # keys are digests: the text itself is not kept (forgetting must be complete)
    assert all(isinstance(k, bytes) and len(k) == 32 for k in encoder._cache)
    assert all(b"secret" not in k for k in encoder._cache)
    for i in range(10):
        encoder.encode_one(f"filler {i}")
    assert encoder.cache_len == 4  # capacity of the fixture's encoder
    assert encoder.encode_one("secret plans for Friday") is not first  # evicted
    encoder.encode_one("not cached", cache=False)
    encoder.clear_cache()
    assert encoder.cache_len == 0


def test_long_text_is_truncated_to_256_tokens(encoder: embedding.Encoder) -> None:
    import numpy as np

    long_text = " ".join(f"word{i}" for i in range(600))
    assert encoder.token_count(long_text) == embedding.MAX_TOKENS
    # tokens past the limit cannot change the vector
    longer = long_text + " completely different ending about dragons"
    assert np.array_equal(
        encoder.encode_one(long_text, cache=False), encoder.encode_one(longer, cache=False)
    )


def test_stored_vector_round_trips(encoder: embedding.Encoder) -> None:
    vector = encoder.encode(["I take the 7:42 train to work."])[0]
    assert embedding.from_bytes(embedding.to_bytes(vector)).tobytes() == vector.tobytes()


def test_default_encoder_is_loaded_once(encoder: embedding.Encoder) -> None:
    assert embedding.default_encoder() is embedding.default_encoder()


def test_blas_thread_count_changes_nothing_that_matters(encoder: embedding.Encoder) -> None:
    """A given thread count gives the same bits every time (recall is deterministic), and
    another thread count the same vector to float32 rounding. Bit equality across thread
    counts depends on the CPU's OpenBLAS kernel (it held on an AVX-512 Xeon, not on an AMD
    EPYC), so both paths run on one thread by default."""
    import numpy as np

    two = embedding.Encoder.load(query_threads=2, batch_threads=2, cache_size=0)
    one = embedding.Encoder.load(query_threads=1, batch_threads=1, cache_size=0)
    text = "which city did I relocate to for work?"
    texts = ["short", "a somewhat longer sentence to pad the batch with " * 3]
    for enc in (one, two):
        assert enc.encode_one(text).tobytes() == enc.encode_one(text).tobytes()
        assert enc.encode(texts).tobytes() == enc.encode(texts).tobytes()
    np.testing.assert_allclose(one.encode_one(text), two.encode_one(text), rtol=0, atol=2e-6)
    np.testing.assert_allclose(one.encode(texts), two.encode(texts), rtol=0, atol=2e-6)
