"""A stand-in for the fitted relevance model, for fast tests of what retrieval and answers do
with its judgement (the real one, fitted for the real embedding model, is tested slow)."""

from __future__ import annotations

import numpy as np

from rag.relevance import Evidence, RelevanceModel, TermWeights


class Judged(RelevanceModel):
    """A candidate is relevant when it writes every question term of `topic`, and a
    question is answerable when one does."""

    def __init__(self, topic: set[str]) -> None:
        self.topic = topic
        self.model_key = "stand-in"
        self.terms = TermWeights({}, 1.0)
        self.abstain_below = 0.5
        self.keep_from = {}
        self.topic_from = 0.5
        self.info = {}
        self.source = None

    def _writes(self, ev: Evidence) -> np.ndarray:
        asked = [i for i, t in enumerate(ev.terms) if t in self.topic]
        return np.array(
            [float(bool(asked) and all(c.has[i] for i in asked)) for c in ev.candidates]
        )

    def relevance(self, ev: Evidence) -> np.ndarray:
        return 0.9 * self._writes(ev) + 0.05

    def answerability(self, ev: Evidence, f: np.ndarray | None = None) -> float:
        return float(self._writes(ev).max(initial=0.0))

    def judge(self, ev: Evidence) -> tuple[np.ndarray, float]:
        return self.relevance(ev), self.answerability(ev)
