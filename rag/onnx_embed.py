"""The ONNX Runtime model (`rag.onnx_model`) as a LlamaIndex embedding, with the folder's
query and document prompts: what ingest and retrieval hand to `VectorStoreIndex`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag.onnx_model import OnnxModel, open_model


class OnnxEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over one `OnnxModel`."""

    query_prompt: str = ""
    document_prompt: str = ""
    max_length: int = 384
    dimensions: int | None = None

    _model: OnnxModel = PrivateAttr()

    def __init__(
        self,
        folder: Path,
        onnx_file: Path,
        *,
        query_prompt: str = "",
        document_prompt: str = "",
        max_length: int = 384,
        dimensions: int | None = None,
        **kwargs: Any,
    ) -> None:
        # LlamaIndex hands over this many texts per call; `OnnxModel.embed` splits them into
        # runs of at most RUN_TOKENS tokens, one per core at a time.
        super().__init__(model_name=str(folder), embed_batch_size=256, **kwargs)
        self.query_prompt, self.document_prompt = query_prompt, document_prompt
        self.max_length, self.dimensions = max_length, dimensions
        self._model = open_model(folder, onnx_file, max_length, dimensions)

    @classmethod
    def class_name(cls) -> str:
        return "OnnxEmbedding"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._model.embed(texts)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed([self.query_prompt + query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed([self.document_prompt + text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed([self.document_prompt + t for t in texts])
