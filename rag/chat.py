"""Follow-up questions: rewritten with the chat history into standalone ones.

"and which of those use diffusion?" asks about the papers of the previous answer, so it is
searched within them; "how fast is it?" after an answer about one paper names that paper.
The rewrite is rule-based for every backend: on this CPU an LLM condense step costs a second
model call per turn (about five seconds with the 1.5B model) and small models drop the
constraint ("of those") more often than rules miss it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag.answer import Answer, Answerer

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
        answer = answerer.ask(standalone, within=within, **kwargs)  # type: ignore[arg-type]
        self.turns.append(Turn(question, standalone, answer))
        return answer, standalone
