"""A deterministic, instant embedding model for the fast tier (simonw/llm's `EmbedDemo` idea).

Behind the same interface as the real model (a LlamaIndex `BaseEmbedding`, registered with
`rag.embed.register_embedder`, chosen by `RAG_EMBED_MODEL=test-hash`): every word and pair of
neighbouring words is hashed into one of `DIM` signed buckets. Texts that share words are
close and others are not, so index, BM25, filter, citation and CLI logic run for real in a
fraction of a second; what depends on the real model's sense of meaning (paraphrases,
abstention thresholds, the verifier's calibration) is tested in the slow tier.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re

from llama_index.core.base.embeddings.base import BaseEmbedding

from rag.embed import Embedder, register_embedder
from rag.settings import EmbedSettings

NAME = "test-hash"
DIM = 256
_WORD = re.compile(r"[a-z0-9]+")


def _bucket(token: str) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % DIM, 1.0 if value >> 63 else -1.0


def _words(text: str) -> list[str]:
    # A seven-letter prefix: "autoencoders" and "autoencoder" share a bucket.
    return [w[:7] for w in _WORD.findall(text.casefold()) if len(w) > 2]


def hash_vector(text: str) -> list[float]:
    words = _words(text)
    vector = [0.0] * DIM
    for token in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
        index, sign = _bucket(token)
        vector[index] += sign
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class HashEmbedding(BaseEmbedding):
    """Hashed bag of words and word pairs, L2-normalised."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return hash_vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return hash_vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return hash_vector(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [hash_vector(t) for t in texts]


class WordTokenizer:
    """One id per word or punctuation mark: chunk sizes close to a WordPiece count."""

    _TOKEN = re.compile(r"\w+|[^\w\s]")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [_bucket(t)[0] for t in self._TOKEN.findall(text)]


_MODEL = HashEmbedding(model_name=NAME, embed_batch_size=256)


def _load(settings: EmbedSettings) -> BaseEmbedding:
    return _MODEL


def register() -> None:
    register_embedder(
        Embedder(
            name=NAME,
            identity={"dim": DIM, "scheme": "blake2b words+pairs, 7-letter prefixes"},
            load=_load,
            tokenizer=WordTokenizer,
        )
    )
