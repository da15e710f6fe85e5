"""One settings object for every entry point, read from `RAG_*` environment variables.

Sections are nested models; an environment variable names its section and field joined by
one underscore (`RAG_CHROMA_HOST` -> `chroma.host`, `RAG_EMBED_BATCH_SIZE` -> `embed.batch_size`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Chroma and Gradio phone home by default; the machine this runs on may have no network
# and users' questions are nobody else's business.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# ONNX Runtime keeps a device id and an event database under ~/.cache/Microsoft unless told.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbedSettings(_Section):
    model: str = Field(
        default="minilm",
        description="minilm (all-MiniLM-L6-v2, bundled), embeddinggemma (opt-in: "
        "`make models-quality`), a local sentence-transformers folder (nothing is downloaded), "
        "or an embedder registered with rag.embed.register_embedder.",
    )
    runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="ONNX Runtime (exported once from the model's weights; no torch when a "
        "question is asked) or sentence-transformers on torch.",
    )
    precision: Literal["auto", "fp32", "int8"] = Field(
        default="auto",
        description="ONNX weights: the model's own choice (fp32 for both known models), or "
        "int8 (dynamic quantisation: less CPU, a little recall lost). torch always runs fp32.",
    )
    dimensions: int | None = Field(
        default=None,
        ge=32,
        le=4096,
        description="Keep the first N dimensions of each vector (Matryoshka models such as "
        "EmbeddingGemma: 768, 512, 256); unset keeps them all.",
    )
    cache: Path = Field(
        default=Path.home() / ".cache" / "paper-rag" / "models",
        description="Where ONNX exports and fetched embedding models are kept, shared by every "
        "RAG_HOME.",
    )
    batch_size: int = Field(
        default=64, ge=1, le=4096, description="Texts per forward pass of the embedding model."
    )
    device: str = Field(default="cpu", description="Torch device (RAG_EMBED_RUNTIME=torch).")
    max_length: int = Field(
        default=384,
        ge=32,
        le=2048,
        description="Tokens the model reads per chunk; matches the chunk size so none are cut.",
    )


class ChunkSettings(_Section):
    size: int = Field(
        default=384,
        ge=64,
        le=8192,
        description="SentenceSplitter chunk size in embedding-model tokens (384 keeps 98.8% of "
        "ICML 2026 abstracts in one chunk).",
    )
    overlap: int = Field(
        default=48, ge=0, le=1024, description="Tokens shared by neighbouring chunks of a paper."
    )


class ChromaSettings(_Section):
    host: str | None = Field(
        default=None,
        description="Chroma server host; unset means an embedded store under RAG_HOME.",
    )
    port: int = Field(default=8000, ge=1, le=65535, description="Chroma server port.")
    ssl: bool = Field(default=False, description="Talk to the Chroma server over HTTPS.")
    collection_prefix: str = Field(
        default="papers",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,40}$",
        description="Prefix of the collection name; the rest is a hash of model and chunking.",
    )
    timeout: float = Field(
        default=5.0,
        gt=0,
        le=600,
        description="Seconds any request to the Chroma server may take (connect, read, write); "
        "a server that does not answer in time is reported as unreachable.",
    )
    lock_ttl: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        description="Seconds an ingest's lock on the Chroma server lasts unless renewed (every "
        "third of it while the ingest runs); a killed ingest's lock is taken over after this.",
    )


class IngestSettings(_Section):
    max_abstract_chars: int = Field(
        default=20_000,
        ge=100,
        description="Abstracts longer than this are rejected as malformed (real ones are < 5,000).",
    )
    max_file_bytes: int = Field(
        default=512 * 1024 * 1024, ge=1, description="Files larger than this are skipped."
    )
    lock_timeout: float = Field(
        default=10.0,
        ge=0,
        description="Seconds an ingest waits for another ingest on the same RAG_HOME to finish.",
    )
    write_batch_chunks: int = Field(
        default=256,
        ge=1,
        le=5000,  # Chroma refuses larger single writes
        description="Chunks embedded and written to the store per step.",
    )


class SearchSettings(_Section):
    k: int = Field(default=5, ge=1, le=200, description="Papers returned by a search.")
    decline: bool = Field(
        default=True,
        description="Decline a question that the fitted relevance model (rag/relevance.py) "
        "judges no indexed paper answers; false: always answer from the closest papers.",
    )


class LLMSettings(_Section):
    backend: Literal["local", "openai", "extractive"] = Field(
        default="local",
        description="Who writes answers: the bundled llama.cpp model, an OpenAI-compatible "
        "endpoint, or no LLM at all (extractive). RAG_LLM.",
    )
    local_model: Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m"] = Field(
        default="qwen2.5-coder-1.5b",
        description="Which bundled GGUF the local backend runs (smaller is faster).",
    )
    model_path: str = Field(
        default="", description="Any GGUF file for the local backend (overrides local_model)."
    )
    cache: Path = Field(
        default=Path.home() / ".cache" / "paper-rag" / "models",
        description="Where bundled GGUFs are joined from their part packages on first use.",
    )
    threads: int = Field(default=0, ge=0, description="llama.cpp threads (0: all cores).")
    n_ctx: int = Field(default=2048, ge=512, le=32768, description="llama.cpp context tokens.")
    base_url: str = Field(
        default="", description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1."
    )
    model: str = Field(default="", description="Model name sent to the endpoint.")
    api_key: SecretStr = Field(
        default=SecretStr("not-needed"), description="API key for the endpoint."
    )
    timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds to wait for the endpoint's reply, and for each next token of it.",
    )
    connect_timeout: float = Field(
        default=3.0, gt=0, description="Seconds to wait for the endpoint to accept a connection."
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=6,
        description="Retries (jittered backoff) of a request that failed before any reply.",
    )
    cooldown: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Seconds after the endpoint failed in which questions do not call it "
        "(0: always call).",
    )
    max_tokens: int = Field(default=220, ge=16, le=4096, description="Longest answer, in tokens.")
    temperature: float = Field(
        default=0.0, ge=0, le=2, description="Sampling temperature (0: the same answer each time)."
    )


class AnswerSettings(_Section):
    sources: int = Field(
        default=5, ge=1, le=20, description="Papers retrieved and listed as numbered sources."
    )
    prompt_sources: int = Field(
        default=3,
        ge=1,
        le=20,
        description="How many of them the LLM reads (prompt length is what costs on a CPU).",
    )
    sentences_per_source: int = Field(
        default=3, ge=1, le=20, description="Sentences of each source abstract put in the prompt."
    )
    prompt_chars: int = Field(
        default=480,
        ge=100,
        le=20_000,
        description="Characters of source text the model reads per answer (about 4 a token): "
        "each source's best sentence first, then the next best overall. Reading is most of "
        "the wait before the first word (the 1.5B reads ~35 tokens/s on 2 cores).",
    )
    list_items: int = Field(
        default=5,
        ge=1,
        le=50,
        description="Papers a list answer describes one by one; the other matches are counted "
        "('and N more') and listed with the sources.",
    )
    redraft: bool = Field(
        default=True,
        description="When some of the model's sentences are unsupported, it writes the answer "
        "once more, asked to keep to the sources' words, and the draft whose sentences the "
        "verifier supports more is shown.",
    )
    unsupported: Literal["flag", "drop"] = Field(
        default="flag",
        description="What happens to answer sentences the verifier finds unsupported.",
    )
    read_claims: bool = Field(
        default=True,
        description="The model reads each sentence it wrote that the verifier accepts against "
        "the source sentence it aligned to, and a sentence it does not find stated there is "
        "unsupported (a flipped negation, a moved figure); about a second a sentence on a CPU.",
    )


class UISettings(_Section):
    host: str = Field(
        default="127.0.0.1",
        description="Address the chat page binds to; loopback keeps it off the network.",
    )
    port: int = Field(default=7860, ge=1, le=65535, description="Port of the chat page.")
    concurrency: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Questions answered at once (a local model answers one at a time).",
    )
    max_queue: int = Field(
        default=32, ge=1, le=1000, description="Questions waiting before the page says busy."
    )
    max_upload_mb: float = Field(
        default=50.0, gt=0, le=2048, description="Largest file the page accepts for upload."
    )
    refresh: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="Seconds between the page's checks, in the background, for changes another "
        "process or machine made to the index (0: only when a question is asked).",
    )


class _EnvWithBackendName(EnvSettingsSource):
    """`RAG_LLM=openai` names the backend while `RAG_LLM_BASE_URL` etc. fill the section."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if field_name == "llm" and isinstance(value, str) and not value.lstrip().startswith("{"):
            return {"backend": value}
        return super().decode_complex_value(field_name, field, value)


class Settings(BaseSettings):
    """Everything configurable, with its environment variable."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_",
        env_nested_delimiter="_",
        env_nested_max_split=1,
        extra="forbid",
        validate_assignment=True,
    )

    home: Path = Field(
        default=PROJECT_ROOT / ".rag",
        description="Folder holding the index (Chroma store, catalog, lock). RAG_HOME.",
    )
    corpus: list[Path] = Field(
        default_factory=lambda: [PROJECT_ROOT / "corpus"],
        description="Files or folders ingested when no path is given.",
    )
    embed: EmbedSettings = Field(default_factory=EmbedSettings, description="Embedding model.")
    chunk: ChunkSettings = Field(default_factory=ChunkSettings, description="Chunking.")
    chroma: ChromaSettings = Field(default_factory=ChromaSettings, description="Vector store.")
    ingest: IngestSettings = Field(default_factory=IngestSettings, description="Ingest limits.")
    search: SearchSettings = Field(default_factory=SearchSettings, description="Search.")
    llm: LLMSettings = Field(default_factory=LLMSettings, description="Answer writer.")
    answer: AnswerSettings = Field(default_factory=AnswerSettings, description="Answers.")
    ui: UISettings = Field(default_factory=UISettings, description="Chat page.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvWithBackendName(settings_cls), file_secret_settings)

    def describe(self, *sections: str) -> str:
        """Help text listing the environment variables of the given sections."""
        lines = []
        for name in sections:
            field = type(self).model_fields[name]
            value = getattr(self, name)
            if isinstance(value, BaseModel):
                for sub, info in type(value).model_fields.items():
                    env = f"RAG_{name}_{sub}".upper()
                    if name == "llm" and sub == "backend":
                        env = "RAG_LLM"
                    lines.append(f"  {env:<28} {info.description} [{getattr(value, sub)}]")
            else:
                lines.append(f"  RAG_{name.upper():<24} {field.description} [{value}]")
        return "\n".join(lines)


def fingerprint(obj: Any) -> str:
    """A short stable hash of a JSON-able value, for names derived from configuration."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
