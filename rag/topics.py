"""Noticing questions about a research topic that the retrieved papers never mention.

Dense similarity alone cannot tell "a paper on this" from "a paper near this": a question on
audio watermarking or federated learning across hospitals lands on whatever neighbouring
paper the collection has, as close as a loosely worded question lands on its own paper. What
does tell them apart is naming: the question is plainly about a known topic ("federated
learning", "autonomous driving"), and none of the closest papers says those words.

The topics are a fixed background of what machine-learning questions are about (author
keywords of ICLR 2026, `rag/topics.txt`, written by `python -m evals.make_topics`), not the
user's papers. They are embedded once per embedding model and cached (RAG_HOME/topics, or
RAG_SEARCH_TOPICS_CACHE).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np

from rag.text import (
    QUESTION_WORDS,
    STOPWORDS,
    all_words,
    alternatives,
    fold,
    modality_words,
    one_edit,
    plain_words,
    stem,
    without_glosses,
)
from rag.text import stems as _stems

log = logging.getLogger(__name__)

TOPICS_FILE = Path(__file__).with_name("topics.txt")
# Topics that are the usual name of a shorter one ("machine unlearning"): a paper writing the
# shorter ("LLM unlearning") is on the topic (`python -m evals.make_topics` writes it).
NAMES_FILE = Path(__file__).with_name("topic_names.txt")


def _usual_names() -> dict[str, str]:
    lines = NAMES_FILE.read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line and not line.startswith("#")]
    return {row[0]: row[1] for row in rows}


# Words in this share of topics or more ("model", "learning", "generative") name no topic
# of their own: a paper need not repeat them to be about the topic.
GENERIC_SHARE = 0.04
# How many other words may stand between a topic's words in a paper.
WINDOW_SLACK = 2


# The longest acronym spelled out by initials ("graph neural network" -> "gnn"): longer runs
# of words spell an acronym only by chance.
ACRONYM_MAX = 4

# A word shorter than this is too often another word one letter from a known one.
MEND_MIN = 5
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
# Framing words long enough that one letter off is a typo of them, not another word (in
# shorter ones it often is: "paper", "piper").
FRAMING_MEND_MIN = 7
_FRAMING = frozenset(w for w in QUESTION_WORDS | STOPWORDS if len(w) >= FRAMING_MEND_MIN)
_CHUNK = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _words(text: str) -> list[str]:
    # Whole words (a plural "s" aside): spelling a topic out is matched word for word.
    return [w.removesuffix("s") for w in plain_words(text)]


class Topics:
    """The topic background, embedded with one model."""

    def __init__(self, phrases: list[str], vectors: np.ndarray, near: float = math.inf) -> None:
        self.phrases = phrases
        self.vectors = vectors
        # The cosine from which a question is near a topic: a number of the embedding model,
        # from its calibration (rag.abstain); without one no topic is near by cosine.
        self.near_cutoff = near
        share: Counter[str] = Counter()
        for phrase in phrases:
            share.update(set(_stems(phrase)))
        generic = {w for w, n in share.items() if n >= GENERIC_SHARE * len(phrases)}
        self._generic = generic
        self._needed = [tuple(w for w in _stems(p) if w not in generic) for p in phrases]
        # Data of a kind is that kind: a paper on "tabular benchmarks" is on "tabular data".
        for i, p in enumerate(phrases):
            if len(self._needed[i]) > 1 and modality_words(p):
                self._needed[i] = tuple(w for w in self._needed[i] if w != "data")
        at = {p: i for i, p in enumerate(phrases)}
        for name, shorter in _usual_names().items():
            if name in at and shorter in at:
                self._needed[at[name]] = self._needed[at[shorter]]
        self._spellings = [_words(p) for p in phrases]
        # Words too short for the word tests ("3D", "KV", "AI"): a question names the topic
        # only if it has them too, or "ai for research" would be named by "research" alone.
        self._short = [_short_words(p) for p in phrases]
        # The acronyms the list itself spells out in other topics ("moe" and "mixture of
        # experts"): a short word no topic spells out is as likely a word as an acronym.
        short = {w for needed in self._needed for w in needed if len(w) <= ACRONYM_MAX}
        # Each with the words it stands for: a text that writes "LLM" says "language".
        self._acronyms: dict[str, set[str]] = {}
        for p in phrases:
            raw = all_words(p)
            for i, found in _acronym_runs(raw, short).items():
                for a in found:
                    self._acronyms.setdefault(a, set()).update(stem(w) for w in raw[i : i + len(a)])
        # The words topics are spelled with, long enough to mend a misspelling towards, found
        # by their one-letter deletions: two words one edit apart share one.
        self._vocabulary = {w for words in self._spellings for w in words if len(w) >= MEND_MIN}
        self._deletions: dict[str, set[str]] = {}
        for w in self._vocabulary:
            for key in _deletions(w):
                self._deletions.setdefault(key, set()).add(w)

    @classmethod
    def load(
        cls, embed: Callable[[list[str]], Any], cache_dir: Path | None, model_key: str
    ) -> Topics:
        """The phrases of topics.txt with their vectors, from the cache when it has them.

        `embed` (texts -> vectors) is called only when the cache cannot be used: embedding
        the ~1,200 phrases takes seconds, so ingest fills the cache for later questions.
        """
        text = TOPICS_FILE.read_text(encoding="utf-8")
        phrases = [line for line in text.splitlines() if line and not line.startswith("#")]
        key = hashlib.sha256(f"{model_key}\n{text}".encode()).hexdigest()[:16]
        cached = cache_dir / f"topics-{key}.npy" if cache_dir else None
        if cached is not None and cached.exists():
            try:
                vectors = np.load(cached, allow_pickle=False)
                if vectors.shape[0] == len(phrases):
                    return cls(phrases, vectors)
            except (OSError, ValueError) as err:
                log.warning("ignoring the unreadable topic cache %s (%s)", cached, err)
        vectors = np.asarray(embed(phrases), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_name(f"{cached.stem}.{os.getpid()}.tmp.npy")
                np.save(tmp, vectors, allow_pickle=False)
                tmp.replace(cached)
            except OSError as err:  # a read-only RAG_HOME still answers, a little slower
                log.warning("cannot cache topic vectors in %s (%s)", cached, err)
        return cls(phrases, vectors)

    def near(
        self, query_vector: Any, limit: int = 10, cutoff: float | None = None
    ) -> list[tuple[str, float]]:
        """Topics the question is about, nearest first (from `cutoff`, default near_cutoff)."""
        return [(self.phrases[i], sim) for i, sim in self._near(query_vector, limit, cutoff)]

    def _near(
        self, query_vector: Any, limit: int, cutoff: float | None = None
    ) -> list[tuple[int, float]]:
        least = self.near_cutoff if cutoff is None else cutoff
        q = np.asarray(query_vector, dtype=np.float32)
        sims = self.vectors @ (q / (np.linalg.norm(q) + 1e-12))
        order = np.argsort(-sims)[:limit]
        return [(int(i), float(sims[i])) for i in order if sims[i] >= least]

    def needed(self, phrase: str) -> tuple[str, ...]:
        """The stems that mention the topic `phrase` (the inverse of `phrase`)."""
        return self._needed[self.phrases.index(phrase)] if phrase in self.phrases else ()

    def needed_stems(self, phrase: str) -> tuple[str, ...]:
        """The stems that mention any phrase, known topic or not: its words', generic aside."""
        return tuple(w for w in _stems(phrase) if w not in self._generic)

    def phrase(self, needed: tuple[str, ...]) -> str:
        """The topic's own wording for the stems `named` returns ("sparse autoencoders")."""
        for i, n in enumerate(self._needed):
            if n == needed:
                return self.phrases[i]
        return " ".join(needed)

    def named(
        self, question: str, query_vector: Any, verbatim: bool = False
    ) -> list[tuple[str, ...]]:
        """The words of each known topic the question is about and names; with `verbatim`,
        also each topic of two words or more the question spells out.

        For a question asking for papers, a topic it spells word for word counts even when
        the question as a whole is nearer a broader topic than to it. Other questions use
        such words in passing, so for them only nearness counts. A topic whose words are all
        inside another named one is dropped: nearly every paper near the question mentions
        it.
        """
        asked = set(_stems(question))
        short = _short_words(question)
        out: list[tuple[str, ...]] = []
        for i, _sim in self._near(query_vector, 10):
            needed = self._needed[i]
            if needed and set(needed) <= asked and self._short[i] <= short and needed not in out:
                out.append(needed)
        if verbatim:
            for i in self._spelled(question, min_words=2):
                if self._needed[i] not in out:
                    out.append(self._needed[i])
        return [n for n in out if not any(set(n) < set(m) for m in out)]

    def _spelled(self, question: str, min_words: int) -> list[int]:
        """Topics of at least `min_words` words that the question spells out: whole words
        (a plural "s" aside), not stems — "exploit" does not spell "exploration"."""
        spelled = f" {' '.join(_words(question))} "
        short = _short_words(question)
        return [
            i
            for i, words in enumerate(self._spellings)
            if len(words) >= min_words
            and self._needed[i]
            and f" {' '.join(words)} " in spelled
            and self._short[i] <= short
        ]

    def mend(self, question: str, used: Callable[[str], int]) -> str:
        """The question with each misspelt word put right, where the fix is certain: a word
        no paper uses and no topic has, one letter from a word that makes the question spell
        a topic of two words or more ("graph neural netwrks"). Anything else stays as
        written: a rare word one letter from a common one is as often a word of its own."""
        before = set(self._spelled(question, min_words=2))
        out = question
        for m in reversed(list(_LOWER_WORD.finditer(question))):
            word = m.group()
            base = word.removesuffix("s")
            if len(base) < MEND_MIN or base in self._vocabulary:
                continue
            fixes = set()
            near = {w for key in _deletions(base) for w in self._deletions.get(key, ())}
            for known in sorted(near):
                if one_edit(known, base):
                    fixed = f"{out[: m.start()]}{known}{word[len(base) :]}{out[m.end() :]}"
                    spelled = set(self._spelled(fixed, min_words=2)) - before
                    if any(known in self._spellings[i] for i in spelled):
                        fixes.add(fixed)
            # A word that frames a question is put right the same way ("anythng on X?",
            # "recomendations"): those words are few, so one letter off names one of them.
            if not fixes and word not in _FRAMING:
                framing = [w for w in _FRAMING if one_edit(w, word)]
                if len(framing) == 1:
                    fixes.add(f"{out[: m.start()]}{framing[0]}{out[m.end() :]}")
            # Counting the collection's words is the costly test: only for a word with a fix.
            if len(fixes) == 1 and not used(word):
                out = fixes.pop()
        return out

    def text_stems(self, text: str) -> list[str]:
        # Every word counts towards the distance between a topic's words but the generic
        # ones: "diffusion-based large language models" says "diffusion language models".
        # An acronym's words say the acronym where they start: "multimodal large language
        # models" says "multimodal LLMs".
        raw = all_words(text)
        at = _acronym_runs(raw, self._acronyms)
        generic = self._generic
        if not at:  # most texts: a third faster without the loop
            return [s for w in raw if len(w) > 2 and (s := stem(w)) not in generic]
        out: list[str] = []
        for i, word in enumerate(raw):
            out += at.get(i, ())
            if len(word) > 2 and (s := stem(word)) not in generic:
                out.append(s)
        return out

    def said(self, text: str) -> set[str]:
        """Every stem `text` says, in any form: its words, a hyphenated compound's closed
        form ("pre-training" says "pretraining") and the acronyms that runs of its words
        spell ("large language models" says "llm")."""
        raw: list[str] = []
        out: set[str] = set()
        for chunk in _CHUNK.findall(fold(text)):
            parts = chunk.split("-")
            raw += parts
            out.add(stem("".join(parts)))
        out.update(stem(w) for w in raw)
        for found in _acronym_runs(raw, self._acronyms).values():
            out.update(found)
        for acronym in out & self._acronyms.keys():
            out |= self._acronyms[acronym]
        return out

    def mentioned(self, topics: list[tuple[str, ...]], text: str) -> int:
        """How many of `topics` `text` has the words of, close together."""
        return self.mentioned_in(topics, self.text_stems(text))

    def mentioned_in(self, topics: list[tuple[str, ...]], words: list[str]) -> int:
        """`mentioned` for a text already reduced by `text_stems`."""
        return sum(_together(needed, [words]) for needed in topics)

    def unmentioned(
        self,
        question: str,
        query_vector: Any,
        texts: list[str],
        spelled: bool = False,
        joined: bool = False,
        advice: bool = False,
        loose: bool = False,
    ) -> str | None:
        """`_unmentioned`, but a topic the question names only in a gloss ("X (Y, Z)", "X,
        e.g. Y") explains X or gives instances of it: where the texts mention a topic the
        rest names and lack none of it, the gloss is not required too. Where they mention
        none, its instances are what says the papers lack the subject."""
        lacking = self._unmentioned(question, query_vector, texts, spelled, joined, advice, loose)
        main = without_glosses(question)
        if lacking is None or main == question:
            return lacking
        if self._unmentioned(main, query_vector, texts, spelled, joined, advice, loose) is not None:
            return lacking
        asked = set(_stems(main))
        words = [self.text_stems(t) for t in texts]
        near = [i for i, _sim in self._near(query_vector, 10)] + self._spelled(main, 1)
        for i in near:
            needed = self._needed[i]
            if needed and set(needed) <= asked and _together(needed, words):
                return None
        return lacking

    def _unmentioned(
        self,
        question: str,
        query_vector: Any,
        texts: list[str],
        spelled: bool = False,
        joined: bool = False,
        advice: bool = False,
        loose: bool = False,
    ) -> str | None:
        """A topic the question names that none of `texts` mentions, if there is one; with
        `spelled`, also any topic it spells out word for word, however far the question as a
        whole is from it ("papers on watermarking of audio" spells "audio"). With `joined`,
        the question asks for one piece of work on every topic it names, so two topics that
        only different texts mention are lacking too ("graph neural networks for weather
        forecasting", where one paper is on each). With `advice` (a request for reading
        advice), also each field of two words or more it spells out, and every topic is
        judged in the loose sense below. With `loose`, every topic is judged in that sense:
        for texts the question's author or track picked out, not nearness, which may write
        the topic's words apart.

        The question must name the topic itself (its words, generic ones aside): a topic
        that is only near the question ("oriented object detection" for one on open-world
        object detection) says nothing about what the papers lack. A topic counts as
        mentioned when a text has those words close together, in any order ("watermarking
        AI-generated images" mentions "image watermarking"; "neural", "architecture" and
        "search" scattered over an abstract do not mention neural architecture search).
        """
        # A question with an "or" asks for either side: each side must name a topic the
        # papers lack before the question as a whole does. A side that names no known topic
        # is no alternative.
        raw = [set(_stems(side)) for side in alternatives(question)]
        asked = set().union(*raw)
        sides = raw
        if len(raw) > 1:
            named = [s for s in raw if any(n and set(n) <= s for n in self._needed)]
            sides = named if len(named) > 1 else [asked]
        # Each text's words in order, generic ones left out: "diffusion language models"
        # mentions "diffusion-based large language models".
        words = [self.text_stems(t) for t in texts]
        candidates = [i for i, _sim in self._near(query_vector, 10)]
        # Reading advice describes a field in its own words ("aligning LLMs at inference
        # time"): each topic it names or spells out in two words or more, near the question
        # or not, is lacking only where no text writes its words (in one text, however far
        # apart).
        apart: set[int] = set()
        if spelled:
            candidates += self._spelled(question, min_words=1)
        elif advice:
            candidates += sorted(set(self._spelled(question, min_words=2)) - set(candidates))
        if loose or advice:
            apart = set(candidates)
        short = _short_words(question)
        said = [set(w) for w in words] if apart else []
        lacking = [
            (set(self._needed[i]), self.phrases[i])
            for i in dict.fromkeys(candidates)
            if self._needed[i]
            and set(self._needed[i]) <= asked
            and self._short[i] <= short
            and not (
                any(all(_says(w, n) for n in self._needed[i]) for w in said)
                if i in apart
                else _together(self._needed[i], words)
            )
        ]
        if joined and len(raw) == 1 and not lacking:
            return self._apart(question, candidates, asked, short, words)
        lacked_sides: set[int] = set()
        first = None
        shared = _distributed(question)
        for needed, phrase in lacking:
            if not any(needed <= side for side in raw):
                if any(needed <= side for side in shared):
                    return phrase  # "audio or video watermarking" names audio watermarking
                continue  # its words come from two alternatives: neither names it
            lacked_sides |= {n for n, side in enumerate(sides) if needed <= side}
            first = first or phrase
        return first if first and len(lacked_sides) == len(sides) else None

    def field_written(self, question: str, query_vector: Any, texts: list[str]) -> str | None:
        """A known topic of two words or more that the question both spells out and is
        near as a whole, which one of `texts` mentions; else None."""
        words = [self.text_stems(t) for t in texts]
        short = _short_words(question)
        near = {i for i, _sim in self._near(query_vector, 10)}
        for i in self._spelled(question, min_words=2):
            if i not in near:
                continue
            needed = self._needed[i]
            if needed and self._short[i] <= short and _together(needed, words):
                return self.phrases[i]
        return None

    def unsaid(self, question: str, text: str) -> str | None:
        """A topic the question spells out of which `text` says no word at all, in any
        form ("reinforcement learning" of a paper that never says "reinforcement")."""
        said = self.said(text)
        spelled = sorted(self._spelled(question, min_words=1), key=lambda i: -len(self._needed[i]))
        for i in spelled:
            if not any(_says(said, word) for word in self._needed[i]):
                return self.phrases[i]
        return None

    def _apart(
        self,
        question: str,
        near: list[int],
        asked: set[str],
        short: frozenset[str],
        words: list[list[str]],
    ) -> str | None:
        """Two or more unrelated topics the question names (near it, or spelled out in two
        words or more) that no single text mentions together, joined by "and"; else None."""
        pool = dict.fromkeys([*near, *self._spelled(question, min_words=2)])
        named = [
            set(self._needed[i])
            for i in pool
            if self._needed[i] and set(self._needed[i]) <= asked and self._short[i] <= short
        ]
        phrases = {frozenset(self._needed[i]): self.phrases[i] for i in reversed(pool)}
        # A topic inside another ("forecasting" in "weather forecasting") is that one; topics
        # sharing a word ("federated learning", "federated fine-tuning") are one subject, not
        # two to find together.
        widest = [n for n in named if not any(n < m for m in named)]
        unrelated = list(
            dict.fromkeys(frozenset(n) for n in widest if not any(n & m for m in widest if m != n))
        )
        if len(unrelated) < 2:
            return None
        if any(all(_together(tuple(n), [w]) for n in unrelated) for w in words):
            return None
        order = _stems(question)
        first = {n: min(order.index(w) if w in order else len(order) for w in n) for n in unrelated}
        return " and ".join(phrases[n] for n in sorted(unrelated, key=first.__getitem__))


def _says(said: set[str], word: str) -> bool:
    # A stem opens a longer one its text writes: "math" is said by "mathematical".
    return word in said or any(w.startswith(word) for w in said)


def _acronym_runs(raw: list[str], acronyms: Collection[str]) -> dict[int, list[str]]:
    """Where runs of `raw` words spell one of `acronyms` by their initials ("graph neural
    network" -> "gnn"): start index -> acronyms. A run opens and closes on a word that is no
    function word ("of", "the")."""
    letters = "".join(w[0] for w in raw)
    at: dict[int, list[str]] = {}
    for acronym in acronyms:
        i = letters.find(acronym)
        while i >= 0:
            if not _function_word(raw[i]) and not _function_word(raw[i + len(acronym) - 1]):
                at.setdefault(i, []).append(acronym)
            i = letters.find(acronym, i + 1)
    return at


def _function_word(word: str) -> bool:
    return len(word) <= 3 and word in STOPWORDS


def _deletions(word: str) -> set[str]:
    """The word and each spelling of it with one letter left out."""
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


def _short_words(text: str) -> frozenset[str]:
    """The words `plain_words` leaves out for their length but no stop list does."""
    return frozenset(
        w for w in re.findall(r"[a-z0-9]+", fold(text)) if len(w) <= 2 and w not in STOPWORDS
    )


def _distributed(question: str) -> list[set[str]]:
    """The stems of each alternative with an "or" between single words read as sharing the
    rest of the phrase: "audio or video watermarking" says "audio watermarking". After "the
    replay buffer or with ..." a new phrase starts, and nothing is shared."""
    filler = STOPWORDS | QUESTION_WORDS
    text = _OR_WORD.sub(lambda m: " " if fold(m.group(1)) not in filler else m.group(0), question)
    return [set(_stems(side)) for side in alternatives(text)]


_OR_WORD = re.compile(r"\bor\s+([\w-]+)", re.IGNORECASE)


def _together(needed: tuple[str, ...], texts: list[list[str]]) -> bool:
    """Whether some text has all of `needed` within a window one word wider than them."""
    want = set(needed)
    width = len(want) + WINDOW_SLACK
    for words in texts:
        for i, word in enumerate(words):
            if word in want and want <= set(words[i : i + width]):
                return True
    return False
