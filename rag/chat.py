"""Follow-up questions: rewritten with the chat history into standalone ones.

"and which of those use diffusion?" asks about the papers of the previous answer, so it is
searched within them (a constraint a small model's rewrite tends to drop, so rules keep it);
"how fast is it?" after an answer about one paper names that paper. With an LLM backend, a
follow-up is also condensed by the model with LlamaIndex's condense-question prompt; the
rule-based rewrite is the extractive backend's, and the fallback when the model's rewrite is
unusable. Only questions that look like follow-ups pay for the extra model call.
"""

from __future__ import annotations

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

        if answerer.settings.llm.backend == "extractive" or not self.is_follow_up(question):
            return None
        history = "\n".join(
            f"Human: {t.standalone}\nAssistant: {clean_text(t.answer.text)[:400]}"
            for t in self.turns[-2:]
        )
        prompt = DEFAULT_TEMPLATE.format(chat_history=history, question=question)
        try:
            backend = answerer.backend()
            if backend is None:
                return None
            text = "".join(
                backend.stream("Rewrite questions; reply with the question only.", prompt)
            )
        except BackendError:
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
        cited = last.citations or last.sources[:1]
        if len(cited) == 1 and f.about_it:
            return replace_it(question, cited[0].paper.display_name), None
        return question, None

    def ask(self, answerer: Answerer, question: str, **kwargs: object) -> tuple[Answer, str]:
        standalone, within = self.rewrite(question)
        if within is None:
            standalone = self.condense(answerer, question) or standalone
        answer = answerer.ask(standalone, within=within, **kwargs)  # type: ignore[arg-type]
        self.turns.append(Turn(question, standalone, answer))
        return answer, standalone
