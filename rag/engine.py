"""The query engine: the whole path, wired once.

question -> `Query` (rag.query) -> retrieval (rag.retrieve) -> answer (rag.answer, by the
writer the settings name) -> checked citations. The CLI, the chat page and the evals all ask
an `Engine`; `Engine.query_engine()` is the same path as a LlamaIndex query engine, so
LlamaIndex chat engines, agents and evaluators can use it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ConfigDict

from rag.answer import Answer, Answerer, Source
from rag.chat import Conversation
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings
from rag.verify import Verifier
from rag.writers import Writer


class Engine:
    """Index, retriever and answerer for one set of settings, made once and shared."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        index: PaperIndex | None = None,
        retriever: Retriever | None = None,
        writer: Writer | None = None,
        verifier: Verifier | None = None,
    ) -> None:
        self.settings = settings or (index.settings if index is not None else Settings())
        if retriever is not None:
            index = retriever.index
        self.index = index or PaperIndex(self.settings)
        self.retriever = retriever or Retriever(self.index)
        self.answerer = Answerer(self.retriever, self.settings, verifier=verifier, writer=writer)
        self._others: dict[str, Engine] = {}
        self._lock = threading.Lock()

    @property
    def writer(self) -> Writer:
        return self.answerer.writer

    def with_backend(self, backend: str) -> Engine:
        """The same index and retriever, answered by another writer (the page's choice)."""
        if backend == self.settings.llm.backend:
            return self
        with self._lock:
            if backend not in self._others:
                settings = self.settings.model_copy(deep=True)
                settings.llm = settings.llm.model_copy(update={"backend": backend})
                self._others[backend] = Engine(settings, retriever=self.retriever)
            return self._others[backend]

    def ask(
        self,
        question: str,
        conversation: Conversation | None = None,
        *,
        k: int | None = None,
        author: str | None = None,
        track: str | None = None,
        on_token: Callable[[str], None] | None = None,
        on_sources: Callable[[list[Source]], None] | None = None,
    ) -> Answer:
        """One question; with a `conversation`, a follow-up read against its earlier turns."""
        if conversation is None:
            return self.answerer.ask(
                question, k=k, author=author, track=track, on_token=on_token, on_sources=on_sources
            )
        answer, _ = conversation.ask(
            self.answerer,
            question,
            k=k,
            author=author,
            track=track,
            on_token=on_token,
            on_sources=on_sources,
        )
        return answer

    def query_engine(self) -> PaperQueryEngine:
        return PaperQueryEngine(engine=self)


def source_node(source: Source) -> NodeWithScore:
    """A cited paper as LlamaIndex sees a source: its abstract, with the paper's metadata."""
    p = source.paper
    node = TextNode(
        id_=p.id,
        text=p.abstract,
        metadata={
            "paper_id": p.id,
            "n": source.n,
            "display_name": p.display_name,
            "title": p.title,
            "authors": ", ".join(p.authors),
            "track": p.track,
        },
    )
    return NodeWithScore(node=node, score=source.score)


class PaperQueryEngine(CustomQueryEngine):
    """The Engine as a LlamaIndex query engine: the checked answer as the response text, the
    papers it cites as `source_nodes` (all its sources when it abstained), and the whole
    answer (`Answer.to_dict()`) in the metadata."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    engine: Any

    def custom_query(self, query_str: str) -> Response:
        answer: Answer = self.engine.ask(query_str)
        cited = answer.citations or answer.sources
        return Response(
            response=answer.text,
            source_nodes=[source_node(s) for s in cited],
            metadata={"answer": answer.to_dict(), "abstained": answer.abstained},
        )
