"""The embedding model's forward pass in numpy, for the question side.

Why not the sentence-transformers model that ingest uses: importing it pulls in torch,
transformers and scikit-learn, about 5 s before the first question can be embedded, while a
6-layer BERT over a one-line question is a few small matrix products. This runs the same
weights (model.safetensors) with the same tokenizer (tokenizer.json) and gives the same
vectors to within float rounding (tests/test_index.py compares them), so stored passages and
questions stay comparable. Only plain BERT with mean pooling is supported; any other model
folder falls back to the sentence-transformers path (see `rag.embed.load_query_embedding`).
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr
from threadpoolctl import ThreadpoolController

# Texts per forward pass: padding is per batch, so small batches of similar length waste little.
BATCH = 32


def numpy_supported(path: str) -> bool:
    """Whether `path` is a plain BERT mean-pooling model that NumpyBertEmbedding can run."""
    folder = Path(path)
    try:
        config = json.loads((folder / "config.json").read_text())
        modules = json.loads((folder / "modules.json").read_text())
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return False
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    other_pooling = ("pooling_mode_cls_token", "pooling_mode_max_tokens")
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and kinds in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"])
        and bool(pooling.get("pooling_mode_mean_tokens"))
        and not any(pooling.get(k) for k in (*other_pooling, "pooling_mode_mean_sqrt_len_tokens"))
        and (folder / "model.safetensors").is_file()
        and (folder / "tokenizer.json").is_file()
    )


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # finding the loaded BLAS libraries once, not per question


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + eps) * weight + bias
    return out


class NumpyBertEmbedding(BaseEmbedding):
    """A LlamaIndex embedding running a sentence-transformers BERT folder in numpy."""

    max_length: int = 384
    normalize: bool = True

    _weights: dict[str, np.ndarray] = PrivateAttr()
    _config: dict[str, Any] = PrivateAttr()
    _tokenizer: Any = PrivateAttr()
    _lock: threading.Lock = PrivateAttr()

    def __init__(self, model_path: str, max_length: int = 384, **kwargs: Any) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        super().__init__(model_name=model_path, embed_batch_size=BATCH, **kwargs)
        self.max_length = max_length
        folder = Path(model_path)
        self._config = json.loads((folder / "config.json").read_text())
        self._weights = load_file(str(folder / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(
            max_length=min(max_length, self._config["max_position_embeddings"])
        )
        tokenizer.no_padding()  # padded per batch below, to the longest text in it
        self._tokenizer = tokenizer
        self.normalize = "Normalize" in (folder / "modules.json").read_text()
        self._lock = threading.Lock()

    @classmethod
    def class_name(cls) -> str:
        return "NumpyBertEmbedding"

    def _w(self, name: str) -> np.ndarray:
        return self._weights[name]

    def _t(self, name: str) -> np.ndarray:
        """A weight matrix transposed once into contiguous memory (strided gemm is 4x slower)."""
        key = name + ".T"
        if key not in self._weights:
            self._weights[key] = np.ascontiguousarray(self._weights[name].T)
        return self._weights[key]

    def _forward(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), length), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros((len(texts), length), dtype=np.float32)
        for i, enc in enumerate(encodings):
            ids[i, : len(enc.ids)] = enc.ids
            types[i, : len(enc.ids)] = enc.type_ids
            mask[i, : len(enc.ids)] = enc.attention_mask
        cfg, w = self._config, self._w
        eps = float(cfg["layer_norm_eps"])
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        size = hidden // heads
        x = (
            w("embeddings.word_embeddings.weight")[ids]
            + w("embeddings.position_embeddings.weight")[np.arange(length)][None]
            + w("embeddings.token_type_embeddings.weight")[types]
        )
        x = _layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
        # Padded keys get a large negative score, as BERT's extended attention mask does.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        batch = len(texts)

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            # One 2-D product against the pre-transposed weight: BLAS sees a single large gemm.
            flat = h.reshape(-1, h.shape[-1]) @ self._t(f"{name}.weight") + w(f"{name}.bias")
            out: np.ndarray = flat.reshape(*h.shape[:-1], -1)
            return out

        def split(h: np.ndarray) -> np.ndarray:
            return h.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        from scipy.special import erf

        for layer in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{layer}"
            q = split(dense(x, f"{p}.attention.self.query"))
            k = split(dense(x, f"{p}.attention.self.key"))
            v = split(dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = _layer_norm(
                dense(context, f"{p}.attention.output.dense") + x,
                w(f"{p}.attention.output.LayerNorm.weight"),
                w(f"{p}.attention.output.LayerNorm.bias"),
                eps,
            )
            inner = dense(x, f"{p}.intermediate.dense")
            inner = 0.5 * inner * (1.0 + erf(inner / np.sqrt(2.0)))  # exact GELU, as BERT's
            x = _layer_norm(
                dense(inner, f"{p}.output.dense") + x,
                w(f"{p}.output.LayerNorm.weight"),
                w(f"{p}.output.LayerNorm.bias"),
                eps,
            )
        pooled = (x * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        if self.normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        # One BLAS thread: these products are small, and OpenBLAS's spinning worker threads
        # made a single question 4-20x slower whenever the cores were busy (an LLM generating,
        # another user's ingest). Measured: 45 ms vs 170-830 ms p50 under load.
        with self._lock, _blas().limit(limits=1):
            for start in range(0, len(order), BATCH):
                chunk = order[start : start + BATCH]
                vectors = self._forward([texts[i] for i in chunk])
                for i, vec in zip(chunk, vectors, strict=True):
                    out[i] = vec.astype(float).tolist()
        return out

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts)
