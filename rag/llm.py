"""Answer-writing backends behind one small interface.

- `local`: a GGUF run in-process by llama.cpp, through LlamaIndex's `LlamaCPP`;
- `openai`: any OpenAI-compatible endpoint, through LlamaIndex's `OpenAILike`;
- `extractive`: no LLM (handled by rag.answer; it has no backend object).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rag.models import ensure_model
from rag.settings import LLMSettings

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms import LLM


class BackendError(RuntimeError):
    """The LLM failed (after retries); the caller falls back to an extractive answer."""


class Backend(Protocol):
    name: str
    model: str

    def stream(self, system: str, user: str) -> Iterator[str]:
        """Yields the answer's text as it is generated."""
        ...


def chatml(messages: Sequence[ChatMessage]) -> str:
    """The ChatML prompt Qwen2.5 and SmolLM2 were tuned on (both use <|im_start|>)."""
    out = [f"<|im_start|>{m.role.value}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(out) + "<|im_start|>assistant\n"


@dataclass
class LlamaIndexBackend:
    """Any LlamaIndex LLM, streamed through its chat interface."""

    name: str
    model: str
    llm: LLM
    lock: AbstractContextManager[Any]

    def stream(self, system: str, user: str) -> Iterator[str]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        messages = [
            ChatMessage(role=MessageRole.SYSTEM, content=system),
            ChatMessage(role=MessageRole.USER, content=user),
        ]
        # One llama.cpp context cannot serve two generations at once; the endpoint can.
        with self.lock:
            try:
                for chunk in self.llm.stream_chat(messages):
                    if chunk.delta:
                        yield chunk.delta
            except BackendError:
                raise
            except Exception as err:  # the client raises many kinds; all mean "no answer"
                raise BackendError(f"{self.name} backend failed: {_describe(err)}") from err


def _describe(err: Exception) -> str:
    text = str(err) or type(err).__name__
    return f"{type(err).__name__}: {text}"[:300]


_CACHE: dict[tuple[Any, ...], Backend] = {}
_CACHE_LOCK = threading.Lock()


def local_model_path(settings: LLMSettings) -> str:
    if settings.model_path:
        if not os.path.isfile(settings.model_path):
            raise BackendError(f"RAG_LLM_MODEL_PATH {settings.model_path!r} is not a file")
        return settings.model_path
    try:
        return str(ensure_model(settings.local_model, settings.cache))
    except RuntimeError as err:
        raise BackendError(str(err)) from err


def make_backend(settings: LLMSettings) -> Backend:
    """The backend for these settings; loaded models are kept for the life of the process."""
    if settings.backend == "extractive":
        raise ValueError("the extractive backend has no LLM")
    key = (
        settings.backend,
        settings.model_path,
        settings.local_model,
        settings.base_url,
        settings.model,
        settings.max_tokens,
        settings.temperature,
        settings.timeout,
        settings.retries,
    )
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _local(settings) if settings.backend == "local" else _openai(settings)
        return _CACHE[key]


def _local(settings: LLMSettings) -> Backend:
    from llama_index.llms.llama_cpp import LlamaCPP

    path = local_model_path(settings)
    try:
        llm = LlamaCPP(
            model_path=path,
            temperature=settings.temperature,
            max_new_tokens=settings.max_tokens,
            context_window=settings.n_ctx,
            messages_to_prompt=chatml,
            completion_to_prompt=lambda text: chatml([]) + text,
            generate_kwargs={"stop": ["<|im_end|>", "<|endoftext|>"]},
            model_kwargs={
                "n_threads": settings.threads or os.cpu_count() or 1,
                "verbose": False,
            },
            verbose=False,
        )
    except Exception as err:  # llama.cpp reports a bad file as ValueError or RuntimeError
        raise BackendError(f"cannot load {path}: {_describe(err)}") from err
    return LlamaIndexBackend("local", os.path.basename(path), llm, threading.Lock())


def _openai(settings: LLMSettings) -> Backend:
    import httpx
    from llama_index.llms.openai_like import OpenAILike

    if not settings.base_url:
        raise BackendError("RAG_LLM=openai needs RAG_LLM_BASE_URL (e.g. http://127.0.0.1:8080/v1)")
    timeout = httpx.Timeout(settings.timeout, connect=settings.connect_timeout)
    llm = OpenAILike(  # type: ignore[call-arg]  # http_client is an OpenAI init argument
        model=settings.model or "default",
        api_base=settings.base_url,
        api_key=settings.api_key.get_secret_value(),
        is_chat_model=True,
        context_window=settings.n_ctx,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        # The OpenAI client retries connection errors, 408/409/429 and 5xx with jittered
        # exponential backoff, at most `retries` times.
        max_retries=settings.retries,
        timeout=settings.timeout,
        http_client=httpx.Client(timeout=timeout),
    )
    # Requests are independent: no lock needed, so a dummy one that is never contended.
    return _Unlocked("openai", settings.model or "default", llm)


class _Unlocked(LlamaIndexBackend):
    def __init__(self, name: str, model: str, llm: LLM) -> None:
        super().__init__(name, model, llm, _NoLock())


class _NoLock(AbstractContextManager[None]):
    def __exit__(self, *exc: object) -> None:
        return None
