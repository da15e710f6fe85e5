"""The ONNX form of an embedding model's transformer, exported once from its folder and cached.

This is the only place that imports torch for embeddings, and only when the cache has no
export yet (`make setup` makes the default one). int8 quantises the weights of the matrix
products per output channel (ONNX Runtime's dynamic quantisation); evals/README.md records
what it costs in recall for each model that uses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

Precision = Literal["fp32", "int8"]

# Bump when the export itself changes (opset, fusion, quantisation options): new files.
EXPORT_VERSION = 1
OPSET = 17


class ExportError(RuntimeError):
    """The model folder could not be exported to ONNX."""


def export_key(folder: Path, precision: Precision) -> str:
    """What shapes the exported file: the folder's configs and weight sizes, and the precision."""
    digest = hashlib.sha256(f"{EXPORT_VERSION} {OPSET} {precision}".encode())
    for path in sorted(folder.glob("*.json")):
        digest.update(path.name.encode() + path.read_bytes())
    for path in sorted(folder.glob("*.safetensors")):
        digest.update(f"{path.name} {path.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def _target(folder: Path, cache: Path, precision: Precision) -> Path:
    name = folder.name if folder.name != "model" else folder.parent.name
    return cache / "onnx" / f"{name}-{precision}-{export_key(folder, precision)}"


def exported(folder: Path, cache: Path, precision: Precision) -> Path | None:
    """The cached ONNX file for this folder and precision, if it has been exported."""
    done = _target(folder, cache, precision) / "model.onnx"
    return done if done.is_file() else None


def ensure_onnx(folder: Path, cache: Path, precision: Precision) -> Path:
    """The cached ONNX file for this folder and precision, exporting it the first time."""
    if (done := exported(folder, cache, precision)) is not None:
        return done
    target = _target(folder, cache, precision)
    done = target / "model.onnx"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "onnx").mkdir(exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=1800):
        if done.is_file():
            return done  # another process exported it while this one waited
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            _export(folder, work, precision)
            os.replace(work, target)  # whole folder at once: a killed export leaves no file
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return done


def _export(folder: Path, out: Path, precision: Precision) -> None:
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    try:
        # Eager attention exports as plain matrix products, which ONNX Runtime fuses into its
        # own attention kernel; the scaled-dot-product form does not fuse.
        model = AutoModel.from_pretrained(
            folder, local_files_only=True, attn_implementation="eager", dtype=torch.float32
        ).eval()
    except (OSError, ValueError) as err:
        raise ExportError(f"cannot load {folder} with transformers: {err}") from err
    import inspect

    accepted = inspect.signature(model.forward).parameters
    names = ["input_ids", "attention_mask"] + (
        ["token_type_ids"] if "token_type_ids" in accepted and config.model_type == "bert" else []
    )

    bidirectional = bool(getattr(config, "use_bidirectional_attention", False))

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            kwargs = dict(zip(names, inputs, strict=True))
            if bidirectional:
                kwargs["attention_mask"] = _bidirectional_masks(kwargs["attention_mask"], config)
                kwargs["use_cache"] = False
            return self.model(**kwargs).last_hidden_state

    sample = torch.ones(2, 16, dtype=torch.long)
    sample[1, 11:] = 0  # a padded row, so masking is traced as data rather than skipped
    raw = out / "raw.onnx"
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(),
            tuple(sample for _ in names),
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    current = raw
    if config.model_type == "bert":
        current = _fuse_bert(current, out / "fused.onnx", config)
    if precision == "int8":
        current = _quantize(current, out / "int8.onnx")
    os.replace(current, out / "model.onnx")
    for extra in out.glob("*.onnx"):
        if extra.name != "model.onnx":
            extra.unlink()
    (out / "export.json").write_text(
        json.dumps({"from": str(folder), "precision": precision, "opset": OPSET}, indent=1)
    )


def _bidirectional_masks(mask: Any, config: Any) -> dict[str, Any]:
    """The 4-D masks that transformers builds for a bidirectional Gemma 3 (EmbeddingGemma),
    made of plain tensor operations: its own mask factory goes through `torch.vmap`, which the
    exporter cannot trace. Full-attention layers see every real token; sliding-window layers
    those less than `sliding_window` positions away."""
    import torch

    blocked = torch.finfo(torch.float32).min
    zero = torch.zeros((), dtype=torch.float32)
    keys = (mask > 0)[:, None, None, :]
    pos = torch.arange(mask.shape[1])
    near = (pos[:, None] - pos[None, :]).abs() < int(config.sliding_window)
    return {
        "full_attention": torch.where(keys & torch.ones_like(near)[None, None], zero, blocked),
        "sliding_attention": torch.where(keys & near[None, None], zero, blocked),
    }


def _fuse_bert(src: Path, dst: Path, config: Any) -> Path:
    from onnxruntime.transformers import optimizer

    fused = optimizer.optimize_model(
        str(src),
        model_type="bert",
        num_heads=int(config.num_attention_heads),
        hidden_size=int(config.hidden_size),
    )
    fused.save_model_to_file(str(dst))
    return dst


def _quantize(src: Path, dst: Path) -> Path:
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # its advice to pre-process first is for static quantising
    try:
        quantize_dynamic(
            str(src),
            str(dst),
            weight_type=QuantType.QInt8,
            per_channel=True,
            # Fused operators are outside ONNX's type inference; their outputs are float.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        logging.disable(logging.NOTSET)
    return dst
