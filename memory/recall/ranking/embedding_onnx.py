"""The ONNX Runtime backend of `memory.recall.ranking.embedding.Encoder`: the same all-MiniLM-L6-v2.

`build_model` writes the BERT encoder, mean pooling and L2 normalisation as an ONNX graph,
in memory, from the safetensors weights (nothing is written to disk, nothing downloaded);
`OnnxBackend` runs it in `onnxruntime.InferenceSession`s. The graph uses ONNX Runtime's
fused CPU operators (com.microsoft domain) directly rather than hoping its optimiser
recognises a hand-written pattern:

- `Attention`: the fused Q/K/V product, scaled dot-product attention with a 0/1 key mask
  (padded keys get -10000 added to their logits, so softmax gives them weight 0 in float32),
  and the heads merged back;
- `SkipLayerNormalization`: bias + residual add + LayerNorm (eps 1e-12) in one pass;
- `BiasGelu`: bias + exact (erf) GELU, as BERT uses. Not `FastGelu` (the tanh
  approximation): it would move vectors away from sentence-transformers' by ~1e-3.

Embeddings (word + position + token type 0) and the pooling are plain ONNX opset-17 ops.

`quantize` names linear layers to run with int8 weights (the "onnx-int8" backend: all of
them). They become `MatMulNBits` with 8-bit weights in blocks of 128 along the summed axis,
one scale per block, and `accuracy_level=4`: the activations are quantised to int8 per
block too and the products summed in integers. That kept the cosine to float32 vectors at
0.9991 on average (0.9986 worst, 400 texts); ORT's `DynamicQuantizeMatMul` (one scale per
output column, one activation scale per call) was as fast but reached only 0.993 (0.988).
With int8 Q/K/V, attention runs through `MultiHeadAttention` on the projected Q, K and V.

Imports numpy, onnx and onnxruntime at module level: `memory.recall.ranking.embedding`
imports this module only inside `Encoder.load`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization
MS_DOMAIN = "com.microsoft"
INPUT_IDS = "input_ids"
MASK = "attention_mask"
OUTPUT = "embedding"
# The linear layers of each block that `build_model(quantize=...)` can run in int8.
LINEARS = ("qkv", "out", "up", "down")
# int8 weights in blocks of this many along the summed axis (384 and 1536 are multiples);
# 32 was more accurate (cosine to float32 0.9997) but 1.7x slower, 128 gave 0.9991.
INT8_BLOCK = 128
INT8_SCHEME = f"MatMulNBits bits=8 block={INT8_BLOCK} accuracy_level=4"


def _session_options(threads: int | None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # One thread: ORT then starts no pool thread at all (the calling thread does the work),
    # so the same input gives the same bits and nothing competes with the web workers.
    # (Importing onnxruntime starts one thread of its own; what that does to the exit of a
    # worker forked under gunicorn --preload is handled in gunicorn.conf.py.) None: every core.
    options.intra_op_num_threads = 0 if threads is None else threads
    options.inter_op_num_threads = 1
    # No busy-waiting pool threads between calls when more than one thread is asked for.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


class OnnxBackend:
    """Runs the graph; one session per thread count asked for (usually just one)."""

    def __init__(
        self, model: bytes, thread_counts: Iterable[int | None], name: str, *, per_text: bool
    ) -> None:
        self.name = name
        # int8: in a padded batch a text's vector moved by up to 5e-3 from its vector alone
        # (measured; the int8 kernel's multi-row path quantises differently), so each text
        # runs alone, unpadded, and gets exactly the bits `encode_one` gives it.
        self._per_text = per_text
        self._sessions: dict[int | None, ort.InferenceSession] = {}
        for threads in dict.fromkeys(thread_counts):
            self._sessions[threads] = ort.InferenceSession(
                model, sess_options=_session_options(threads), providers=["CPUExecutionProvider"]
            )

    def run(self, ids: np.ndarray, mask: np.ndarray | None, threads: int | None) -> np.ndarray:
        """Token ids (B, T) int64 and a 0/1 mask (B, T) or None (no padding) → (B, 384)."""
        if self._per_text and ids.shape[0] > 1:
            # padding is at the end of each row (Encoder.encode)
            lengths = [ids.shape[1]] * ids.shape[0] if mask is None else mask.sum(axis=1)
            rows = [
                self.run(ids[i : i + 1, : int(n)], None, threads) for i, n in enumerate(lengths)
            ]
            return np.concatenate(rows)
        if mask is None:
            mask32 = np.ones(ids.shape, dtype=np.int32)
        else:
            mask32 = mask.astype(np.int32)
        session = self._sessions[threads]
        (out,) = session.run([OUTPUT], {INPUT_IDS: ids, MASK: mask32})
        return out


def build_model(
    get: Callable[[str], np.ndarray],
    *,
    layers: int,
    heads: int,
    max_tokens: int,
    eps: float,
    quantize: Collection[str] = (),
) -> bytes:
    """The serialised ModelProto. `get(name)` returns a float32 weight by its BERT name
    (without the `bert.` prefix); Linear weights are (out, in) as in the safetensors file.
    `quantize` names the linear layers to run in int8, among `LINEARS`.
    """
    unknown = set(quantize) - set(LINEARS)
    if unknown:
        raise ValueError(f"unknown linear layers {sorted(unknown)}")
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def linear(x: str, weight: np.ndarray, bias: np.ndarray, name: str, kind: str) -> str:
        """x @ weight (in, out); the bias is added here only in int8 (by the same op),
        else by the fused op that follows."""
        if kind not in quantize:
            return node("MatMul", [x, const(name + ".w", weight)], name + ".mm")
        k, n = weight.shape
        # (N, K / block, block): blocks run along the summed axis, one scale per block
        blocks = weight.T.reshape(n, k // INT8_BLOCK, INT8_BLOCK)
        scale = np.abs(blocks).max(axis=2) / 127.0
        scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
        q = np.clip(np.rint(blocks / scale[:, :, None]), -127, 127) + 128  # zero point 128
        inputs = [x, const(name + ".wq", q.astype(np.uint8)), const(name + ".ws", scale.ravel())]
        inputs += ["", "", const(name + ".b", bias)]  # no zero points (128), no g_idx
        return node(
            "MatMulNBits",
            inputs,
            name + ".mm",
            MS_DOMAIN,
            K=k,
            N=n,
            bits=8,
            block_size=INT8_BLOCK,
            accuracy_level=4,  # int8 x int8 products, activations quantised per block
        )

    def add_norm(y: str, residual: str, bias: np.ndarray, prefix: str, name: str, kind: str) -> str:
        """LayerNorm(y + bias + residual), the bias left out when int8 `linear` added it."""
        inputs = [y, residual, const(name + ".g", get(prefix + "LayerNorm.weight"))]
        inputs.append(const(name + ".b", get(prefix + "LayerNorm.bias")))
        if kind not in quantize:
            inputs.append(const(name + ".bias", bias))
        return node("SkipLayerNormalization", inputs, name, MS_DOMAIN, epsilon=eps)

    hidden = get("embeddings.word_embeddings.weight").shape[1]

    # Embeddings: word + (position + token type 0), then LayerNorm.
    position = get("embeddings.position_embeddings.weight")[:max_tokens]
    position = position + get("embeddings.token_type_embeddings.weight")[0]
    words = node(
        "Gather", [const("word", get("embeddings.word_embeddings.weight")), INPUT_IDS], "w"
    )
    shape = node("Shape", [INPUT_IDS], "ids_shape", start=1, end=2)
    zero = const("zero1", np.zeros(1, dtype=np.int64))
    positions = node("Slice", [const("position", position), zero, shape, zero], "p")
    summed = node("Add", [words, positions], "emb")
    x = node(
        "LayerNormalization",
        [
            summed,
            const("emb.g", get("embeddings.LayerNorm.weight")),
            const("emb.b", get("embeddings.LayerNorm.bias")),
        ],
        "emb.ln",
        axis=-1,
        epsilon=eps,
    )

    for i in range(layers):
        p = f"encoder.layer.{i}."
        n = f"l{i}"
        qkv_w = np.concatenate(
            [get(p + f"attention.self.{k}.weight").T for k in ("query", "key", "value")], axis=1
        )
        qkv_b = np.concatenate(
            [get(p + f"attention.self.{k}.bias") for k in ("query", "key", "value")]
        )
        if "qkv" not in quantize:
            # One op: Q/K/V product, scaled softmax attention over the masked keys, heads
            # merged back.
            context = node(
                "Attention",
                [x, const(n + ".qkv.w", qkv_w), const(n + ".qkv.b", qkv_b), MASK],
                n + ".att",
                MS_DOMAIN,
                num_heads=heads,
            )
        else:
            qkv = linear(x, qkv_w, qkv_b, n + ".qkv", "qkv")
            parts = [n + ".q", n + ".k", n + ".v"]
            nodes.append(
                helper.make_node(
                    "Split",
                    [qkv, const(n + ".split", np.array([hidden] * 3, dtype=np.int64))],
                    parts,
                    name=n + ".split",
                    axis=-1,
                )
            )
            context = node(
                "MultiHeadAttention", [*parts, "", MASK], n + ".att", MS_DOMAIN, num_heads=heads
            )
        out_b = get(p + "attention.output.dense.bias")
        out_w = get(p + "attention.output.dense.weight").T
        attended = linear(context, out_w, out_b, n + ".out", "out")
        x = add_norm(attended, x, out_b, p + "attention.output.", n + ".ln1", "out")
        up_b = get(p + "intermediate.dense.bias")
        up = linear(x, get(p + "intermediate.dense.weight").T, up_b, n + ".up", "up")
        if "up" in quantize:  # the bias is in already: exact GELU alone
            up = node("Gelu", [up], n + ".gelu", MS_DOMAIN)
        else:
            up = node("BiasGelu", [up, const(n + ".up.b", up_b)], n + ".gelu", MS_DOMAIN)
        down_b = get(p + "output.dense.bias")
        down = linear(up, get(p + "output.dense.weight").T, down_b, n + ".down", "down")
        x = add_norm(down, x, down_b, p + "output.", n + ".ln2", "down")

    # Mean pooling over the mask, as sentence-transformers: sum(mask * x) / max(sum(mask), 1e-9),
    # then x / max(|x|, 1e-12).
    mask_f = node("Cast", [MASK], "mask_f", to=TensorProto.FLOAT)
    axis1 = const("axis1", np.array([1], dtype=np.int64))
    axis2 = const("axis2", np.array([2], dtype=np.int64))
    mask_3d = node("Unsqueeze", [mask_f, axis2], "mask_3d")
    summed = node("ReduceSum", [node("Mul", [x, mask_3d], "masked"), axis1], "sum", keepdims=0)
    count = node("ReduceSum", [mask_f, axis1], "count", keepdims=1)
    count = node("Max", [count, const("min_count", np.array(1e-9, dtype=np.float32))], "count_c")
    pooled = node("Div", [summed, count], "pooled")
    square = node("ReduceSum", [node("Mul", [pooled, pooled], "sq"), axis1], "sq_sum", keepdims=1)
    norm = node(
        "Max",
        [node("Sqrt", [square], "norm"), const("min_norm", np.array(1e-12, dtype=np.float32))],
        "norm_c",
    )
    node("Div", [pooled, norm], OUTPUT)

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info(MASK, TensorProto.INT32, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name="iris.memory.embedding_onnx",
    )
    model.ir_version = 8
    return model.SerializeToString()
