"""The sentences of a source abstract that a question needs.

The prompt holds only these (prompt length is what costs on a CPU), extractive answers quote
them, and a list item's gist is the sentence in which a paper says what it does. Sentences
are scored against the question with the paper's own names taken out of it: every sentence
of a paper the question names shares that name, so the name says nothing about which one
answers ("what does FS-DFM build on?" wants the sentence about its idea, not its speed).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag.corpus import Paper
from rag.embed import cosine
from rag.sanitize import source_sentences
from rag.text import STOPWORDS, contribution_at, stems, word_list

if TYPE_CHECKING:
    from rag.query import Asks

# A sentence's score is its cosine to the question plus this much per content word (stem) the
# two share: words the question repeats tell sentences of one abstract apart where cosines tie.
OVERLAP_WEIGHT = 0.03
# A question asking for a detail wants a sentence with a number; this is about one shared
# word's worth of cosine, enough to prefer the number among sentences equally close.
NUMBER_BONUS = 0.1
# A source joins the first in front of the writer only when its best sentence is about as
# close to the question (within the margin) and close in absolute terms: a weakly related
# source's sentences crowd out the first one's, and a small model then writes from them.
RELEVANT_MIN = 0.45
RELEVANT_MARGIN = 0.12
# A gist is one sentence; a run-on one (a flattened list, a table) is cut.
GIST_CHARS = 400
_NUMBER = re.compile(r"\d")
_DROP = STOPWORDS | word_list("generic") | word_list("question")


@dataclass(frozen=True)
class Excerpt:
    """What of one source goes in front of the writer."""

    sentences: tuple[str, ...]  # chosen, in the abstract's order (a detail's `best` first)
    best: str  # the one most like the question
    score: float  # how like the question `best` is
    gist: str  # the sentence that says what the paper does


def _without_names(question: str, paper: Paper) -> str:
    """The question with the paper's own names (coined names, display name, title) taken out."""
    out = question
    for name in sorted({*paper.names, paper.display_name, paper.title}, key=len, reverse=True):
        if name and len(name) > 1:
            out = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", " ", out, flags=re.IGNORECASE)
    out = " ".join(out.split())
    return out if len(out.split()) >= 2 else question


def _rarity(sentences: Sequence[set[str]]) -> dict[str, float]:
    """Each word's weight in telling one abstract's sentences apart: 1 in a single sentence,
    0 in all (log-scaled between). Words the whole abstract repeats name the paper, not the
    sentence: "spectral attention" is in most of its sentences, "classification accuracy" in
    the one with the figure."""
    n = len(sentences)
    df: dict[str, int] = {}
    for own in sentences:
        for w in own:
            df[w] = df.get(w, 0) + 1
    return {w: math.log(n / d) / math.log(n) if n > 1 else 1.0 for w, d in df.items()}


class Excerpter:
    """Picks each source's sentences for a question, with one embedding model."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model
        self._vectors: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            need = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if need:
            vectors = self.embed_model.get_text_embedding_batch(need)
            with self._lock:
                if len(self._vectors) > 20_000:  # bounded: a chat page runs for weeks
                    self._vectors.clear()
                self._vectors.update(zip(need, vectors, strict=True))
        with self._lock:
            return [self._vectors[t] for t in texts]

    def pick(
        self,
        question: str,
        papers: Sequence[Paper],
        per: int,
        asks: Asks | None = None,
        budget: int | None = None,
        gist_first: bool = False,
        with_gist: bool = False,
        every: bool = False,
    ) -> list[Excerpt]:
        """Up to `per` sentences of each paper, the ones the question needs most; with a
        `budget` of characters, each paper's best sentence first (in rank order), then the
        next best sentences of any paper while they fit. With `gist_first`, a paper's first
        sentence is the one that says what it does (what a comparison or a recommendation
        is about), whatever the question's wording is closest to; with `with_gist`, that
        sentence follows the best one of each paper, budget allowing (a question put in other
        words than the abstract's is often closest to its background, and answered by what
        the paper does); with `every`, no paper is left out as weakly related."""
        from rag.query import Asks

        detail = asks is Asks.DETAIL
        groups = [source_sentences(p) for p in papers]
        flat = [s for g in groups for s in g]
        sentence_vectors = dict(zip(flat, self._embed(flat), strict=True)) if flat else {}
        asked = {_without_names(question, p) for p in papers}
        query_vectors = {q: self.embed_model.get_query_embedding(q) for q in asked}
        scored: list[list[float]] = []
        # Per sentence, the rarest in its abstract of the question's words it shares, and all.
        telling: list[list[tuple[float, float]]] = []
        for paper, group in zip(papers, groups, strict=True):
            q = _without_names(question, paper)
            qv, words = query_vectors[q], set(stems(q, _DROP))
            said = [set(stems(sentence, _DROP)) for sentence in group]
            scores = []
            for sentence, own in zip(group, said, strict=True):
                sim = cosine(qv, sentence_vectors[sentence])
                bonus = NUMBER_BONUS if detail and _NUMBER.search(sentence) else 0.0
                scores.append(sim + OVERLAP_WEIGHT * len(words & own) + bonus)
            scored.append(scores)
            if detail:  # only a detail's value sentence reads them
                weight = _rarity(said)
                shared = [[weight[w] for w in words & own] for own in said]
                telling.append([(max(ws, default=0.0), math.fsum(ws)) for ws in shared])
        gists = [self._gist_index(group) if group else 0 for group in groups]
        chosen: list[list[int]] = [[] for _ in papers]
        left = budget if budget is not None else 10**9
        bests = [max(sc, default=0.0) for sc in scored]
        top = max(bests, default=0.0)
        # Retrieval's first paper and the paper with the closest sentence always go in; the
        # others when about as close. The closest go first: a budget cut spares them.
        leader = max(range(len(bests)), key=lambda g: bests[g]) if bests else 0
        # A comparison is of every source it is given (the papers it names rank first).
        relevant = [
            every
            or gist_first
            or g in (0, leader)
            or bests[g] >= max(RELEVANT_MIN, top - RELEVANT_MARGIN)
            for g in range(len(bests))
        ]
        for g in sorted(range(len(groups)), key=lambda g: -bests[g]):
            group, scores = groups[g], scored[g]
            if not group or not relevant[g]:
                continue
            best = max(range(len(group)), key=lambda i: scores[i])
            if gist_first:
                best = gists[g]
            elif detail:
                # The value sentence is the one sharing the words that ask for the quantity
                # ("classification accuracy"), which the abstract's other sentences lack;
                # the question's words for the paper itself are in most of them
                # (`python -m evals.excerpts`: the figure first 90 -> 93 of 104 in development).
                numbered = [i for i in range(len(group)) if _NUMBER.search(group[i])]
                best = max(numbered or [best], key=lambda i: (*telling[g][i], scores[i]))
            if len(group[best]) <= left or g in (0, leader):
                chosen[g].append(best)
                left -= len(group[best])
            gist = gists[g]
            if with_gist and gist not in chosen[g] and len(group[gist]) <= left and per > 1:
                chosen[g].append(gist)
                left -= len(group[gist])
        rest = sorted(
            ((scores[i], g, i) for g, scores in enumerate(scored) for i in range(len(scores))),
            reverse=True,
        )
        for _, g, i in rest:
            if (
                relevant[g]
                and i not in chosen[g]
                and len(chosen[g]) < per
                and len(groups[g][i]) <= left
            ):
                chosen[g].append(i)
                left -= len(groups[g][i])
        out = []
        for group, scores, keep, gist in zip(groups, scored, chosen, gists, strict=True):
            if not group:
                out.append(Excerpt((), "", 0.0, ""))
                continue
            top = max(range(len(group)), key=lambda i: scores[i])
            best = keep[0] if keep else top
            # A detail's value sentence leads: in the abstract's order the small model often
            # writes from the sentence before it instead (evals/README.md, numeric answers).
            order = sorted(keep, key=lambda i: (detail and i != best, i))
            out.append(
                Excerpt(
                    tuple(group[i][: budget or 500] for i in order),
                    group[best][:500],
                    scores[top],
                    group[gist][:GIST_CHARS],
                )
            )
        return out

    def gist(self, paper: Paper, sentences: Sequence[str] | None = None) -> str:
        """The sentence in which the paper says what it does; without one, the sentence most
        like the abstract as a whole (never merely its first, which is usually background)."""
        group = list(sentences) if sentences is not None else source_sentences(paper)
        return group[self._gist_index(group)][:GIST_CHARS] if group else ""

    def _gist_index(self, group: Sequence[str]) -> int:
        for i, sentence in enumerate(group):
            if contribution_at(sentence):
                return i
        if len(group) == 1:
            return 0
        vectors = self._embed(group)
        centre = [sum(col) / len(vectors) for col in zip(*vectors, strict=True)]
        return max(range(len(group)), key=lambda i: cosine(centre, vectors[i]))
