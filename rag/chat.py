"""Follow-up questions: rewritten with the chat history into standalone ones.

"and which of those use diffusion?" asks about the papers of the previous answer, so it is
searched within them (a constraint a small model's rewrite tends to drop, so rules keep it);
"how fast is it?" after an answer about one paper names that paper. With an LLM backend, a
follow-up is also condensed by the model with LlamaIndex's condense-question prompt; the
rule-based rewrite is the extractive backend's, and the fallback when the model's rewrite is
unusable. Only questions that look like follow-ups pay for the extra model call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag.answer import Answer, Answerer, clean_text
from rag.llm import BackendError

_OF_THOSE = re.compile(
    r"\b(?:(?:which|what|how many|any)\s+(?:ones?\s+)?of\s+(?:those|these|them|the above)|"
    r"among\s+(?:those|these|them)|of\s+(?:those|these|them)|(?:those|these)\s+(?:papers|ones)|"
    r"they|them|their)\b",
    re.IGNORECASE,
)
_LEAD = re.compile(r"^\s*(?:and|also|so|ok(?:ay)?|then|but)\b[\s,]*", re.IGNORECASE)
_IT = re.compile(
    r"\b(?:it|its|this (?:paper|method|model|work)|that (?:paper|method|model))\b", re.IGNORECASE
)


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
        return bool(self.turns) and bool(
            _OF_THOSE.search(question) or _IT.search(question) or _LEAD.match(question)
        )

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
        if ids and _OF_THOSE.search(question):
            query = _OF_THOSE.sub(" ", _LEAD.sub("", question))
            query = re.sub(r"^\s*(?:which|what)\b", "", query, flags=re.I)
            return " ".join(query.split()).strip(" ?") or question, ids
        cited = last.citations or last.sources[:1]
        if len(cited) == 1 and _IT.search(question):
            name = cited[0].paper.display_name
            return _IT.sub(name, _LEAD.sub("", question), count=1), None
        return question, None

    def ask(self, answerer: Answerer, question: str, **kwargs: object) -> tuple[Answer, str]:
        standalone, within = self.rewrite(question)
        if within is None:
            standalone = self.condense(answerer, question) or standalone
        answer = answerer.ask(standalone, within=within, **kwargs)  # type: ignore[arg-type]
        self.turns.append(Turn(question, standalone, answer))
        return answer, standalone
