"""Writes cited answers from retrieved abstracts, and checks every citation.

Trust does not come from the writer. Whether there is anything to answer from is decided
before it (retrieval's abstention: no writer is called when nothing indexed is about the
question) and after it (every sentence is verified against the source it cites, citations
are repaired or attached to the source that supports the sentence, and an answer none of
whose sentences a source supports abstains with that reason). The model is never asked to
refuse. The answer takes the shape the question asks for (rag.prompts.Shape): a list of the
matching papers with a gist each, a value with its condition, a yes or no with evidence,
or a few cited sentences.
"""

from __future__ import annotations

import copy
import itertools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rag.corpus import Paper
from rag.excerpts import Excerpt, Excerpter
from rag.intent import Asks
from rag.judge import Reading
from rag.llm import AnswerCutOff, Backend, BackendError
from rag.prompts import (
    EXAMPLES,
    PREMISE_ASK,
    PREMISE_LEAD,
    VERDICT_ASK,
    VERDICT_LEADS,
    Shape,
    claim_prompt,
)
from rag.retrieve import Retrieval, Retriever
from rag.sanitize import addresses_model, clean_text, source_sentences
from rag.settings import Settings
from rag.text import (
    STOPWORDS,
    gist_clause,
    split_sentences,
    stem,
    stems,
    word_list,
)
from rag.verify import (
    Verdict,
    Verifier,
    default_verifier,
    misattributed,
    names_paper,
    numbers,
    strip_citations,
    without_names,
)
from rag.writers import Draft, ExtractiveWriter, ModelWriter, Writer, Written, make_writer

__all__ = [
    "Answer",
    "Answerer",
    "Item",
    "Sentence",
    "Source",
    "addresses_model",
    "clean_text",
    "shape_for",
    "source_sentences",
]

NO_COVERAGE = "The indexed abstracts don't cover this question."
# Answers about something the question takes as given, whose premise the model is asked
# about before it writes (rag.judge); lists and recommendations assume nothing to check.
PREMISED = (Shape.DETAIL, Shape.EXPLAIN, Shape.COMPARE)


def unknown_track_text(asked: str, tracks: list[str]) -> str:
    """The reply to a track no indexed track is called: the areas the tracks fall under, so
    the asker can ask for one of those instead."""
    if not tracks:
        return f"No indexed track is called {asked!r}: no indexed paper lists a track."
    areas = list(dict.fromkeys(t.split(" · ")[0] for t in tracks))
    return (
        f"No indexed track is called {asked!r}. The {len(tracks)} indexed tracks fall under "
        f"{', '.join(areas[:-1])} and {areas[-1]}."
        if len(areas) > 1
        else f"No indexed track is called {asked!r}. The indexed tracks fall under {areas[0]}."
    )


# A list line of fewer words than this says nothing a reader can use ("argues AI safety",
# "introduces SAEmnesia"): the paper's own clause is shown instead.
MIN_GIST_WORDS = 4
# How many times the first try's characters of the sources a retry reads (see Answerer._prose).
RETRY_READS = 3
UNSUPPORTED = "no sentence of the answer is supported by the abstract it cites"
_CONTENT_DROP = STOPWORDS | word_list("generic") | word_list("question")
# What is left of a sentence that only points at a source ("Lotfi et al.", "The evidence
# comes from Baek et al. (Safety).") once names and these words are out: nothing to check.
_POINTING = _CONTENT_DROP | word_list("attribution")
_RELEASE = frozenset(stem(w) for w in word_list("release"))


def _pairs(text: str) -> set[tuple[str, str]]:
    """Adjacent content-word stems."""
    words = stems(text, _CONTENT_DROP)
    return set(itertools.pairwise(words))


# The system prompt's made-up examples: a sentence sharing two of their word pairs that none
# of its sources has took its facts from the example ("FS-DFM sorts beads 3.2x faster ...").
_EXAMPLE_PAIRS = frozenset(_pairs(EXAMPLES))

# Citation forms small models write instead of [n]: "Source 1", "[Source 2]", "(3)", "[1][2]".
_CITE_FORMS = [
    (re.compile(r"\[\s*(?:source|src|doc(?:ument)?|paper)\s*(\d+)\s*\]", re.I), r"[\1]"),
    (re.compile(r"\(\s*(?:source|src|doc(?:ument)?|paper)\s*(\d+)\s*\)", re.I), r"[\1]"),
    (re.compile(r"\b(?:according to )?source\s+(\d+)\b", re.I), r"[\1]"),
    (re.compile(r"\((\d{1,2})(?:\s*,\s*(\d{1,2}))?\)(?=\s*[.;]|\s*$)"), r"[\1]"),
]
_CITE = re.compile(r"\[\s*(\d+(?:\s*[,;–-]\s*\d+)*)\s*\]")
# A yes/no answer's opening verdict: not a claim to check, the evidence after it is.
_VERDICT = re.compile(
    r"^\W*(?:(?P<yes>yes)|(?P<no>no)|(?P<open>the (?:sources|abstracts) do not (?:say|settle)\w*))"
    r"\b[\s,.;:!—–-]*",
    re.IGNORECASE,
)
_VERDICT_WORDS = {"yes": "Yes", "no": "No", "open": "The sources do not settle this"}


def _lower_first(text: str, question: str) -> str:
    """ "No, methods where ...": the restated question's first word as the question writes
    it, when it writes it in lower case (a name keeps its capital)."""
    word = text.split(" ", 1)[0]
    lowered = word[:1].lower() + word[1:]
    return lowered + text[len(word) :] if f" {lowered} " in f" {question} " else text


# A sentence about what the sources lack ("The sources do not mention ...") is the model's
# own reading of coverage, not a claim a source can support.
_COVERAGE = re.compile(
    r"\b(?:the |these |provided |given )*(?:sources?|abstracts?|context|texts?|evidence)\b"
    r"[^.]{0,80}?\b(?:do(?:es)?\s+not|don't|doesn't|never|not)\s+(?:\w+\s+){0,2}?(?:mention|"
    r"provide|contain|say|state|discuss|specify|include|give|address|cover|describe|report|"
    r"answer|support)",
    re.IGNORECASE,
)
# A list item the model wrote: "[2] proposes ...", "- [2]: ...", "2. ...".
_ITEM = re.compile(r"^\s*(?:[-*•]\s*)?(?:\[(\d{1,3})\]|(\d{1,3})[.)])\s*[:\-–—]?\s*(.+?)\s*$")


@dataclass
class Source:
    n: int
    paper: Paper
    score: float
    passage: str
    in_prompt: bool = False
    matches: bool = False  # one of the papers a list question asks for

    def to_dict(self) -> dict[str, Any]:
        p = self.paper
        return {
            "n": self.n,
            "paper_id": p.id,
            "display_name": p.display_name,
            "title": p.title,
            "authors": list(p.authors),
            "track": p.track,
            "score": round(self.score, 4),
            "abstract": p.abstract,
        }


@dataclass
class Sentence:
    text: str
    citations: list[int]
    supported: bool
    score: float
    evidence: str = ""
    note: str = ""
    kind: str = "claim"  # claim | verdict (a yes/no opening) | coverage (what sources lack)
    own_words: bool = True  # the writer's words (a model's), not a quoted source sentence

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "citations": self.citations,
            "supported": self.supported,
            "score": self.score,
            "evidence": self.evidence,
            "note": self.note,
            "kind": self.kind,
        }


@dataclass
class Item:
    """One paper of a list answer: its name and a gist of what it does."""

    n: int
    name: str
    gist: str
    own_words: bool  # the gist is the model's; else the paper's own sentence
    supported: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "name": self.name, "gist": self.gist, "model": self.own_words}


@dataclass
class Answer:
    question: str
    text: str = ""
    abstained: bool = False
    reason: str = ""
    sources: list[Source] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    backend: str = ""
    model: str = ""
    note: str = ""  # e.g. why the extractive fallback answered
    failed: bool = False  # the LLM failed after retries
    timings: dict[str, float] = field(default_factory=dict)
    mode: str = "topical"
    signals: dict[str, float] = field(default_factory=dict)
    asks: Asks = Asks.EXPLAIN  # what the question asks for (rag.intent)
    shape: Shape = Shape.EXPLAIN
    total: int = 0  # papers that match a question asking for all of them
    items: list[Item] = field(default_factory=list)  # a list answer's papers, as shown
    more: int = 0  # matching papers beyond `items` (all of them are among the sources)
    verdict: str = ""  # yes | no | open, for a yes/no question the answer settles or not
    # The model's reading of the evidence before it wrote (rag.judge), when it gave one:
    # "verdict" (a yes/no question's answer) or "premise" (the question's premise contradicted).
    read: str = ""
    # Who wrote the words: "model" (a model's own, verified), "extractive" (the sources'
    # sentences), "metadata" (a list from the index alone), "" (abstained).
    written_by: str = ""
    raw: str = ""  # what the writer wrote, before any check
    named: tuple[str, ...] = ()  # ids of the papers the question names (rag.query.Query.named)

    @property
    def framing(self) -> bool:
        """Whether the question's words are its framing for the verifier (rag.verify): not
        where it asks which papers are on a topic, which the papers must write."""
        return bool(self.named) or self.asks not in (Asks.PAPERS, Asks.RECOMMEND)

    @property
    def citations(self) -> list[Source]:
        used = sorted({n for s in self.sentences for n in s.citations})
        return [s for s in self.sources if s.n in used]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "abstained": self.abstained,
            "reason": self.reason,
            "note": self.note,
            "mode": self.mode,
            "asks": self.asks.value,
            "shape": self.shape.value,
            "written_by": self.written_by,
            "raw": self.raw,
            "verdict": self.verdict,
            "read": self.read,
            "total": self.total or len(self.sources),
            "items": [i.to_dict() for i in self.items],
            "more": self.more,
            "citations": [
                {k: v for k, v in s.to_dict().items() if k not in ("abstract", "score")}
                for s in self.citations
            ],
            "sentences": [s.to_dict() for s in self.sentences],
            "sources": [s.to_dict() for s in self.sources],
            "llm": {"backend": self.backend, "model": self.model},
            "timings": self.timings,
        }


def normalise_citations(text: str) -> str:
    for pattern, repl in _CITE_FORMS:
        text = pattern.sub(repl, text)
    return text


_TRAILING_CITES = re.compile(r"([.!?])((?:\s*\[\s*\d[\d\s,;–-]*\])+)")


def attach_citations(text: str) -> str:
    """ "... genres. [1]" -> "... genres [1]." so a citation stays with its sentence."""
    return _TRAILING_CITES.sub(lambda m: " " + " ".join(m.group(2).split()) + m.group(1), text)


def parse_citations(sentence: str) -> list[int]:
    out: list[int] = []
    for group in _CITE.findall(sentence):
        for part in re.split(r"\s*[,;]\s*", group):
            if re.fullmatch(r"\d+\s*[–-]\s*\d+", part):
                a, b = (int(x) for x in re.split(r"\s*[–-]\s*", part))
                out.extend(range(a, min(b, a + 10) + 1))
            elif part.strip().isdigit():
                out.append(int(part))
    return list(dict.fromkeys(out))


def shape_for(result: Retrieval) -> Shape:
    """The answer's shape: a list where the matching papers are known (an author's or a
    track's, or every paper mentioning a topic), else what the question asks for."""
    q = result.parsed
    if result.mode == "filtered" or (
        result.mode in ("author", "track") and not question_has_topic(result)
    ):
        return Shape.LIST  # every hit of a follow-up "which of those ..." matches it
    asks = q.asks if q is not None else Asks.EXPLAIN
    if asks is Asks.PAPERS:
        # Papers mentioning the topic are known: listed. Otherwise the writer says which fit.
        return Shape.LIST if result.total else Shape.RECOMMEND
    return {
        Asks.DETAIL: Shape.DETAIL,
        Asks.YESNO: Shape.YESNO,
        Asks.COMPARE: Shape.COMPARE,
        Asks.RECOMMEND: Shape.RECOMMEND,
    }.get(asks, Shape.EXPLAIN)


def question_has_topic(result: Retrieval) -> bool:
    """An author/track question that also asks about a topic was ranked, not listed."""
    return any(h.matched != ("metadata",) for h in result.hits)


class Answerer:
    """Question -> retrieval -> writer (a model, or the sources' sentences) -> checked answer."""

    def __init__(
        self,
        retriever: Retriever,
        settings: Settings | None = None,
        backend: Backend | None = None,
        verifier: Verifier | None = None,
        writer: Writer | None = None,
    ) -> None:
        self.retriever = retriever
        self.settings = settings or retriever.index.settings
        if writer is None and backend is not None:
            writer = ModelWriter(self.settings.llm, backend)
        self._writer = writer
        self._verifier = verifier
        self._excerpter: Excerpter | None = None
        self._readings: dict[tuple[str, str], Reading] = {}

    @property
    def verifier(self) -> Verifier:
        if self._verifier is None:
            self._verifier = default_verifier(self.retriever.index.query_model)
        return self._verifier

    @property
    def excerpter(self) -> Excerpter:
        if self._excerpter is None:
            self._excerpter = Excerpter(self.retriever.index.query_model)
        return self._excerpter

    @property
    def writer(self) -> Writer:
        if self._writer is None:
            self._writer = make_writer(self.settings.llm)
        return self._writer

    # ------------------------------------------------------------------ entry point

    def ask(
        self,
        question: str,
        k: int | None = None,
        author: str | None = None,
        track: str | None = None,
        on_token: Callable[[str], None] | None = None,
        within: set[str] | None = None,
        on_sources: Callable[[list[Source]], None] | None = None,
    ) -> Answer:
        """Retrieve, then answer; `on_sources` sees the sources before any writing starts."""
        started = time.perf_counter()
        k = k or self.settings.answer.sources
        result = self.retriever.retrieve(question, k=k, author=author, track=track, within=within)
        answer = Answer(question=question, mode=result.mode, signals=dict(result.signals))
        if result.parsed is not None:
            answer.asks = result.parsed.asks
            answer.named = result.parsed.named
        answer.total = result.total
        answer.timings["retrieve_ms"] = round((time.perf_counter() - started) * 1000, 1)
        answer.sources = [
            Source(i, h.paper, h.score, h.passage, matches="relevant" in h.matched)
            for i, h in enumerate(result.hits, start=1)
        ]
        if on_sources:
            on_sources(answer.sources)
        answer.shape = shape_for(result)
        if result.abstained and result.hits:
            # Retrieval's reason is in plain words ("none of the indexed papers is about this:
            # the closest never mention 'GPU'"); the closest papers are the sources shown.
            said = result.reason[:1].upper() + result.reason[1:]
            self._abstain(answer, result.reason, f"{said}. The closest papers are listed below.")
        elif result.abstained and result.parsed and result.parsed.unknown_track:
            tracks = self.retriever.tracks
            self._abstain(
                answer, result.reason, unknown_track_text(result.parsed.unknown_track, tracks)
            )
        elif result.abstained:
            self._abstain(answer, result.reason, f"{NO_COVERAGE} ({result.reason})")
        elif answer.shape is Shape.LIST:
            self._list(answer, result, on_token)
        else:
            self._prose(answer, on_token)
        answer.timings["total_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return answer

    def _abstain(self, answer: Answer, reason: str, text: str) -> None:
        answer.abstained, answer.reason, answer.text = True, reason, text
        answer.sentences, answer.items, answer.written_by = [], [], ""

    # ------------------------------------------------------------------ lists

    def _list(
        self, answer: Answer, result: Retrieval, on_token: Callable[[str], None] | None
    ) -> None:
        """The count, then one line per matching paper: its name and what it does, cited.

        What it does is the clause in which the paper says so ("proposes X, a ..."); the
        writer shortens each, and a shortened line the verifier does not find supported by
        its paper gives way to the paper's own clause."""
        listing = result.mode in ("author", "track", "filtered")
        matching = [s for s in answer.sources if listing or s.matches]
        if not matching:  # a topic list where no top source says the topic: rank as prose
            answer.shape = Shape.RECOMMEND
            self._prose(answer, on_token)
            return
        shown = matching[: self.settings.answer.list_items]
        answer.more = len(matching) - len(shown)
        for s in shown:
            s.in_prompt = True
        gists = [self.excerpter.gist(s.paper) for s in shown]
        clauses = [gist_clause(g) for g in gists]
        draft = Draft(
            answer.question,
            Shape.LIST,
            tuple(s.n for s in shown),
            tuple(s.paper for s in shown),
            tuple(Excerpt((c,), c, 1.0, g) for c, g in zip(clauses, gists, strict=True)),
        )
        written = self._write(answer, draft, on_token)
        lines: dict[int, str] = {}
        if written.own_words:
            text = clean_text(normalise_citations(written.text), lines=True)
            # A "[n]" followed by words starts a line, on a line of its own or not.
            for line in re.split(r"\n|(?=\[\d{1,3}\]\s*[A-Za-z])", text):
                if (m := _ITEM.match(line)) is not None:
                    lines.setdefault(int(m.group(1) or m.group(2)), m.group(3))
        items, sentences = [], []
        for s, clause, gist in zip(shown, clauses, gists, strict=True):
            name = clean_text(s.paper.display_name)
            text, own, note, evidence = _item_text(lines.get(s.n, ""), s.paper), False, "", gist
            if text and len(text.split()) < MIN_GIST_WORDS:
                text, note = "", "the model's line was too short to say what the paper does"
            if text:
                verdict = self.verifier.check(text, [s.paper], answer.question, answer.framing)
                if not verdict.supported:
                    why = verdict.reason or "no source supports it"
                else:
                    why = "" if answer.failed else self._not_stated(text, s.paper, verdict.evidence)
                if not why:
                    own, evidence = True, verdict.evidence
                else:
                    note = f"the model's line was not supported ({why}); quoted instead"
            if not own:
                text = clause
            items.append(Item(s.n, name, text, own))
            sentences.append(
                Sentence(f"{name}: {text}", [s.n], True, 1.0, evidence, note, own_words=own)
            )
        answer.items, answer.sentences = items, sentences
        answer.text = (
            _list_head(result, len(matching))
            + "\n"
            + "\n".join(f"- {i.name}: {_end(i.gist)[:-1]} [{i.n}]" for i in items)
        )
        if answer.more:
            answer.text += f"\n- and {answer.more} more, listed with the sources."
        # Model-written when most lines are the model's (each checked against its paper).
        mine = sum(i.own_words for i in items)
        answer.written_by = "model" if 2 * mine > len(items) else "extractive"

    # ------------------------------------------------------------------ everything else

    def _prose(self, answer: Answer, on_token: Callable[[str], None] | None) -> None:
        settings = self.settings.answer
        prompt_sources = answer.sources[: settings.prompt_sources]
        draft = self._draft(
            answer,
            prompt_sources,
            settings.prompt_chars,
            gist_first=answer.shape in (Shape.COMPARE, Shape.RECOMMEND),
            with_gist=answer.shape is Shape.EXPLAIN,
        )
        if answer.total > len(prompt_sources):
            answer.note = (
                f"{answer.total} indexed papers match; the answer draws on the closest "
                f"{len(prompt_sources)}, and every match is listed with the sources."
            )
        try:
            draft = self._read(answer, draft)
        except BackendError as err:  # the model failed before writing: not asked again
            written = self._fall_back(answer, draft, f"The LLM is unavailable ({err}).")
        else:
            written = self._write(answer, draft, on_token)
        self._check(answer, written, draft)
        if settings.redraft and written.own_words and 0 < _supported_share(answer) < 1:
            self._redraft(answer, draft)
        if answer.abstained and answer.reason == UNSUPPORTED and written.own_words:
            # The verifier found none of the model's sentences in the sources: one more try
            # before the answer abstains, reading more (every retrieved source, its best
            # sentences and what it does) and asked for the sources' sentences that answer
            # (rag.prompts.RETRY). The first try reads little because prefill is most of the
            # wait; most answers need no more.
            answer.abstained, answer.reason = False, ""
            retry = self._draft(
                answer,
                answer.sources,
                settings.prompt_chars * RETRY_READS,
                retry=True,
                with_gist=True,
                every=True,
            )
            first = dict(answer.timings)
            written = self._write(answer, retry, None)
            answer.timings = first | {"retry_ms": written.timings.get("generate_ms", 0.0)}
            self._check(answer, written, retry)
            if answer.abstained and _copies_example(written.text, answer.sources):
                # Twice the model wrote its prompt's example back instead of an answer: the
                # writer failed, as an outage is a failure, and says nothing of the sources.
                answer.abstained, answer.reason = False, ""
                why = "The model repeated its instructions' example instead of answering."
                self._check(answer, self._fall_back(answer, retry, why), retry)
        if answer.shape is Shape.COMPARE and not answer.abstained:
            self._cover_compared(answer)

    def _reading(self, kind: str) -> Reading:
        model = self.writer.model
        if (kind, model) not in self._readings:
            self._readings[kind, model] = Reading.load(kind, model)
        return self._readings[kind, model]

    def _read(self, answer: Answer, draft: Draft) -> Draft:
        """The model's reading of the evidence before it writes (rag.judge): a yes/no
        question's verdict, or whether the sources contradict what the question assumes.
        The answer is then asked to start with it, reusing all the model has read."""
        if answer.shape is Shape.YESNO:
            kind, ask = "verdict", VERDICT_ASK
        elif answer.shape in PREMISED:
            kind, ask = "premise", PREMISE_ASK
        else:
            return draft
        started = time.perf_counter()
        log_odds = self.writer.yes_log_odds(draft, ask)
        if log_odds is None:
            return draft
        reading = self._reading(kind)
        answer.timings["read_ms"] = round((time.perf_counter() - started) * 1000, 1)
        answer.signals[f"{kind}_p_yes"] = round(reading.p_yes(log_odds), 3)
        if not reading.fitted and kind == "verdict":  # a premise read as holding changes nothing
            answer.note = " ".join(
                x for x in (answer.note, f"No {kind} fit for {reading.model}: its own choice.") if x
            )
        if kind == "verdict":
            answer.read, answer.verdict = kind, reading.decide(log_odds)
            return replace(draft, instruction=VERDICT_LEADS[answer.verdict])
        if not reading.predict(log_odds):  # the sources do not agree with what the question assumes
            answer.read = kind
            return replace(draft, instruction=PREMISE_LEAD)
        return draft

    def _not_stated(self, body: str, paper: Paper, evidence: str) -> str:
        """Why the model, reading the source sentence a sentence aligned to, does not find
        it stated there ("" when it does, or cannot say): rag.judge's "claim" reading."""
        if not self.settings.answer.read_claims:
            return ""
        try:
            log_odds = self.writer.reads(claim_prompt(paper, evidence, body))
        except BackendError:
            return ""  # the answer's own failure is reported where it writes
        if log_odds is None:
            return ""
        reading = self._reading("claim")
        if reading.predict(log_odds):
            return ""
        return f"the model does not read it in the source (P {reading.p_yes(log_odds):.2f})"

    def _cover_compared(self, answer: Answer) -> None:
        """A comparison describes each paper the question names: one the answer does not
        cite gets a sentence of its own, the clause in which it says what it does (as a list
        item would), quoted and cited."""
        cited = {n for s in answer.sentences if s.supported for n in s.citations}
        before = len(answer.sentences)
        for src in answer.sources:
            if src.paper.id not in answer.named or src.n in cited:
                continue
            gist = self.excerpter.gist(src.paper)
            if not gist:
                continue
            src.in_prompt = True
            name = clean_text(src.paper.display_name)
            text = f"{name}: {_item_text(gist_clause(gist), src.paper)}"
            note = "added: the answer did not describe this compared paper; its own clause"
            answer.sentences.append(Sentence(text, [src.n], True, 1.0, gist, note, own_words=False))
        if len(answer.sentences) > before:
            answer.text = " ".join(_with_citations(s) for s in answer.sentences)

    def _redraft(self, answer: Answer, draft: Draft) -> None:
        """The same sources written once more under the strict instruction; the verifier
        keeps the draft more of whose claims the sources support (the first on a tie)."""
        second = copy.copy(answer)
        second.timings = dict(answer.timings)
        redraft = replace(draft, strict=True)
        written = self._write(second, redraft, None)
        self._check(second, written, redraft)
        spent = {"redraft_ms": written.timings.get("generate_ms", 0.0)}
        if not second.failed and _supported_share(second) > _supported_share(answer):
            second.timings = answer.timings
            answer.__dict__.update(second.__dict__)
        answer.timings.update(spent)

    def _draft(
        self,
        answer: Answer,
        sources: list[Source],
        budget: int,
        retry: bool = False,
        **pick: bool,
    ) -> Draft:
        """The writer's draft from these sources (marked as in the prompt), with their
        sentences for the question picked within `budget` characters."""
        for s in sources:
            s.in_prompt = True
        excerpts = self.excerpter.pick(
            answer.question,
            [s.paper for s in sources],
            self.settings.answer.sentences_per_source,
            answer.asks,
            budget,
            **pick,
        )
        numbers, papers = tuple(s.n for s in sources), tuple(s.paper for s in sources)
        return Draft(answer.question, answer.shape, numbers, papers, tuple(excerpts), retry=retry)

    def _write(
        self, answer: Answer, draft: Draft, on_token: Callable[[str], None] | None
    ) -> Written:
        """The writer's answer; when a model fails, the sources' sentences and why."""
        writer = self.writer
        answer.backend, answer.model = writer.name, ""
        note = ""
        try:
            written = writer.write(draft, on_token)
        except AnswerCutOff as err:
            # What streamed is not shown as the answer: a half sentence reads as a whole one,
            # and unverified text is what this module never presents.
            note = f"The model's answer was cut off ({err})."
        except BackendError as err:
            note = f"The LLM is unavailable ({err})."
        else:
            answer.model = writer.model
            answer.timings.update(written.timings)
            answer.raw = written.text
            return written
        return self._fall_back(answer, draft, note)

    def _fall_back(self, answer: Answer, draft: Draft, why: str) -> Written:
        """The sources' own sentences, when the model failed, and a note saying why."""
        answer.failed = True
        shown = "Showing the most relevant sentences of the sources instead."
        answer.note = f"{answer.note} {why} {shown}".strip()
        answer.backend, answer.model = "extractive", ""
        return ExtractiveWriter().write(draft)

    def _sentences(
        self, answer: Answer, written: Written, prompt_sources: list[Source]
    ) -> list[Sentence]:
        """The writer's sentences: citations parsed, repaired or attached, each verified."""
        parts = (
            written.parts
            if written.parts is not None
            else _split(written.text, {s.n: s.paper for s in prompt_sources})
        )
        sentences: list[Sentence] = []
        for i, (raw, cited) in enumerate(parts):
            body = strip_citations(raw)
            if i == 0 and answer.read and (m := _VERDICT.match(body)):
                # The opening word is the reading's, made before the model wrote: what the
                # model wrote after it is evidence, checked as any claim.
                body = body[m.end() :].strip()
                body = body[:1].upper() + body[1:]
            if i == 0 and answer.read:
                said = _VERDICT_WORDS.get(answer.verdict, "No")
                verdict = Sentence(f"{said}.", [], True, 0.0, kind="verdict")
                if answer.read == "premise":
                    verdict.note = "the sources contradict what the question assumes"
                if answer.verdict == "open":
                    verdict.note = "the model's reading of the sources is too unsure to say"
                elif _restates(body, answer.question):
                    verdict.text = _end(f"{said}, {_lower_first(body, answer.question)}")
                    sentences.append(verdict)
                    continue
                sentences.append(verdict)
            elif i == 0 and answer.shape is Shape.YESNO and (m := _VERDICT.match(body)):
                # No reading (the backend gave no log-probabilities): the model's own word.
                answer.verdict = "yes" if m.group("yes") else "no" if m.group("no") else "open"
                said = _VERDICT_WORDS[answer.verdict]
                verdict = Sentence(f"{said}.", [], True, 0.0, kind="verdict")
                sentences.append(verdict)
                body = body[m.end() :].strip()
                if _restates(body, answer.question):
                    # "No, SPA-Cache does not ...": the verdict in words, not evidence.
                    verdict.text = _end(f"{said}, {_lower_first(body, answer.question)}")
                    continue
                body = body[:1].upper() + body[1:]
            short = len(re.findall(r"\w+", body)) < 3
            if (
                short
                and answer.asks is Asks.DETAIL
                and (quoted := _stating(body, cited, prompt_sources))
            ):
                sentences.append(quoted)  # "[1] 207 studies": the value, said by its source
                continue
            if (
                short
                or _restates(body, answer.question)
                or _only_points(body, prompt_sources)
                or _copies_example(body, prompt_sources)
                or _only_release(body, answer.question)
            ):
                continue  # "Answer:", stray fragments, the question said back, the example
            if _COVERAGE.search(body):
                sentences.append(Sentence(body, [], True, 0.0, kind="coverage"))
                continue
            valid = [n for n in cited if any(s.n == n for s in prompt_sources)]
            note = ""
            if len(valid) != len(cited):
                missing = sorted(set(cited) - set(valid))
                note = f"removed citation(s) to sources that do not exist: {missing}"
            sentence = self._verified(
                body,
                valid,
                prompt_sources,
                note,
                answer.question,
                answer.framing,
                read=written.own_words and not answer.failed,
            )
            sentence.own_words = written.own_words
            sentences.append(sentence)
        _withdraw_unbacked(answer, sentences)
        if self.settings.answer.unsupported == "drop":
            sentences = [s for s in sentences if s.supported or s.kind != "claim"]
        return sentences

    def _check(self, answer: Answer, written: Written, draft: Draft) -> None:
        """The writer's sentences checked; an answer with no supported claim abstains."""
        prompt_sources = [s for s in answer.sources if s.in_prompt]
        sentences = self._sentences(answer, written, prompt_sources)
        claims = [s for s in sentences if s.kind == "claim"]
        if (
            (answer.verdict or answer.read)
            and not any(s.supported for s in claims)
            and draft.excerpts
        ):
            # A verdict with no checked evidence: the sentence of the closest source that the
            # question needs is quoted as its evidence.
            first = draft.excerpts[0]
            if first.best:
                v = self.verifier.check(first.best, [draft.papers[0]])
                evidence = Sentence(first.best, [draft.numbers[0]], True, v.score, first.best)
                evidence.own_words, evidence.note = False, "quoted as the verdict's evidence"
                sentences.append(evidence)
                claims.append(evidence)
        if not any(s.supported for s in claims):
            said_none = any(s.kind == "coverage" for s in sentences)
            reason = (
                "the model found that the retrieved abstracts do not answer it"
                if said_none
                else UNSUPPORTED
            )
            text = (
                f"{NO_COVERAGE} The closest papers are listed below."
                if said_none
                else "The model's answer could not be checked against the sources, so it is "
                "not shown. The closest papers are listed below."
            )
            self._abstain(answer, reason, text)
            return
        if answer.verdict and not any(s.kind == "verdict" for s in sentences):
            answer.verdict = ""
        if answer.read and not any(s.kind == "verdict" for s in sentences):
            answer.read = ""
        answer.sentences = sentences
        answer.text = " ".join(_with_citations(s) for s in sentences)
        own = any(s.own_words and s.supported for s in claims) or (
            (answer.verdict != "" or answer.read != "") and written.own_words
        )
        answer.written_by = "model" if own and not answer.failed else "extractive"

    def _verified(
        self,
        body: str,
        cited: list[int],
        sources: list[Source],
        note: str,
        question: str = "",
        framing: bool = True,
        read: bool = False,
    ) -> Sentence:
        """The sentence checked against what it cites (its citations repaired if another
        source supports it); with `read`, an accepted sentence is also read by the model
        against the source sentence it aligned to (`_not_stated`)."""
        by_n = {s.n: s for s in sources}
        refused: set[int] = set()  # sources the model read and did not find it stated in
        # A sentence that names a paper must be supported by that paper's abstract; another
        # source's words count only where that source itself names the paper.
        wrong = misattributed(body, [by_n[n].paper for n in cited], [s.paper for s in sources])
        named = [s for s in sources if names_paper(body, s.paper)]
        if cited and not wrong:
            verdict = self.verifier.check(body, [by_n[n].paper for n in cited], question, framing)
            if verdict.supported and len(cited) > 1:
                # A second paper cited on a sentence one paper alone supports, that itself
                # does not, is a wrong citation: the reader would follow it for nothing.
                alone = [
                    n
                    for n in cited
                    if self.verifier.check(body, [by_n[n].paper], question, framing).supported
                ]
                if alone and alone != cited:
                    dropped = ", ".join(f"[{n}]" for n in cited if n not in alone)
                    note = "; ".join(x for x in (note, f"citation {dropped} dropped") if x)
                    cited = alone
                    verdict = self.verifier.check(
                        body, [by_n[n].paper for n in cited], question, framing
                    )
                    # A dropped paper the sentence names leaves a claim about it unsupported
                    # by its own abstract ("A and B both ...").
                    wrong = misattributed(
                        body, [by_n[n].paper for n in cited], [s.paper for s in sources]
                    )
            if verdict.supported and not wrong:
                n = cited[max(verdict.source, 0)]
                why = self._not_stated(body, by_n[n].paper, verdict.evidence) if read else ""
                if not why:
                    return Sentence(body, cited, True, verdict.score, verdict.evidence, note)
                refused.add(n)
                verdict = Verdict(False, verdict.score, verdict.evidence, verdict.source, why)
        # Wrong or missing citation: the source that does support it, if any, is cited instead
        # (post-hoc attribution: a small model often writes the right sentence, uncited).
        best = None
        for s in named or sources:
            if s.n in refused:
                continue
            v = self.verifier.check(body, [s.paper], question, framing)
            if v.supported and (best is None or v.score > best[1].score):
                best = (s.n, v)
        unread = ""
        if best is not None and read:
            unread = self._not_stated(body, by_n[best[0]].paper, best[1].evidence)
            if unread:
                best = None
        if best is not None:
            fix = f"citation repaired to [{best[0]}]" if cited else f"citation added: [{best[0]}]"
            return Sentence(
                body,
                [best[0]],
                True,
                best[1].score,
                best[1].evidence,
                "; ".join(x for x in (note, fix) if x),
            )
        if wrong and cited:
            marks = ", ".join(f"[{n}]" for n in cited)
            who = ", ".join(p.display_name for p in wrong)
            reason = f"misattributed: names {who} but cites {marks}, which does not"
            verdict = Verdict(False, 0.0, "", -1, reason)
        reason = verdict.reason if cited else unread or "no source supports it"
        return Sentence(
            body,
            cited,
            False,
            verdict.score if cited else 0.0,
            verdict.evidence if cited else "",
            "; ".join(x for x in (note, f"unsupported: {reason}") if x),
        )


def _split(text: str, papers: dict[int, Paper] | None = None) -> list[tuple[str, list[int]]]:
    """A model's text as sentences, each with the citations it carries. The sources' names
    are kept whole ("Huang et al. (Foundation Models)" is not two sentences)."""
    papers = papers or {}
    text = _name_subjects(clean_text(normalise_citations(text)), papers)
    text = attach_citations(text)
    names = sorted({clean_text(p.display_name) for p in papers.values() if p.display_name}, key=len)
    kept: dict[str, str] = {}
    for i, name in enumerate(reversed(names)):
        if name in text:
            # Opens with a capital, as a name may open a sentence ("... [1]. SPA-Cache ...").
            kept[f"N\ue000{i}\ue001"] = name
            text = text.replace(name, f"N\ue000{i}\ue001")
    out = []
    for sentence in split_sentences(text):
        for mark, name in kept.items():
            sentence = sentence.replace(mark, name)
        out.append((sentence, parse_citations(sentence)))
    return out


# "[2] shows that ...": a citation mark written as a sentence's subject (a lower-case word
# follows it where a sentence would start).
_MARK_SUBJECT = re.compile(r"(^|[.!?]\s+)\[(\d{1,3})\]\s+(?=[a-z])")


def _name_subjects(text: str, papers: dict[int, Paper]) -> str:
    """The paper's name where the model made its citation mark the subject, so the sentence
    says who did it: "[2] shows X." -> "SPA-Cache [2] shows X." (not "... [2]. shows X.").
    Where the sentence names the paper itself ("[1] introduces SAEmnesia, ..."), its authors
    are the subject; where it opens with the name ("[2] iSAE, ..."), the mark follows it."""
    out, at = [], 0
    for m in _MARK_SUBJECT.finditer(text):
        paper = papers.get(int(m.group(2)))
        if paper is None or not paper.display_name:
            continue
        mark, name = f"[{m.group(2)}]", clean_text(paper.display_name)
        rest = text[m.end() :].split(". ")[0]
        names = [n for n in (name, *paper.names) if n]
        opening = next((n for n in names if rest.casefold().startswith(n.casefold())), "")
        out.append(text[at : m.end(1)])
        if opening:
            out.append(f"{rest[: len(opening)]} {mark}")
            at = m.end() + len(opening)
            continue
        if any(n.casefold() in rest.casefold() for n in names):
            surname = paper.authors[0].split()[-1] if paper.authors else ""
            name = f"{surname} et al." if surname else "One paper"
        out.append(f"{name} {mark} ")
        at = m.end()
    return "".join(out) + text[at:]


def _with_citations(s: Sentence) -> str:
    if not s.citations:
        return _end(s.text)
    end = _end(s.text)
    return f"{end[:-1]} {''.join(f'[{n}]' for n in s.citations)}{end[-1]}"


def _withdraw_unbacked(answer: Answer, sentences: list[Sentence]) -> None:
    """A bare "Yes." or "No." is not stated when the sentence the model wrote right after it
    is unsupported: on a question the model misreads, that sentence says what no source
    does ("No. X cannot Y", flagged), and the verdict with it. A verdict restated in its own
    words ("No, X does not ...") stands, as does one the model wrote nothing checkable for."""
    if answer.verdict not in ("yes", "no") or len(sentences) < 2:
        return
    verdict, after = sentences[0], sentences[1]  # a verdict is always the first sentence
    bare = verdict.text == f"{_VERDICT_WORDS[answer.verdict]}."
    if verdict.kind != "verdict" or not bare or after.kind != "claim" or after.supported:
        return
    answer.signals["verdict_withdrawn"] = 1.0
    answer.verdict = "open"
    verdict.text = f"{_VERDICT_WORDS['open']}."
    verdict.note = "the sentence the model wrote for its verdict is not in the sources"


def _end(text: str) -> str:
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _item_text(text: str, paper: Paper) -> str:
    """A model's list line without its citation marks and a leading copy of the paper's name."""
    text = strip_citations(text).strip(" -–—:")
    for name in (paper.display_name, *paper.names, paper.title):
        if name and text.casefold().startswith(name.casefold()):
            text = text[len(name) :].lstrip(" :,-–—")
            break
    text = text.rstrip(" .")
    return text[:1].lower() + text[1:] if text[:2].istitle() else text


def _restates(sentence: str, question: str) -> bool:
    """Whether a sentence only says the question's own words back (its content words are
    all the question's), so it adds nothing to check."""
    if numbers(sentence) - numbers(question):
        return False  # "by 96.7%": the value asked for
    said = set(stems(sentence, _CONTENT_DROP))
    return bool(said) and said <= set(stems(question, _CONTENT_DROP))


def _supported_share(answer: Answer) -> float:
    """The share of an answer's claims the verifier supports (0 for an abstention)."""
    claims = [s for s in answer.sentences if s.kind == "claim"]
    if answer.abstained or not claims:
        return 0.0
    return sum(s.supported for s in claims) / len(claims)


def _copies_example(sentence: str, sources: Sequence[Source]) -> bool:
    """Whether a sentence shares two or more word pairs with the prompt's examples that its
    sources do not have."""
    borrowed = _pairs(sentence) & _EXAMPLE_PAIRS
    if len(borrowed) < 2:
        return False
    for s in sources:
        borrowed -= _pairs(f"{s.paper.display_name}. {s.paper.abstract}")
    return len(borrowed) >= 2


def _only_release(sentence: str, question: str) -> bool:
    """Whether a sentence only announces released code, data or models, and the question
    asks about none of them."""
    said = set(stems(sentence, _CONTENT_DROP))
    return bool(said) and said <= _RELEASE and not said & set(stems(question, _CONTENT_DROP))


def _stating(figure: str, cited: list[int], sources: Sequence[Source]) -> Sentence | None:
    """For a bare figure the model answered with ("207 studies"), the sentence of a source it
    cites that states it, quoted: two words are too few to check against a source, and the
    source's own sentence says what the figure measures."""
    wanted = numbers(figure)
    if not wanted:
        return None
    for source in (s for s in sources if s.n in cited):
        for sentence in source_sentences(source.paper):
            if wanted <= numbers(sentence):
                quoted = Sentence(sentence, [source.n], True, 1.0, sentence, kind="claim")
                quoted.own_words, quoted.note = False, f"quoted for the model's '{figure}'"
                return quoted
    return None


def _only_points(sentence: str, sources: Sequence[Source]) -> bool:
    """Whether a sentence names sources and says nothing of what they found."""
    return not stems(without_names(sentence, [s.paper for s in sources]), _POINTING)


def _list_head(result: Retrieval, n: int) -> str:
    papers = f"{n} indexed paper{'s' if n != 1 else ''}"
    if result.mode == "author":
        who = ", ".join(result.authors)
        return f"{papers} list{'s' if n == 1 else ''} {who} as an author:"
    if result.mode == "track":
        return f"{papers} {'is' if n == 1 else 'are'} in {', '.join(result.tracks)}:"
    if result.mode == "filtered":
        return f"{papers} of the earlier answer match{'es' if n == 1 else ''}:"
    topic = " and ".join(result.topics) if result.topics else "this"
    return f"{papers} {'is' if n == 1 else 'are'} about {topic}; the most relevant first:"


def iter_answer_text(answer: Answer) -> Iterator[str]:
    """The answer and its numbered sources as lines for a terminal."""
    yield answer.text
    for s in answer.sentences:
        if not s.supported:
            yield f"  ! unsupported: {s.text}"
    if answer.note:
        yield f"Note: {answer.note}"
    if answer.sources:
        yield ""
        yield "Sources:"
        for src in answer.sources:
            p = src.paper
            track = f" — {clean_text(p.track)}" if p.track else ""
            yield f"[{src.n}] {clean_text(p.display_name)} — {clean_text(p.authors_text)}{track}"
