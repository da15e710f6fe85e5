"""Follow-up questions: rewritten with the chat history into standalone ones.

"and which of those use diffusion?" asks about the papers of the previous answer, so it is
searched within them (a constraint a small model's rewrite tends to drop, so rules keep it);
"how fast is it?" after an answer about one paper names that paper, and after one about several
asks it of each of them. Only a follow-up that no
rule makes standalone is condensed by the model (LlamaIndex's condense-question prompt), and
the time that costs is in the answer's timings (`condense_ms`); the extractive writer has no
model, and keeps the question as asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rag.answer import Answer, Answerer, clean_text
from rag.llm import BackendError
from rag.query import follow_up, looks_like_follow_up, replace_it


@dataclass
class Turn:
    question: str
    standalone: str
    answer: Answer


@dataclass
class Conversation:
    """One user's chat: its own history, never shared between sessions."""

    turns: list[Turn] = field(default_factory=list)

    def is_follow_up(self, question: str) -> bool:
        return bool(self.turns) and looks_like_follow_up(question)

    def condense(self, answerer: Answerer, question: str) -> str | None:
        """The LLM's standalone rewrite of a follow-up, or None if unusable or unavailable."""
        from llama_index.core.chat_engine.condense_question import DEFAULT_TEMPLATE

        if not self.is_follow_up(question):
            return None
        history = "\n".join(
            f"Human: {t.standalone}\nAssistant: {clean_text(t.answer.text)[:400]}"
            for t in self.turns[-2:]
        )
        prompt = DEFAULT_TEMPLATE.format(chat_history=history, question=question)
        try:
            text = answerer.writer.rewrite(
                "Rewrite questions; reply with the question only.", prompt
            )
        except BackendError:
            return None
        if text is None:
            return None
        text = " ".join(text.strip().strip('"').split())
        usable = 3 <= len(text.split()) <= 3 * len(question.split()) + 25 and "\n" not in text
        return text if usable else None

    def rewrite(self, question: str) -> tuple[str, set[str] | None]:
        """The standalone question and, for "of those" follow-ups, the papers to search in."""
        if not self.turns:
            return question, None
        last = self.turns[-1].answer
        ids = {s.paper.id for s in last.sources}
        f = follow_up(question)
        if ids and f.of_those:
            return f.rest, ids
        # "it" is the one paper the previous question named, else the one its answer cited.
        named = [s for s in last.sources if s.paper.id in last.named]
        cited = named if len(named) == 1 else last.citations or last.sources[:1]
        if len(cited) == 1 and f.about_it:
            return replace_it(question, cited[0].paper.display_name), None
        if len(cited) > 1 and f.about_it:
            # "it" after an answer about several papers does not say which: the answer covers
            # each of them, searched within them (the model's rewrite would pick a list line).
            return replace_it(question, "each of these papers"), {s.paper.id for s in cited}
        return question, None

    def ask(self, answerer: Answerer, question: str, **kwargs: object) -> tuple[Answer, str]:
        standalone, within = self.rewrite(question)
        condensed = None
        if within is None and standalone == question:  # no rule resolved it
            started = time.perf_counter()
            if (text := self.condense(answerer, question)) is not None:
                standalone, condensed = text, time.perf_counter() - started
        answer = answerer.ask(standalone, within=within, **kwargs)  # type: ignore[arg-type]
        if condensed is not None:
            answer.timings["condense_ms"] = round(condensed * 1000, 1)
            answer.timings["total_ms"] = answer.timings.get("total_ms", 0.0) + round(
                condensed * 1000, 1
            )
        self.turns.append(Turn(question, standalone, answer))
        return answer, standalone
