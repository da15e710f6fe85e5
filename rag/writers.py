"""Who writes an answer's words, behind one small interface.

- `local` and `openai`: a model (rag.llm's backends) writes from the prompt of rag.prompts;
- `extractive`: no model; the sources' own sentences that the question needs are quoted.

Every writer's output goes through the same checks in rag.answer (citations parsed and
repaired, every sentence verified against the source it cites). Writers are registered by
name, so another way of writing (a different prompt strategy, a remote service) is one
`register_writer` call, not a branch in each caller.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from rag.corpus import Paper
from rag.excerpts import Excerpt
from rag.llm import Backend, NoReading, make_backend
from rag.prompts import SYSTEM_PROMPT, Shape, user_prompt
from rag.sanitize import clean_text
from rag.settings import LLMSettings

EXTRACTIVE_SENTENCES = 3
# Sentences a model's answer may run to, per shape (the instruction asks for fewer): the
# stream is closed after them, so a rambling answer costs no more generation than this.
MAX_SENTENCES: dict[Shape, int | None] = {
    Shape.LIST: None,  # a line per item
    Shape.DETAIL: 2,
    Shape.YESNO: 3,
    Shape.EXPLAIN: 4,
    Shape.COMPARE: 4,
    Shape.RECOMMEND: 5,
}
_SENTENCE_END = re.compile(r"[.!?](?:\s*\[[\d,\s]+\])*\s+(?=\S)")


@dataclass(frozen=True)
class Draft:
    """What a writer is given: the question, the answer's shape and the numbered sources."""

    question: str
    shape: Shape
    numbers: tuple[int, ...]
    papers: tuple[Paper, ...]  # in the order of `numbers`
    excerpts: tuple[Excerpt, ...]
    strict: bool = False  # a redraft of a partly supported answer: keep to the sources' words
    retry: bool = False  # the last try, after an answer none of whose sentences held
    instruction: str = ""  # in place of the shape's (rag.prompts.VERDICT_LEADS, PREMISE_LEAD)


@dataclass
class Written:
    """A writer's answer: raw text to parse, or sentences already paired with citations."""

    text: str
    parts: list[tuple[str, list[int]]] | None = None
    own_words: bool = True  # written by a model, not quoted from the sources
    timings: dict[str, float] = field(default_factory=dict)


class Writer(Protocol):
    name: str

    @property
    def model(self) -> str: ...

    @property
    def loaded(self) -> bool: ...

    def write(self, draft: Draft, on_token: Callable[[str], None] | None = None) -> Written:
        """The answer for `draft`; raises rag.llm.BackendError when a model fails."""
        ...

    def rewrite(self, system: str, user: str) -> str | None:
        """A short completion (a follow-up made standalone), or None without a model."""
        ...

    def yes_log_odds(self, draft: Draft, ask: str) -> float | None:
        """The model's first-token log-odds of "Yes" over "No", asked `ask` about the
        draft's prompt; None without a model or when its backend cannot say; raises
        rag.llm.BackendError when the model fails."""
        ...

    def reads(self, user: str) -> float | None:
        """The same log-odds for any user message (rag.prompts.claim_prompt)."""
        ...


class ModelWriter:
    """A model writes the answer: the shape's prompt, streamed through a backend."""

    def __init__(self, settings: LLMSettings, backend: Backend | None = None) -> None:
        self.name: str = settings.backend
        self.settings = settings
        self._backend = backend
        self._lock = threading.Lock()

    @property
    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = make_backend(self.settings)
            return self._backend

    @property
    def model(self) -> str:
        return self._backend.model if self._backend is not None else ""

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def write(self, draft: Draft, on_token: Callable[[str], None] | None = None) -> Written:
        user = _prompt(draft)
        backend = self.backend
        started = time.perf_counter()
        chunks: list[str] = []
        timings: dict[str, float] = {}
        cap = MAX_SENTENCES[draft.shape] or len(draft.numbers)
        stream = backend.stream(SYSTEM_PROMPT, user)
        try:
            for delta in stream:
                if not chunks:
                    timings["first_token_ms"] = round((time.perf_counter() - started) * 1000, 1)
                chunks.append(delta)
                if on_token:
                    on_token(delta)
                ends = list(_SENTENCE_END.finditer("".join(chunks)))
                if len(ends) >= cap:
                    # The next sentence has begun: what came before it is the answer.
                    chunks = ["".join(chunks)[: ends[cap - 1].end()]]
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # stops the generation (llama.cpp) or the HTTP stream
        timings["generate_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return Written("".join(chunks), timings=timings)

    def rewrite(self, system: str, user: str) -> str | None:
        return "".join(self.backend.stream(system, user))

    def yes_log_odds(self, draft: Draft, ask: str) -> float | None:
        return self.reads(_prompt(replace(draft, instruction=ask)))

    def reads(self, user: str) -> float | None:
        first_token = getattr(self.backend, "first_token", None)
        if first_token is None:
            return None
        try:
            lp = first_token(SYSTEM_PROMPT, user, ("Yes", "No"))
        except NoReading:
            return None
        return float(lp["Yes"] - lp["No"])


def _prompt(draft: Draft) -> str:
    texts = [" ".join(e.sentences) for e in draft.excerpts]
    return user_prompt(
        draft.question,
        draft.shape,
        draft.numbers,
        draft.papers,
        texts,
        draft.strict,
        draft.retry,
        draft.instruction,
    )


class ExtractiveWriter:
    """No model: each source's sentence that the question needs, quoted and cited."""

    name = "extractive"
    model = ""
    loaded = True

    def write(self, draft: Draft, on_token: Callable[[str], None] | None = None) -> Written:
        parts: list[tuple[str, list[int]]] = []
        if draft.shape is Shape.LIST:
            return Written("", parts, own_words=False)  # the items say it: no overview
        for n, paper, excerpt in zip(draft.numbers, draft.papers, draft.excerpts, strict=True):
            # Sources the excerpter left out as too weakly related have no sentences.
            if excerpt.sentences and excerpt.best and len(parts) < EXTRACTIVE_SENTENCES:
                name = clean_text(paper.display_name)
                parts.append((f"{name}: {excerpt.best}", [n]))
        text = " ".join(f"{t} [{c[0]}]" for t, c in parts)
        if on_token and text:
            on_token(text)
        return Written(text, parts, own_words=False)

    def rewrite(self, system: str, user: str) -> str | None:
        return None

    def yes_log_odds(self, draft: Draft, ask: str) -> float | None:
        return None

    def reads(self, user: str) -> float | None:
        return None


WriterFactory = Callable[[LLMSettings], Writer]
_WRITERS: dict[str, WriterFactory] = {
    "local": ModelWriter,
    "openai": ModelWriter,
    "extractive": lambda settings: ExtractiveWriter(),
}


def register_writer(name: str, factory: WriterFactory) -> None:
    """Make `RAG_LLM=<name>` (and the page's choice of that name) use this writer."""
    _WRITERS[name] = factory


def make_writer(settings: LLMSettings) -> Writer:
    """The writer that `settings.backend` names; models load on their first answer."""
    try:
        factory = _WRITERS[settings.backend]
    except KeyError:
        raise ValueError(
            f"unknown answer backend {settings.backend!r} (known: {', '.join(_WRITERS)})"
        ) from None
    return factory(settings)
