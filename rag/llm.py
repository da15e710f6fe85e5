"""Answer-writing backends behind one small interface.

- `local`: a GGUF run in-process by llama.cpp, through LlamaIndex's `LlamaCPP`;
- `openai`: any OpenAI-compatible endpoint, through LlamaIndex's `OpenAILike`;
- `extractive`: no LLM (handled by rag.answer; it has no backend object).
"""

from __future__ import annotations

import atexit
import email.utils
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rag.models import ensure_model
from rag.settings import LLMSettings

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms import LLM


class BackendError(RuntimeError):
    """The LLM failed (after retries); the caller falls back to an extractive answer."""


class AnswerCutOff(BackendError):
    """The model's reply stopped part way (the stream broke, stalled or ended unfinished).

    Not retried: its first part has already been shown, and a retry would pay for the whole
    generation again; the caller falls back to an extractive answer and says why.
    """


# A question waits at most this long on an endpoint's Retry-After; asked to wait longer, it
# gives up at once and the extractive answer is shown instead of a spinner.
MAX_RETRY_AFTER = 10.0
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 4.0
_RETRY_STATUS = {408, 409, 429}


class NoReading(BackendError):
    """The backend answered but gives no log-probabilities (not a failure: nothing to read)."""


class _Unfinished(Exception):
    """The endpoint closed the stream before the model said it had finished."""


class Backend(Protocol):
    name: str
    model: str

    def stream(self, system: str, user: str) -> Iterator[str]:
        """Yields the answer's text as it is generated."""
        ...

    def first_token(self, system: str, user: str, options: Sequence[str]) -> dict[str, float]:
        """Each option's log-probability as the reply's first token, nothing generated;
        raises BackendError when the backend cannot say."""
        ...


# How a backend reads first-token log-probabilities: (system, user, options) -> logprobs.
Scorer = Callable[[str, str, Sequence[str]], dict[str, float]]


def chatml(messages: Sequence[ChatMessage]) -> str:
    """The ChatML prompt Qwen2.5 and SmolLM2 were tuned on (both use <|im_start|>)."""
    out = [f"<|im_start|>{m.role.value}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(out) + "<|im_start|>assistant\n"


@dataclass
class LlamaIndexBackend:
    """Any LlamaIndex LLM, streamed through its chat interface.

    `retries` failed requests are retried with jittered exponential backoff (or after the
    endpoint's Retry-After, when that is at most MAX_RETRY_AFTER seconds), but only while
    nothing of the reply has been received. With `check_finish`, a stream that ends without
    a finish_reason (an OpenAI stream cut before its last chunk and `[DONE]`) is a failure.
    After a failure, questions skip the backend for `cooldown` seconds (or as long as the
    endpoint asked): with the endpoint down, every user would otherwise wait out all the
    retries, and a follow-up twice (its rewrite and its answer).
    """

    name: str
    model: str
    llm: LLM
    lock: AbstractContextManager[Any]
    retries: int = 0
    check_finish: bool = False
    cooldown: float = 0.0
    scorer: Scorer | None = None
    _down: tuple[float, str] | None = field(default=None, init=False, repr=False)

    def first_token(self, system: str, user: str, options: Sequence[str]) -> dict[str, float]:
        """One request, retried and rested after as `stream` is; NoReading when the backend
        gives no log-probabilities (it is then not asked for them again)."""
        if self.scorer is None:
            raise NoReading(f"the {self.name} backend gives no log-probabilities")
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise BackendError(f"{down[1]}; not asked again for {down[0] - time.monotonic():.0f}s")
        with self.lock:
            for attempt in range(self.retries + 1):
                try:
                    scores = self.scorer(system, user, options)
                    self._down = None
                    return scores
                except NoReading:
                    self.scorer = None
                    raise
                except Exception as err:  # as in stream: any client error means "no reading"
                    self._failed(err, attempt)
        raise AssertionError("unreachable: the last attempt raises")

    def _failed(self, err: Exception, attempt: int) -> None:
        """Waits before the next attempt, or raises BackendError (resting, if set)."""
        asked = _asked_wait(err)
        wait = _retry_wait(err, attempt, self.retries, asked)
        if wait is None:
            tries = f" after {attempt + 1} attempts" if attempt else ""
            why = ""
            if asked is not None and asked > MAX_RETRY_AFTER:
                why = f" (the endpoint asks to wait {asked:.0f}s)"
            message = f"{self.name} backend failed{tries}: {_describe(err)}{why}"
            rest = max(self.cooldown, asked or 0.0) if self.cooldown else 0.0
            if rest:
                self._down = (time.monotonic() + rest, message)
            raise BackendError(message) from err
        time.sleep(wait)

    def stream(self, system: str, user: str) -> Iterator[str]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        messages = [
            ChatMessage(role=MessageRole.SYSTEM, content=system),
            ChatMessage(role=MessageRole.USER, content=user),
        ]
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise BackendError(f"{down[1]}; not asked again for {down[0] - time.monotonic():.0f}s")
        # One llama.cpp context cannot serve two generations at once; the endpoint can.
        with self.lock:
            for attempt in range(self.retries + 1):
                received = False
                finished = not self.check_finish
                try:
                    for chunk in self.llm.stream_chat(messages):
                        finished = finished or _has_finish_reason(chunk.raw)
                        if chunk.delta:
                            received = True
                            yield chunk.delta
                    if not finished:
                        raise _Unfinished("the stream ended before the model finished")
                    self._down = None
                    return
                except Exception as err:  # the client raises many kinds; all mean "no answer"
                    if received:
                        why = str(err) if isinstance(err, _Unfinished) else _describe(err)
                        raise AnswerCutOff(f"{self.name} backend: {why}") from err
                    self._failed(err, attempt)


def _has_finish_reason(raw: Any) -> bool:
    """Whether an OpenAI stream chunk is the model's last (it carries a finish_reason)."""
    return any(getattr(c, "finish_reason", None) for c in getattr(raw, "choices", None) or ())


def _retry_wait(err: Exception, attempt: int, retries: int, asked: float | None) -> float | None:
    """Seconds to wait before retrying `err`, or None to give up."""
    import httpx
    import openai

    if isinstance(err, openai.APIStatusError):
        retryable = err.status_code in _RETRY_STATUS or err.status_code >= 500
    else:
        retryable = isinstance(err, openai.APIConnectionError | httpx.TransportError | _Unfinished)
    if not retryable or attempt >= retries or (asked is not None and asked > MAX_RETRY_AFTER):
        return None
    if asked is not None:
        return max(asked, 0.0)
    return min(BACKOFF_FIRST * 2**attempt, BACKOFF_MAX) * random.uniform(0.5, 1.0)


def _asked_wait(err: Exception) -> float | None:
    """The wait an error response asks for in its Retry-After, if any."""
    import openai

    return _retry_after(err.response.headers) if isinstance(err, openai.APIStatusError) else None


def _retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            when = email.utils.parsedate_tz(value)
            if when is None:
                continue
            seconds = email.utils.mktime_tz(when) - time.time()
        if math.isfinite(seconds):
            return seconds
    return None


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
        settings.connect_timeout,
        settings.retries,
        settings.cooldown,
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
            # 1.1, as llama_cpp.server and llama.cpp's own CLI default to: at 1.0 a small
            # model can loop on "[1] [1] [1] ..." until max_tokens.
            generate_kwargs={"stop": ["<|im_end|>", "<|endoftext|>"], "repeat_penalty": 1.1},
            model_kwargs={
                "n_threads": settings.threads or os.cpu_count() or 1,
                "verbose": False,
            },
            verbose=False,
        )
    except Exception as err:  # llama.cpp reports a bad file as ValueError or RuntimeError
        raise BackendError(f"cannot load {path}: {_describe(err)}") from err
    # Freed while the interpreter is whole: left to __del__ at exit, llama-cpp-python prints
    # "Exception ignored ... 'NoneType' object is not callable" after everything else.
    atexit.register(llm._model.close)
    return LlamaIndexBackend(
        "local", os.path.basename(path), llm, threading.Lock(), scorer=_llama_scorer(llm._model)
    )


def _llama_scorer(model: Any) -> Scorer:
    """First-token log-probabilities from llama.cpp's logits for the prompt's last token.

    Written here because llama-cpp-python gives logprobs only to a model made with
    logits_all (a vocabulary-wide row per context position, 2.4 GB at 4,096 tokens); this
    reads the one row the context keeps. The evaluated prefix shared with the last prompt
    is kept, as `Llama.generate` keeps it, so the answer that follows reads only its tail.
    """
    import numpy as np
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    def score(system: str, user: str, options: Sequence[str]) -> dict[str, float]:
        prompt = chatml(
            [
                ChatMessage(role=MessageRole.SYSTEM, content=system),
                ChatMessage(role=MessageRole.USER, content=user),
            ]
        )
        tokens = model.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) >= model.n_ctx():
            raise BackendError(f"the prompt ({len(tokens)} tokens) does not fit the context")
        kept = 0
        for a, b in zip(model.input_ids[: model.n_tokens], tokens[:-1], strict=False):
            if a != b:
                break
            kept += 1
        model.n_tokens = kept
        model.eval(tokens[kept:])
        logits = np.ctypeslib.as_array(model._ctx.get_logits(), shape=(model.n_vocab(),))
        top = float(logits.max())
        norm = top + float(np.log(np.exp(logits - top).sum()))
        out = {}
        for option in options:
            first = model.tokenize(option.encode("utf-8"), add_bos=False, special=False)[0]
            out[option] = float(logits[first]) - norm
        return out

    return score


def _openai(settings: LLMSettings) -> Backend:
    import httpx
    from llama_index.llms.openai_like import OpenAILike

    if not settings.base_url:
        raise BackendError("RAG_LLM=openai needs RAG_LLM_BASE_URL (e.g. http://127.0.0.1:8080/v1)")

    class _OpenAILike(OpenAILike):
        def _get_credential_kwargs(self, is_async: bool = False) -> dict[str, Any]:
            # Without a timeout of its own the OpenAI client uses the http client's, which
            # has the short connect timeout (a float here would apply to every phase).
            kwargs = super()._get_credential_kwargs(is_async)
            kwargs.pop("timeout", None)
            return kwargs

    timeout = httpx.Timeout(settings.timeout, connect=settings.connect_timeout)
    llm = _OpenAILike(  # type: ignore[call-arg]  # http_client is an OpenAI init argument
        model=settings.model or "default",
        api_base=settings.base_url,
        api_key=settings.api_key.get_secret_value(),
        is_chat_model=True,
        context_window=settings.n_ctx,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        # LlamaIndexBackend retries, not the client: the client's own retries would honour a
        # Retry-After of up to two minutes, and cannot tell a reply cut off part way.
        max_retries=0,
        timeout=settings.timeout,
        http_client=httpx.Client(timeout=timeout),
    )
    # Requests are independent: no lock needed, so a dummy one that is never contended.
    return LlamaIndexBackend(
        "openai",
        settings.model or "default",
        llm,
        _NoLock(),
        retries=settings.retries,
        check_finish=True,
        cooldown=settings.cooldown,
        scorer=_openai_scorer(llm),
    )


# Top log-probabilities an OpenAI-compatible endpoint is asked for (20 is OpenAI's maximum).
TOP_LOGPROBS = 20


def _openai_scorer(llm: Any) -> Scorer:
    """First-token log-probabilities from one-token chat completion's `top_logprobs`. An
    option the endpoint does not list is given the least listed one, an upper bound."""

    def score(system: str, user: str, options: Sequence[str]) -> dict[str, float]:
        reply = llm._get_client().chat.completions.create(
            model=llm.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_tokens=1,
            temperature=0.0,
            logprobs=True,
            top_logprobs=TOP_LOGPROBS,
        )
        content = reply.choices[0].logprobs.content if reply.choices[0].logprobs else None
        if not content or not content[0].top_logprobs:
            raise NoReading("the endpoint gave no log-probabilities")
        listed: dict[str, float] = {}
        for t in content[0].top_logprobs:
            listed[t.token] = max(listed.get(t.token, -math.inf), t.logprob)
        floor = min(listed.values())
        return {o: listed.get(o, floor) for o in options}

    return score


class _NoLock(AbstractContextManager[None]):
    def __exit__(self, *exc: object) -> None:
        return None
