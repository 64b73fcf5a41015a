"""The all-MiniLM-L6-v2 encoder (memory/recall/ranking/embedding.py), on both backends:
numpy and ONNX Runtime (embedding_onnx.py). Every test taking `encoder` runs once per
backend, and both are held to the same tolerance against sentence-transformers' reference vectors.

Tests that need the model skip with a reason when the `embeddings` extra (which includes
onnxruntime and onnx) or the model package is missing, and fail instead under
IRIS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from memory.recall.ranking import embedding
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


def need_model(backend: str = "numpy") -> None:
    reason = embedding.unavailable_reason()
    need_service(reason is None, f"embedding model unavailable: {reason}")
    if backend != "numpy":
        need_service(
            embedding.onnx_available(),
            "onnxruntime or onnx is not installed (the `embeddings` extra)",
        )


@pytest.fixture(scope="module", params=["numpy", "onnx"])
def encoder(request: pytest.FixtureRequest) -> embedding.Encoder:
    need_model(request.param)
    model = embedding.Encoder.load(cache_size=4, backend=request.param)
    assert model.backend == request.param
    model.warm_up()
    return model


@pytest.fixture(scope="module")
def int8_encoder() -> embedding.Encoder:
    need_model("onnx-int8")
    model = embedding.Encoder.load(cache_size=0, backend="onnx-int8")
    model.warm_up()
    return model


# -- without the model -----------------------------------------------------------------


def test_unavailable_reason_names_the_missing_model_and_how_to_install(monkeypatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == embedding.MODEL_PACKAGE else real(name, *args)

    monkeypatch.setattr(embedding.importlib.util, "find_spec", find_spec)
    reason = embedding.unavailable_reason()
    assert reason is not None
    assert embedding.MODEL_PACKAGE in reason
    assert "make install" in reason
    assert embedding.available() is False
    with pytest.raises(embedding.EmbeddingUnavailable, match=embedding.MODEL_PACKAGE):
        embedding.Encoder.load()


def test_unavailable_reason_names_missing_python_packages(monkeypatch) -> None:
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


@pytest.mark.parametrize(
    ("onnx", "int8_dot", "chosen"),
    [
        (True, True, "onnx-int8"),
        (True, False, "onnx"),
        (False, True, "numpy"),
        (False, False, "numpy"),
    ],
)
def test_the_default_backend_follows_the_install_and_the_cpu(
    monkeypatch, onnx: bool, int8_dot: bool, chosen: str
) -> None:
    monkeypatch.delenv(embedding.BACKEND_ENV, raising=False)
    monkeypatch.setattr(embedding, "onnx_available", lambda: onnx)
    monkeypatch.setattr(embedding, "cpu_has_int8_dot", lambda: int8_dot)
    assert embedding.choose_backend() == chosen


@pytest.mark.parametrize(
    ("flags", "found"),
    [
        ("fpu avx2 fma avx512f avx512_vnni", True),
        ("fpu avx2 avx_vnni", True),
        ("fpu avx2 fma avx512f avx512bw", False),
        ("", False),
    ],
)
def test_int8_dot_products_are_read_off_the_cpu_flags(tmp_path, flags: str, found: bool) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\n")
    assert embedding.cpu_has_int8_dot(str(info)) is found


def test_no_cpu_information_means_float32(tmp_path) -> None:
    assert embedding.cpu_has_int8_dot(str(tmp_path / "absent")) is False


def test_the_environment_can_force_a_backend(monkeypatch) -> None:
    monkeypatch.setenv(embedding.BACKEND_ENV, "numpy")
    assert embedding.choose_backend() == "numpy"
    if embedding.onnx_available():
        assert embedding.choose_backend("onnx-int8") == "onnx-int8"  # the argument wins
    monkeypatch.setenv(embedding.BACKEND_ENV, "torch")
    with pytest.raises(embedding.EmbeddingUnavailable, match="IRIS_EMBEDDING_BACKEND"):
        embedding.choose_backend()


def test_asking_for_onnx_without_onnxruntime_says_what_to_install(monkeypatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "onnxruntime" else real(name, *args)

    monkeypatch.setattr(embedding.importlib.util, "find_spec", find_spec)
    monkeypatch.delenv(embedding.BACKEND_ENV, raising=False)
    assert embedding.onnx_available() is False
    assert embedding.choose_backend() == "numpy"  # the fallback
    with pytest.raises(embedding.EmbeddingUnavailable, match="onnxruntime"):
        embedding.choose_backend("onnx")


def test_importing_the_module_imports_no_heavy_package() -> None:
    """`memory.recall.ranking.embedding` must stay cheap to import (the base install imports it)."""
    import subprocess

    code = (
        "import sys, memory.recall.ranking.embedding; "
        "print(sorted({'numpy', 'onnx', 'onnxruntime', 'tokenizers'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "[]"


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
    """A given thread count (BLAS threads in numpy, intra-op threads in ONNX Runtime) gives
    the same bits every time (recall is deterministic), and another thread count the same
    vector to float32 rounding. Bit equality across thread
    counts depends on the CPU's OpenBLAS kernel (it held on an AVX-512 Xeon, not on an AMD
    EPYC), so both paths run on one thread by default."""
    import numpy as np

    two = embedding.Encoder.load(
        query_threads=2, batch_threads=2, cache_size=0, backend=encoder.backend
    )
    one = embedding.Encoder.load(
        query_threads=1, batch_threads=1, cache_size=0, backend=encoder.backend
    )
    text = "which city did I relocate to for work?"
    texts = ["short", "a somewhat longer sentence to pad the batch with " * 3]
    for enc in (one, two):
        assert enc.encode_one(text).tobytes() == enc.encode_one(text).tobytes()
        assert enc.encode(texts).tobytes() == enc.encode(texts).tobytes()
    np.testing.assert_allclose(one.encode_one(text), two.encode_one(text), rtol=0, atol=2e-6)
    np.testing.assert_allclose(one.encode(texts), two.encode(texts), rtol=0, atol=2e-6)


# -- ONNX Runtime specifics ------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_onnx_backend_starts_no_threads_and_survives_fork() -> None:
    """gunicorn --preload loads the encoder in the master and forks: a one-thread session
    must start no thread pool (a fork keeps only the calling thread), and the forked child
    must get the parent's bits."""
    need_model("onnx")
    import onnxruntime  # noqa: F401  (its import starts one idle thread of its own)

    before = _threads()
    enc = embedding.Encoder.load(backend="onnx", cache_size=0)
    text = "which city did I relocate to for work?"
    enc.encode_one(text)  # one-text path (a tokenizer batch would start its own pool)
    assert _threads() == before
    expected = enc.encode_one(text).tobytes()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = enc.encode_one(text).tobytes() == expected and _threads() == 1
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_failing_default_onnx_backend_falls_back_to_numpy(monkeypatch) -> None:
    need_model("onnx")
    from memory.recall.ranking import embedding_onnx

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no kernel for this CPU")

    monkeypatch.setattr(embedding_onnx, "OnnxBackend", broken)
    monkeypatch.delenv(embedding.BACKEND_ENV, raising=False)
    assert embedding.Encoder.load(cache_size=0).backend == "numpy"
    with pytest.raises(embedding.EmbeddingUnavailable, match="no kernel"):
        embedding.Encoder.load(cache_size=0, backend="onnx")


def test_onnx_and_numpy_backends_agree(encoder: embedding.Encoder) -> None:
    import numpy as np

    other = embedding.Encoder.load(
        cache_size=0, backend="numpy" if encoder.backend == "onnx" else "onnx"
    )
    texts = ["I take the 7:42 train to work.", "", "naïve café 東京 🙂", "word " * 300]
    np.testing.assert_allclose(encoder.encode(texts), other.encode(texts), rtol=0, atol=2e-6)


def test_int8_backend_is_close_to_float32_and_deterministic(
    int8_encoder: embedding.Encoder,
) -> None:
    """int8 weights (the default on a CPU with int8 dot products; docs/performance.md):
    each text runs alone, so a batch gives the bits `encode_one` does, and the vectors stay
    near float32's (cosine to the reference 0.9948 at worst when measured; float32 backends
    reach 0.9999999)."""
    import numpy as np

    cases = json.loads(REFERENCE.read_text(encoding="utf-8"))["cases"]
    texts = [c["text"] for c in cases]
    expected = np.array([c["vector"] for c in cases], dtype=np.float64)
    batch = int8_encoder.encode(texts)
    single = np.stack([int8_encoder.encode_one(t) for t in texts])
    assert batch.tobytes() == single.tobytes()
    assert int8_encoder.encode_one(texts[0]).tobytes() == single[0].tobytes()
    cosine = (single.astype(np.float64) * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= 0.99


def test_ready_once_the_encoder_is_loaded_without_looking_on_disk(monkeypatch) -> None:
    monkeypatch.setattr(embedding, "_default", None)
    monkeypatch.setattr(embedding, "available", lambda: False)
    assert embedding.ready() is False
    monkeypatch.setattr(embedding, "_default", object())
    assert embedding.ready() is True


def test_a_prefetched_query_is_the_encoded_one_and_is_cached() -> None:
    need_model()
    encoder = embedding.default_encoder()
    query = "which espresso bar did my sister like in lisbon (prefetch test)"
    encoder.clear_cache()
    before = encoder.cache_len
    vector = embedding.prefetch(query).result(timeout=30)
    assert encoder.cache_len == before + 1  # the recall's own encode is then a cache hit
    assert encoder.encode_one(query) is vector
    assert (vector == encoder.encode_one(query, cache=False)).all()
