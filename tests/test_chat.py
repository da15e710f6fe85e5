from __future__ import annotations

from rag.answer import Answerer
from rag.chat import Conversation
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings

from .stand_ins import Judged
from .test_answer import ScriptedBackend


def extractive(settings: Settings) -> Answerer:
    settings = settings.model_copy(deep=True)
    settings.llm = settings.llm.model_copy(update={"backend": "extractive"})
    return Answerer(Retriever(PaperIndex(settings)), settings)


def test_of_those_searches_the_previous_papers(fake_seed: Settings) -> None:
    a = extractive(fake_seed)
    a.retriever.relevance = Judged({"spars", "autoencod", "time", "seri"})
    conv = Conversation()
    first, _ = conv.ask(a, "Which papers use sparse autoencoders?")
    earlier = {s.paper.id for s in first.sources}
    second, standalone = conv.ask(a, "and which of those study time series?")
    assert standalone == "study time series"
    got = {s.paper.id for s in second.sources}
    assert got and got <= earlier and got != earlier
    assert all("time series" in s.paper.abstract.lower() for s in second.sources)


def test_it_names_the_paper_of_the_previous_answer(fake_seed: Settings) -> None:
    a = extractive(fake_seed)
    conv = Conversation()
    conv.ask(a, "how much faster is FS-DFM?")
    answer, standalone = conv.ask(a, "how many sampling steps does it use?")
    assert "FS-DFM" in standalone and answer.sources[0].paper.display_name == "FS-DFM"


def test_it_is_the_paper_the_previous_question_named(fake_seed: Settings) -> None:
    # The answer to "What is Directo?" quotes several sources; "it" is still Directo.
    a = extractive(fake_seed)
    conv = Conversation()
    first, _ = conv.ask(a, "What is Directo?")
    assert len(first.citations) > 1
    answer, standalone = conv.ask(a, "How does it work?")
    assert standalone == "How does Directo work?"
    assert answer.sources[0].paper.display_name == "Directo"


def test_it_after_several_papers_asks_of_each_of_them(fake_seed: Settings) -> None:
    # "it" after a list does not say which paper: no rewrite may pick one of the list's lines.
    a = extractive(fake_seed)
    a.retriever.relevance = Judged({"spars", "autoencod"})
    conv = Conversation()
    first, _ = conv.ask(a, "Which papers use sparse autoencoders?")
    listed = {s.paper.id for s in first.citations}
    assert len(listed) > 1
    answer, standalone = conv.ask(a, "and what does it build on?")
    assert standalone == "what does each of these papers build on?"
    assert {s.paper.id for s in answer.sources} <= listed
    assert not any(s.paper.display_name in standalone for s in first.sources)


def test_llm_backend_condenses_only_follow_ups_no_rule_resolves(fake_seed: Settings) -> None:
    backend = ScriptedBackend("What benchmark does SOTAlign evaluate on?")
    a = Answerer(Retriever(PaperIndex(fake_seed)), fake_seed, backend=backend)
    conv = Conversation()
    conv.ask(a, "What is SOTAlign?")

    # "it" names the one paper of the last answer: a rule rewrites it, with no model call.
    def condensed() -> int:
        return sum("<Follow Up Message>" in p for p in backend.prompts)

    answer, standalone = conv.ask(a, "and what does it evaluate on?")
    assert standalone == "what does SOTAlign evaluate on?"
    assert condensed() == 0 and "condense_ms" not in answer.timings
    # A follow-up no rule resolves is condensed by the model, and the time it took is kept.
    answer, standalone = conv.ask(a, "and on which benchmarks?")
    assert standalone == "What benchmark does SOTAlign evaluate on?"
    assert condensed() == 1 and answer.timings["condense_ms"] >= 0
    # A first question, or one that is not a follow-up, costs no rewrite call.
    conv.ask(a, "How much faster is FS-DFM?")
    assert condensed() == 1
