"""Checks answer sentences against the abstracts they cite.

The default verifier is deterministic alignment: the sentence is matched to its best source
sentence by embedding similarity and content-word overlap, and must not bring numbers,
coined names or a negation that its sources do not have. There is no NLI model on this
machine; these checks catch the near-misses small models make (a changed number, a swapped
method name, a claim from another paper, a flipped "not").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rag.corpus import Paper
from rag.embed import cosine
from rag.sanitize import source_sentences
from rag.text import (
    STOPWORDS,
    fold,
    stem,
    word_list,
)
from rag.text import (
    coined_tokens as name_tokens,
)

# The most accurate pair in `python -m evals.verifier --sweep` on its labelled pairs.
SUPPORT_THRESHOLD = 0.725
# A number must stand in a source sentence about what the claim says: one whose cosine to the
# claim is within this of the closest one's (not merely anywhere in the abstract).
NUMBER_MARGIN = 0.2
EMBED_WEIGHT = 0.6
OVERLAP_WEIGHT = 0.4

_CITATION = re.compile(r"\[\s*\d+(?:\s*[,;–-]\s*\d+)*\s*\]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[A-Za-z][A-Za-z\-]+")
_NEGATIONS = word_list("negations")
# Words any abstract uses say nothing about whether a sentence is supported.
_STOP = STOPWORDS | word_list("generic")


@dataclass(frozen=True)
class Verdict:
    supported: bool
    score: float
    evidence: str  # the best-matching source sentence
    source: int  # index into the sources given, -1 if none
    reason: str = ""


class Verifier(Protocol):
    """Decides whether a sentence is supported by the given source papers."""

    def check(
        self, sentence: str, sources: Sequence[Paper], question: str = "", framing: bool = True
    ) -> Verdict:
        """`question`, when given, is what the sentence answers: its own negations ("...
        without retraining?") are its framing, not a flip the sentence brings. With
        `framing`, so are its words said back about the paper it asks about ("does Orak
        cover ..." -> "Orak covers ..."); without, as for a question asking which papers are
        on a topic, they are the topic the sentence says a paper is on, which the paper must
        write ("X is about machine translation" of a paper on code translation)."""
        ...


# A mark removed from before punctuation leaves no space behind ("iSAE [2], ..." -> "iSAE, ...").
_SPACE_BEFORE_PUNCT = re.compile(r" ([.,;:!?])")


def strip_citations(text: str) -> str:
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(_CITATION.sub(" ", text).split()))


def without_names(text: str, papers: Sequence[Paper]) -> str:
    """The text without the papers' names, titles, authors and "et al.": what it claims."""
    for p in papers:
        for name in (p.display_name, p.title, *p.authors):
            if name:
                text = text.replace(name, "")
    return text.replace("et al.", "")


def names_paper(text: str, paper: Paper) -> bool:
    """Whether the text calls the paper by one of its names (FS-DFM, "Kim et al.")."""
    names = {paper.display_name, *paper.names} - {""}
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in names)


def misattributed(text: str, cited: Sequence[Paper], sources: Sequence[Paper]) -> list[Paper]:
    """The sources a sentence names while citing only others that never name them: its
    claim is about a paper whose abstract it was not checked against."""
    cited_ids = {p.id for p in cited}
    vouching = " ".join(f"{p.title} {p.abstract}" for p in cited)
    return [
        p
        for p in sources
        if p.id not in cited_ids and names_paper(text, p) and not names_paper(vouching, p)
    ]


def numbers(text: str) -> set[str]:
    """Numbers as written, normalised (1,000 and 1\\,000 -> 1000; 19.5× -> 19.5)."""
    out = set()
    text = re.sub(r"(?<=\d)(?:\\,|\{,\}|\\ |\u2009|\u202f)(?=\d{3})", "", text)
    for raw in _NUMBER.findall(text):
        value = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", raw) else raw
        out.add(value.rstrip(".").replace(",", "."))
    return out


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(fold(text)) if w not in _STOP and len(w) > 2}


def coined_tokens(text: str) -> set[str]:
    """Parts of tokens that look like coined names (TimeSAE, I2P, GPT-4o, UnlearnCanvas).

    All-capital short forms (VAE, SAEs, LLM) are left out: an answer may abbreviate what the
    abstract spells out."""
    return {t.casefold() for t in name_tokens(text.replace("-", " "), acronyms=False)}


class AlignmentVerifier:
    """Deterministic alignment of a sentence to the best sentence of its cited abstracts."""

    def __init__(
        self,
        embed_model: Any,
        threshold: float = SUPPORT_THRESHOLD,
        number_margin: float = NUMBER_MARGIN,
    ) -> None:
        self.embed_model = embed_model
        self.threshold = threshold
        self.number_margin = number_margin
        self._cache: dict[str, list[float]] = {}

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        need = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if need:
            for text, vec in zip(
                need, self.embed_model.get_text_embedding_batch(need), strict=True
            ):
                self._cache[text] = vec
            if len(self._cache) > 20_000:  # bounded: long-running chat pages
                self._cache.clear()
        return [self._cache[t] for t in texts]

    def check(
        self, sentence: str, sources: Sequence[Paper], question: str = "", framing: bool = True
    ) -> Verdict:
        sentence = strip_citations(sentence)
        claim = without_names(sentence, sources).strip(" ,;:")
        if not claim or not sources:
            return Verdict(False, 0.0, "", -1, "nothing to check")
        # The abstract as the reader sees it (markup out, no sentence addressing the model):
        # "k**N**owledgeable" in the source is the "kNowledgeable" an answer copies.
        texts = [source_sentences(p) for p in sources]
        pieces: list[tuple[int, str]] = []
        whole_of: list[str] = []  # each piece's sentence
        for i, group in enumerate(texts):
            for s in group:
                for piece in _pieces(s):
                    pieces.append((i, piece))
                    whole_of.append(s)
        if not pieces:
            return Verdict(False, 0.0, "", -1, "the source has no text")
        # Embedded with and without the paper's name: the source sentence may or may not
        # name the paper too; the closer reading counts.
        vecs = self._vectors([sentence, claim] + [s for _, s in pieces])
        sims = [max(cosine(vecs[0], v), cosine(vecs[1], v)) for v in vecs[2:]]
        best = max(range(len(sims)), key=lambda i: sims[i])
        src_index, evidence = pieces[best]
        # Overlap is against the whole cited abstract: a summary may join two of its sentences.
        whole = " ".join(s for group in texts for s in group)
        source_words = content_words(whole)
        # Words the answer takes from a question about a paper ("does Orak cover ..." ->
        # "Orak covers") are its framing, not claims the source must make.
        question_words = content_words(question)
        framed = question_words - source_words if framing else set()
        words = content_words(claim) - framed
        overlap = len(words & source_words) / len(words) if words else 0.0
        score = EMBED_WEIGHT * sims[best] + OVERLAP_WEIGHT * overlap

        missing_numbers = numbers(claim) - numbers(whole)
        # A figure the abstract gives for another quantity (its accuracy as the speed-up).
        # (The sentence of a near piece counts: a claim may join two clauses of one sentence.)
        near = [whole_of[n] for n, sim in enumerate(sims) if sim >= sims[best] - self.number_margin]
        placed = set().union(*(numbers(p) for p in near))
        misplaced = (numbers(claim) & numbers(whole)) - placed
        names = {p.display_name.casefold() for p in sources} | {
            n.casefold() for p in sources for n in p.names
        }
        source_names = coined_tokens(whole) | names
        missing_names = {t for t in coined_tokens(claim) if t not in source_names}
        # Small models flip claims by adding a negation; one the evidence lacks is suspect.
        added_negation = _negated(claim) - _negated(evidence) - _negated(question)
        # Without framing, the question's words the sentence repeats are the topic it puts on
        # the paper, which a verbatim clause after them ("X studies <topic> by <its own
        # words>") must not carry: two the paper never writes are a claim it lacks (one may
        # be a word of the question's own phrasing).
        asked = question_words & content_words(claim) if not framing else set()
        unwritten = asked - source_words
        reason = ""
        if len(unwritten) >= 2:
            reason = f"puts on the paper a topic it does not write: {', '.join(sorted(unwritten))}"
        elif missing_numbers:
            reason = f"numbers not in the source: {', '.join(sorted(missing_numbers))}"
        elif misplaced:
            reason = f"numbers the source gives for something else: {', '.join(sorted(misplaced))}"
        elif missing_names:
            reason = f"names not in the source: {', '.join(sorted(missing_names))}"
        elif added_negation:
            reason = f"negation not in the source: {', '.join(sorted(added_negation))}"
        elif score < self.threshold:
            reason = f"weak match to the source ({score:.2f} < {self.threshold:.2f})"
        return Verdict(not reason, round(score, 4), evidence, src_index, reason)


def _pieces(sentence: str) -> list[str]:
    """A sentence and its longer clauses: an answer often restates one clause of a long
    sentence, which the whole sentence's vector dilutes."""
    clauses = [c.strip() for c in re.split(r"[,;:]\s+", sentence)]
    return [sentence] + [c for c in clauses if len(c.split()) >= 6 and c != sentence]


def _negated(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z']+", text.lower()) if w in _NEGATIONS}


_VERIFIERS: dict[int, AlignmentVerifier] = {}


def default_verifier(embed_model: Any) -> AlignmentVerifier:
    """One verifier (and its sentence-vector cache) per embedding model."""
    key = id(embed_model)
    if key not in _VERIFIERS or _VERIFIERS[key].embed_model is not embed_model:
        _VERIFIERS[key] = AlignmentVerifier(embed_model)
    return _VERIFIERS[key]
