"""A sentence-transformers model run on ONNX Runtime: the one runtime for passages and questions.

The transformer is an ONNX file exported once from the model folder (`rag.onnx_export`); the
rest of the sentence-transformers pipeline (the tokenizer, pooling, Dense layers, truncation to
fewer dimensions, normalisation) is read from the same folder and done here in numpy. Nothing
here imports torch or LlamaIndex (`rag.onnx_embed` is the LlamaIndex face of it), so a process
can open the model in the background while it imports the rest (`preload`).
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Tokens per forward pass (texts x their longest): measured on MiniLM, one 384-token chunk per
# run costs 0.57x the CPU of batches of 32 (activations that stay in cache; evals/README.md).
RUN_TOKENS = 384


class UnsupportedModel(ValueError):
    """The folder's sentence-transformers pipeline has a module this runtime does not run."""


@dataclass(frozen=True)
class Dense:
    weight: np.ndarray  # (out, in)
    bias: np.ndarray | None
    tanh: bool


@dataclass(frozen=True)
class Pipeline:
    """What sentence-transformers does around the transformer, read from the model folder."""

    pooling: str  # "mean" | "cls" | "lasttoken"
    dense: tuple[Dense, ...]

    @classmethod
    def read(cls, folder: Path) -> Pipeline:
        modules = json.loads((folder / "modules.json").read_text())
        pooling, dense = "", []
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            path = folder / str(module.get("path", ""))
            if kind == "Transformer":
                continue
            if kind == "Pooling":
                config = json.loads((path / "config.json").read_text())
                modes = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
                named = {
                    "pooling_mode_mean_tokens": "mean",
                    "pooling_mode_cls_token": "cls",
                    "pooling_mode_lasttoken": "lasttoken",
                }
                if len(modes) != 1 or modes[0] not in named:
                    raise UnsupportedModel(f"pooling {modes} in {path}")
                pooling = named[modes[0]]
            elif kind == "Dense":
                dense.append(_read_dense(path))
            elif kind == "Normalize":
                continue  # every vector is normalised
            else:
                raise UnsupportedModel(f"module {kind} in {folder}")
        if not pooling:
            raise UnsupportedModel(f"no pooling module in {folder}")
        return cls(pooling, tuple(dense))


def _read_dense(path: Path) -> Dense:
    from safetensors.numpy import load_file

    config = json.loads((path / "config.json").read_text())
    activation = str(config.get("activation_function", "")).rsplit(".", 1)[-1]
    if activation not in ("Identity", "Tanh"):
        raise UnsupportedModel(f"Dense activation {activation} in {path}")
    weights = load_file(str(path / "model.safetensors"))
    bias = weights.get("linear.bias") if config.get("bias", True) else None
    return Dense(
        np.ascontiguousarray(weights["linear.weight"].astype(np.float32)),
        None if bias is None else bias.astype(np.float32),
        activation == "Tanh",
    )


def prompts(folder: Path) -> dict[str, str]:
    """The folder's named prompts ("query", "document", …), empty when it has none."""
    path = folder / "config_sentence_transformers.json"
    if not path.is_file():
        return {}
    found = json.loads(path.read_text()).get("prompts") or {}
    return {str(k): str(v) for k, v in found.items()}


def threads() -> int:
    """Cores this process may use: ONNX Runtime's own default counts the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class OnnxModel:
    """tokenizer.json + model.onnx + the folder's pooling and layers: texts in, unit vectors out."""

    def __init__(
        self, folder: Path, onnx_file: Path, max_length: int = 384, dimensions: int | None = None
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.folder, self.dimensions = folder, dimensions
        options = ort.SessionOptions()
        # One thread per run, and runs side by side on every core (see `embed`): two one-thread
        # runs cost less CPU than one two-thread run (evals/README.md).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.no_padding()  # padded per batch below, to the longest text in it
        self._tokenizer = tokenizer
        self._pipeline = Pipeline.read(folder)
        self._pool = ThreadPoolExecutor(threads(), thread_name_prefix="onnx-embed")

    def _forward(self, encodings: list[Any]) -> np.ndarray:
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), length), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, enc in enumerate(encodings):
            # Right padding; last-token pooling below reads each text's own last position.
            ids[i, : len(enc.ids)] = enc.ids
            mask[i, : len(enc.ids)] = enc.attention_mask
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0].astype(np.float32)
        pipe = self._pipeline
        if pipe.pooling == "mean":
            weights = mask[..., None].astype(np.float32)
            x = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
        elif pipe.pooling == "cls":
            x = hidden[:, 0]
        else:
            x = hidden[np.arange(len(encodings)), mask.sum(1) - 1]
        for layer in pipe.dense:
            x = x @ layer.weight.T
            if layer.bias is not None:
                x = x + layer.bias
            if layer.tanh:
                x = np.tanh(x)
        if self.dimensions:
            x = x[:, : self.dimensions]
        # Always unit length: Chroma's cosine space and the calibrated cutoffs assume it.
        x = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
        return x

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        runs: list[list[int]] = [[]]
        for i in order:  # ascending length: the text joining a run is its longest
            if runs[-1] and (len(runs[-1]) + 1) * len(encodings[i].ids) > RUN_TOKENS:
                runs.append([])
            runs[-1].append(i)
        out: list[list[float]] = [[] for _ in texts]
        # ONNX Runtime releases the GIL while it runs, and a session may run concurrently.
        feeds = ([encodings[i] for i in run] for run in runs)
        batches = (
            map(self._forward, feeds) if len(runs) == 1 else self._pool.map(self._forward, feeds)
        )
        for run, vectors in zip(runs, batches, strict=True):
            for i, vec in zip(run, vectors, strict=True):
                out[i] = vec.astype(float).tolist()
        return out


_OPENED: dict[tuple[Path, Path, int, int | None], Future[OnnxModel]] = {}
_OPENED_LOCK = threading.Lock()


def _opening(
    folder: Path, onnx_file: Path, max_length: int, dimensions: int | None, background: bool
) -> Future[OnnxModel]:
    key = (folder, onnx_file, max_length, dimensions)
    with _OPENED_LOCK:
        future = _OPENED.get(key)
        if future is None:
            future = _OPENED[key] = Future()
            start = True
        else:
            start = False
    if start:

        def run() -> None:
            try:
                future.set_result(OnnxModel(folder, onnx_file, max_length, dimensions))
            except BaseException as err:  # handed to whoever asks for the model
                future.set_exception(err)

        if background:
            threading.Thread(target=run, name="onnx-open", daemon=True).start()
        else:
            run()
    return future


def open_model(
    folder: Path, onnx_file: Path, max_length: int = 384, dimensions: int | None = None
) -> OnnxModel:
    """The model for these arguments, opened once per process (or taken from `preload`)."""
    return _opening(folder, onnx_file, max_length, dimensions, background=False).result()


def preload(
    folder: Path, onnx_file: Path, max_length: int = 384, dimensions: int | None = None
) -> None:
    """Start opening the model on a thread: ONNX Runtime builds its session without the GIL,
    so it overlaps the imports a question still needs (evals/README.md, cold start)."""
    # Imported here, not on the thread: two threads importing modules with shared dependencies
    # can each see the other's half-initialised modules.
    import onnxruntime  # noqa: F401
    import safetensors.numpy  # noqa: F401
    import tokenizers  # noqa: F401

    _opening(folder, onnx_file, max_length, dimensions, background=True)
