"""The embedding model: a local sentence-transformers folder, loaded once per process.

`RAG_EMBED_MODEL` is a folder, or the name of an embedder registered with
`register_embedder` (the tests' deterministic hashing embedder is one): one small
interface, so the index and the question side never ask which kind they were given.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag.settings import EmbedSettings

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

_LOCK = threading.Lock()


class EmbeddingModelError(RuntimeError):
    """The configured embedding model folder is missing or unusable."""


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


def model_identity(path: str) -> dict[str, Any]:
    """What makes two model folders produce the same vectors: configs and weight sizes.

    Hashing the configs (not the path) keeps collection names stable when the project or
    the virtualenv moves, while a different model always gets a different name.
    """
    if (embedder := _REGISTRY.get(path)) is not None:
        return {"name": embedder.name, **embedder.identity}
    folder = Path(path)
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise EmbeddingModelError(
            f"{path!r} is not a sentence-transformers model folder "
            "(set RAG_EMBED_MODEL to a local folder; nothing is downloaded)"
        )
    digest = hashlib.sha256()
    for name in sorted(p.name for p in folder.iterdir() if p.suffix == ".json"):
        digest.update(name.encode())
        digest.update((folder / name).read_bytes())
    for sub in sorted(folder.glob("*_*/config.json")):
        digest.update(sub.read_bytes())
    weights = sorted(
        (p.name, p.stat().st_size) for p in folder.iterdir() if p.suffix in (".safetensors", ".bin")
    )
    return {
        "name": folder.name if folder.name != "model" else folder.parent.name,
        "config": digest.hexdigest()[:16],
        "weights": weights,
    }


@lru_cache(maxsize=4)
def _load(path: str, device: str, batch_size: int, max_length: int) -> HuggingFaceEmbedding:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    model_identity(path)  # a clear error before transformers prints a confusing one
    return HuggingFaceEmbedding(
        model_name=path,
        device=device,
        embed_batch_size=batch_size,
        max_length=max_length,
        normalize=True,
        local_files_only=True,
        # A local model needs no download cache; left unset, LlamaIndex creates
        # ~/.cache/llama_index, and ingest writes nothing outside RAG_HOME.
        cache_folder=path,
    )


def load_embedding(settings: EmbedSettings) -> BaseEmbedding:
    """The LlamaIndex embedding for these settings; the same object for the same settings."""
    if (embedder := _REGISTRY.get(settings.model)) is not None:
        return embedder.load(settings)
    with _LOCK:
        return _load(settings.model, settings.device, settings.batch_size, settings.max_length)


def load_tokenizer(settings: EmbedSettings) -> Tokenizer:
    """The model's own tokenizer, so chunk sizes are counted in the tokens the model sees."""
    if (embedder := _REGISTRY.get(settings.model)) is not None:
        return embedder.tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(settings.model, local_files_only=True)


@lru_cache(maxsize=4)
def _load_numpy(path: str, max_length: int) -> BaseEmbedding:
    from rag.numpy_bert import NumpyBertEmbedding

    return NumpyBertEmbedding(path, max_length=max_length)


def load_query_embedding(settings: EmbedSettings) -> BaseEmbedding:
    """The question-side model: numpy when the folder is plain BERT (no torch import), else
    the same sentence-transformers model ingest uses. One object per settings per process."""
    from rag.numpy_bert import numpy_supported

    if settings.model in _REGISTRY:
        return load_embedding(settings)
    model_identity(settings.model)  # the same clear error as ingest for a bad folder
    if settings.device == "cpu" and numpy_supported(settings.model):
        with _LOCK:
            return _load_numpy(settings.model, settings.max_length)
    return load_embedding(settings)
