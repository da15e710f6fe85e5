"""The one query engine: the CLI, the page and the evals ask it, and so can LlamaIndex."""

from __future__ import annotations

import pytest
from llama_index.core.chat_engine import CondenseQuestionChatEngine
from llama_index.core.evaluation import FaithfulnessEvaluator
from llama_index.core.llms import MockLLM
from llama_index.core.tools import QueryEngineTool

from rag.chat import Conversation
from rag.engine import Engine
from rag.settings import Settings
from rag.writers import ExtractiveWriter, ModelWriter, make_writer, register_writer

from .stand_ins import Judged
from .test_answer import ScriptedBackend

REPLY = (
    "FS-DFM with 8 sampling steps achieves perplexity parity with a 1,024-step "
    "discrete-flow baseline, delivering up to 128× faster sampling [1]."
)


def scripted(settings: Settings, reply: str = REPLY) -> tuple[Engine, ScriptedBackend]:
    backend = ScriptedBackend(reply)
    return Engine(settings, writer=ModelWriter(settings.llm, backend)), backend


def test_the_engine_answers_and_follows_a_conversation(fake_seed: Settings) -> None:
    engine, _ = scripted(fake_seed)
    answer = engine.ask("How much faster is FS-DFM?")
    assert answer.written_by == "model" and answer.citations[0].paper.display_name == "FS-DFM"
    conv = Conversation()
    engine.ask("How much faster is FS-DFM?", conv)
    engine.ask("and how many steps does it use?", conv)
    assert [t.standalone for t in conv.turns][-1] == "how many steps does FS-DFM use?"


def test_another_writer_shares_the_index_and_retriever(fake_seed: Settings) -> None:
    engine, _ = scripted(fake_seed)
    other = engine.with_backend("extractive")
    assert other.retriever is engine.retriever and isinstance(other.writer, ExtractiveWriter)
    assert engine.with_backend("extractive") is other
    answer = other.ask("How much faster is FS-DFM?")
    assert answer.written_by == "extractive" and answer.backend == "extractive"


def test_writers_are_registered_by_name(fake_seed: Settings) -> None:
    llm = fake_seed.llm.model_copy(update={"backend": "extractive"})
    assert isinstance(make_writer(llm), ExtractiveWriter)
    register_writer("shout", lambda s: ExtractiveWriter())
    try:
        assert isinstance(make_writer(llm.model_construct(backend="shout")), ExtractiveWriter)
    finally:
        from rag import writers

        writers._WRITERS.pop("shout")
    with pytest.raises(ValueError, match="unknown answer backend"):
        make_writer(llm.model_construct(backend="nope"))


def test_as_a_llamaindex_query_engine_the_cited_papers_are_source_nodes(
    fake_seed: Settings,
) -> None:
    engine, _ = scripted(fake_seed)
    response = engine.query_engine().query("How much faster is FS-DFM?")
    assert "128×" in str(response) and response.metadata["abstained"] is False
    [node] = response.source_nodes
    assert node.node.metadata["display_name"] == "FS-DFM" and "128" in node.node.get_content()
    assert response.metadata["answer"]["written_by"] == "model"
    # An abstention is an answer too: its text says so, its sources are what was closest.
    engine.retriever.relevance = Judged({"trajectori", "autonom", "drive"})
    none = engine.query_engine().query("trajectory prediction for autonomous driving")
    assert none.metadata["abstained"] and "None of the indexed papers answers this" in str(none)


def test_llamaindex_chat_engines_agents_and_evaluators_use_it(fake_seed: Settings) -> None:
    engine, _ = scripted(fake_seed)
    qe = engine.query_engine()
    chat = CondenseQuestionChatEngine.from_defaults(query_engine=qe, llm=MockLLM())
    reply = chat.chat("How much faster is FS-DFM?")
    assert "128×" in str(reply) and reply.source_nodes
    tool = QueryEngineTool.from_defaults(qe, name="papers", description="Ask the papers.")
    assert "128×" in str(tool.call("How much faster is FS-DFM?"))
    response = qe.query("How much faster is FS-DFM?")
    result = FaithfulnessEvaluator(llm=MockLLM()).evaluate_response(response=response)
    assert result.contexts and "128" in result.contexts[0]


@pytest.mark.llm
@pytest.mark.slow
def test_a_llamaindex_chat_engine_with_the_real_model(seed_readonly: Settings) -> None:
    # Mechanics, so the 0.5B: LlamaIndex's chat engine condenses the follow-up with a real
    # model and gets our cited papers back as source nodes. What the default 1.5B writes for
    # this question is checked in the page's test (tests/test_ui.py) and by the evals.
    settings = seed_readonly.model_copy(
        update={"llm": seed_readonly.llm.model_copy(update={"local_model": "qwen2.5-coder-0.5b"})}
    )
    engine = Engine(settings)
    writer = engine.writer
    assert isinstance(writer, ModelWriter)
    llm = writer.backend.llm  # type: ignore[attr-defined]
    chat = CondenseQuestionChatEngine.from_defaults(query_engine=engine.query_engine(), llm=llm)
    first = chat.chat("How much faster is FS-DFM?")
    names = {n.node.metadata["display_name"] for n in first.source_nodes}
    assert "FS-DFM" in names and str(first).strip(), (str(first), names)
    second = chat.chat("And how many sampling steps does it need for that?")
    names = {n.node.metadata["display_name"] for n in second.source_nodes}
    assert "FS-DFM" in names, (str(second), names)
