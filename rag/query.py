"""Understanding a question once: `parse(question, vocabulary) -> Query`.

Retrieval, answering and the chat read the `Query`; none of them looks at the raw question
again. Names (authors, tracks, the names papers coin) are resolved against a `Vocabulary`
built from the indexed papers, on one principle: a word of the question names something of
the collection when the collection's own text makes that likely — it is an author's name the
abstracts (almost) never use as a word, or the question writes it as a name (capitalised
inside a sentence). What a question asks for (a list of papers, a detail, an explanation, a
comparison, a recommendation) is read from its wording.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from rag.corpus import Paper
from rag.text import (
    GENERIC_ACRONYMS,
    KIND_FAMILY,
    KINDS,
    NUMBER_WORDS,
    PLAIN_ACRONYMS,
    QUESTION_WORDS,
    SHORT_NAME,
    STOPWORDS,
    WORD,
    Figure,
    coined_tokens,
    contains,
    fold,
    is_acronym,
    looks_coined,
    mentions_name,
    number_value,
    one_edit,
    phrase,
    plain_words,
    spells_out,
    split_sentences,
    stated_figures,
    stem,
    tokens,
    word_list,
)

# Words that say nothing about a question's topic.
FILLER = STOPWORDS | QUESTION_WORDS
# A name at most this many papers share identifies them ("LLM-X", coined by dozens, does
# not), and a word the collection uses at most this many times is rare enough to be a name.
MAX_NAME_SHARERS = 3
# A rare word stands "next to" the words framing a question within this many words
# ("which papers list bouniot as an author").
NAME_REACH = 3
# ICML's position papers are a track of their own, but listings file them under their
# subject area; their titles ("Position: ...") or abstracts say what they are.
POSITION_TRACK = "Position papers"
_POSITION = re.compile(r"^\s*position\s*:|\bposition papers?\b", re.IGNORECASE)
_TRACK_CUES = frozenset({"track", "tracks", "area", "areas", "category", "filed", "submitted"})


def _track_cue(word: str) -> bool:
    # "subarea", "sub-track": a subarea is named as its track is.
    return word in _TRACK_CUES or word.removeprefix("sub").removeprefix("-") in _TRACK_CUES


_SENTENCE_END = re.compile(r"[.?!:;]\s*$")
# A phrase the question puts in quotes ("what is 'token dropping' here?"); past 80
# characters a quote is a passage, not a name.
_QUOTED = re.compile(r"(?<!\w)['‘\"“]([^'‘’\"“”]{3,80})['’\"”](?!\w)")
# Between the names a subarea lists: "Accountability, Transparency, and Interpretability".
_LISTED = re.compile(r",\s*(?:and\s+)?")
_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*[\w]")
# Two or more capitalised words in a row, not opening a sentence: a name ("Causal Forest
# Transformer"), as a phrase in quotes is. Words shaped like coined names are names of their
# own, written in other ways ("ViT encoders" for "Vision-Transformer encoders").
_TITLED = re.compile(r"(?<=[\w,;:)]\s)[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+\b(?![-\w])")
_SUBJECT = re.compile(
    r"\b(?i:what|how)\s+(?i:is|are|does|do|did|was)\s+(?i:the\s+|an?\s+)?([A-Z][\w\-]*[\w])"
)
# "papers by X", "what has X worked on": a question about an author, whoever X is.
_ABOUT_AUTHOR = re.compile(
    r"^(?:(?:list|show|find|give me)\s+)?(?:all\s+)?(?:the\s+)?(?:papers?|work|articles?)\s+"
    r"(?:written\s+|authored\s+|co-?authored\s+)?by\s+(?P<name>[\w .'\-]+?)\s*\??$"
    r"|^what\s+(?:has|have|did)\s+(?P<name2>[\w .'\-]+?)\s+(?:worked|work|published|written)"
    r"\b",
    re.IGNORECASE,
)


class Asks(StrEnum):
    """What a question wants back."""

    PAPERS = "papers"  # which papers ... / papers on ... / anything on ...
    DETAIL = "detail"  # a number or a specific fact
    EXPLAIN = "explain"  # why / how does ... work / summarise
    COMPARE = "compare"  # how do A and B differ
    RECOMMEND = "recommend"  # what should I read
    YESNO = "yesno"  # does / is / can ...: settled by yes, no, or not at all
    TOPIC = "topic"  # anything else about a topic


_ASKS = [
    (
        Asks.RECOMMEND,
        re.compile(
            r"\b(?:should|could|would|must)\s+i\s+(?:read|start|look|cite)|\brecommend(?!er)|"
            r"\bwhere\s+(?:do|should)\s+i\s+start|\bi\s+(?:work|am working)\s+on\b|"
            r"\bi\s+should\s+(?:read|start|look|cite)\b|"
            r"\bworth\s+reading|\bmust-?reads?\b|\banything\s+(?:relevant|useful|for\s+me)\b|"
            r"\brelevant\s+(?:to|for)\s+me\b|\b(?:relevant|useful)\s+(?:papers|reading)\W*$",
            re.I,
        ),
    ),
    (
        Asks.PAPERS,
        re.compile(
            r"\b(?:which|what|any|all|list|show|find|how many|(?:looking|searching)\s+for)"
            r"\s+(?:\w+\s+){0,2}"
            r"(?:papers?|work|articles?)"
            r"\b|^\s*papers?\s+(?:on|about|that|using|with)\b"
            # "anything on X?" asks for papers; "does it reveal anything about X?" does not.
            r"|^\W*(?:(?:is|are)\s+there\s+|(?:have\s+)?(?:you\s+)?got\s+)?anything\s+(?:on|about)\b"
            r"|\b(?:here|collection)\W+anything\s+(?:on|about)\b"
            # Existence questions (is/are there ..., has anyone ...) ask whether the
            # collection holds such work, which its papers answer.
            r"|^\W*(?:(?:is|are)\s+there|has\s+any\s?one|have\s+any\s+(?:papers?|work))\b",
            re.I,
        ),
    ),
    (
        # "How many layers does the probe read?" asks for a number, whatever it mentions.
        Asks.DETAIL,
        re.compile(
            r"^\W*(?:\w+\W+){0,3}?how (?:much|many|fast|large|big|long|small|often)\b", re.I
        ),
    ),
    (
        # "Why do A and B differ?" asks for an explanation of the difference.
        Asks.EXPLAIN,
        re.compile(r"^\W*(?:why|how come)\b", re.I),
    ),
    (
        # Opens with an auxiliary verb; "can you explain ..." is a request, not a yes/no.
        Asks.YESNO,
        re.compile(
            r"^\s*(?:(?:and|so|but|also)\s+|[^,?]{3,80},\s*)?(?:do|does|did|is|are|was|were|can|could|will|would|"
            r"has|have|had|should|may|might)\b(?!\s+(?:you|u)\b)",
            re.I,
        ),
    ),
    (
        Asks.COMPARE,
        # "What do A and B each find ...?" sets the two side by side too.
        re.compile(
            r"\bcompar\w*|\bdiffer\w*|\bversus\b|\bvs\.?\s|\bcontrast\b|\band\b[^?]*\beach\b",
            re.I,
        ),
    ),
    (
        Asks.DETAIL,
        re.compile(
            r"\b(?:how (?:much|many|fast|large|big|long|small|often)|what (?:is|was) the \w+ "
            r"(?:rate|score|accuracy|speed-?up)|what (?:fraction|share|proportion|percentage|"
            r"ratio)|by how|percent|speed-?up|faster|accuracy)\b",
            re.I,
        ),
    ),
    (
        Asks.EXPLAIN,
        re.compile(
            r"^\s*(?:why|how come)\b|\bexplain|\bsummari[sz]e|\bhow\s+(?:does|do|can|is)\b|"
            r"\bwhat\s+(?:is|are)\b",
            re.I,
        ),
    ),
]
# A detail only full papers state (rag/words/full_text.txt: patterns, "#" a number).
_FULL_TEXT = re.compile(
    r"\b("
    + "|".join(sorted((p.replace("#", r"\d+") for p in word_list("full_text")), key=len)[::-1])
    + r")\b",
    re.IGNORECASE,
)
_AND = re.compile(r"\s*(?:\band\b|&)\s*", re.IGNORECASE)
_WHY = re.compile(r"\s*(?:why|how come)\b", re.IGNORECASE)
# How an asker describes themselves: "my research ...", "I'm new to ...", and "I build ..."
# opening a sentence or clause (not "can I build ...?", which asks about the doing).
_ASKER = re.compile(
    r"\b(?:my|our)\s+([\w-]+)|\bi(?:['’]m|\s+am)\s+([\w-]+)"
    r"|(?:^|[.,;:!?()\u2014\u2013]|\s-)\s*(?:i|we)\s+([\w-]+)",
    re.IGNORECASE,
)
# "What error rate does X reach ...": the words of the result asked for. Only verbs that
# report a result: "what purpose does X serve?" asks for no figure.
_WHAT_RESULT = re.compile(
    r"^\W*what\s+((?:(?!(?:does|do|did|is|are|was|were)\b)[\w'’-]+\s+){1,3}?)(?:does|do|did)"
    r"\s+(?:\S+\s+)*?(?:reach|achieve|attain|obtain|get|report|score|keep|deliver)\b",
    re.IGNORECASE,
)
# "what's the exact F1 that X reaches?": the same, asked with a relative clause.
_WHAT_IS_RESULT = re.compile(
    r"^\W*what(?:['’]s|\s+is|\s+was)\s+the\s+((?:(?!(?:that|which|does|do|did)\b)[\w'’-]+\s+)"
    r"{1,4}?)(?:that|which)\s+(?:[\w'’-]+\s+)*?(?:reach|achieve|attain|obtain|get|report|score)"
    r"(?:e?s|ed)?\b",
    re.IGNORECASE,
)
# "How many times larger" asks for a ratio, not a count.
# "What is the number of ..." asks it too; a description may speak of a number in passing.
_ASKED_THE = r"(?:^\W*|\bwhat(?:['’]s|\s+(?:is|was|are|were))\s+)(?:the\s+)?(?:[a-z]+\s+)?"
_HOW_MANY = re.compile(
    rf"(?:\bhow\s+many|{_ASKED_THE}number\s+of)\s+(?!times\b)(.*)", re.IGNORECASE
)
# "What is the parameter count of X?" asks how many parameters X has.
_COUNT_OF = re.compile(rf"{_ASKED_THE}([\w-]+)\s+counts?\b", re.IGNORECASE)
# How large a result is: a figure, whatever it measures.
_HOW_MUCH = re.compile(
    r"\bhow\s+(?:much|many\s+times|large|fast)\b|\bwhat\s+percentage\b", re.IGNORECASE
)
# Follow-ups: "which of those ...", "and how fast is it?".
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


def is_position_paper(p: Paper) -> bool:
    return bool(_POSITION.search(p.title) or _POSITION.search(p.abstract))


@dataclass(frozen=True)
class Query:
    """A question, understood."""

    text: str
    words: tuple[str, ...]  # folded words
    topical: tuple[str, ...]  # words about the topic: no filler, no author or track words
    asks: Asks = Asks.TOPIC
    wants_all: bool = False  # every matching paper, not a top-k sample
    spells_topics: bool = False  # it asks for papers, so the topics it spells out are required
    joins_topics: bool = False  # the topics it names describe one piece of work
    authors: tuple[str, ...] = ()  # folded full names of matching authors
    tracks: tuple[str, ...] = ()
    unknown_author: str = ""  # asked about as an author, listed on no paper
    unknown_track: str = ""  # a track filter that matches no track
    explicit: bool = False  # authors/tracks came from filters, not from the wording
    named: tuple[str, ...] = ()  # ids of the papers whose coined names or titles it uses
    own_named: tuple[str, ...] = ()  # those of them named by a name of their own, not a capital
    # Those named by something particular (an own name, a quote, a coined shape, a model
    # family), not by a capitalised word many texts could write ("English").
    surely_named: tuple[str, ...] = ()
    described: str = ""  # "the <description> paper": one paper, described instead of named
    names: tuple[str, ...] = ()  # name-shaped tokens it uses (BLEU, GPT-2, AlphaFold)
    proper: tuple[str, ...] = ()  # other words it writes as names, inside a sentence (Minecraft)
    unknown_name: str = ""  # one of `names` that no title or abstract contains
    unseen_name: str = ""  # one of `names` with a word no title or abstract writes at all
    # The wording the topic check reads: reading advice lists the parts of a field with
    # "and" ("graph colouring and SAT solvers"), any one of which a paper may answer.
    topic_text: str = ""
    full_text_detail: str = ""  # a detail only full papers state ("batch size")
    counted: tuple[str, ...] = ()  # what a "how many" question counts ("robot arms")
    measured: tuple[str, ...] = ()  # the result "what X does ... reach" asks for ("error rate")
    which: str = ""  # the kind of thing "which K ..." asks the name of ("LLM", "benchmarks")
    which_number: float | None = None  # how many of them it asks for ("which five games")
    figure: bool = False  # asks how large a result is ("by how much", "how many times")
    figures: tuple[Figure, ...] = ()  # figures it states ("why ... 90% accuracy ...?")
    within: frozenset[str] | None = None  # a follow-up: only these papers

    @property
    def metadata_only(self) -> bool:
        """Answered from metadata alone: an author or track list with no topic."""
        return bool(self.authors or self.tracks) and not self.topical


@dataclass(frozen=True)
class FollowUp:
    """How a question leans on the conversation before it."""

    of_those: bool  # "which of those ...": search within the previous answer's papers
    about_it: bool  # "how fast is it?": about the one paper the previous answer was about
    rest: str  # the question without the lead-in and the back-reference


def follow_up(question: str) -> FollowUp:
    of_those = bool(_OF_THOSE.search(question))
    about_it = bool(_IT.search(question))
    rest = question
    if of_those:
        rest = _OF_THOSE.sub(" ", _LEAD.sub("", question))
        rest = re.sub(r"^\s*(?:which|what)\b", "", rest, flags=re.I)
        rest = " ".join(rest.split()).strip(" ?") or question
    return FollowUp(of_those, about_it, rest)


def looks_like_follow_up(question: str) -> bool:
    f = follow_up(question)
    return f.of_those or f.about_it or bool(_LEAD.match(question))


def replace_it(question: str, name: str) -> str:
    """The follow-up with its "it" replaced by the name of the paper it refers to."""
    return _IT.sub(name, _LEAD.sub("", question), count=1)


@dataclass
class Vocabulary:
    """What the collection knows by name, built from its papers (one store version)."""

    papers: dict[str, Paper] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    authors: dict[str, list[str]] = field(default_factory=dict)  # folded full name -> ids
    surnames: dict[str, set[str]] = field(default_factory=dict)  # last token -> full names
    author_tokens: dict[str, set[str]] = field(default_factory=dict)  # any token -> names
    track_parts: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    # A subarea that lists several names ("Sequential Models, Time series"): each of them.
    track_pieces: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    tracks: dict[str, list[str]] = field(default_factory=dict)  # track -> paper ids
    names: dict[str, list[str]] = field(default_factory=dict)  # coined name / title head
    # "guidance" -> {"Guidance"} (of "Guidance: ..."), "model" -> {"MODEL"} (coined)
    spellings: dict[str, set[str]] = field(default_factory=dict)
    capitalised: dict[str, set[str]] = field(default_factory=dict)  # "IPVRM" -> paper ids
    # The words a paper's own short name stands for ("risk awareness injection" of RAI).
    spelled: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    families: dict[str, set[str]] = field(default_factory=dict)  # "Qwen" (of "Qwen3-8B") -> ids
    coined_families: set[str] = field(default_factory=set)  # those carried by a coined name
    _original: str | None = None  # every title and abstract as written, joined on first use
    _text: str | None = None  # the same, lower-cased
    _stems: set[str] | None = None  # their words' stems, on first use
    _lowercase: set[str] | None = None  # the words written in lowercase somewhere
    _described: dict[str, bool] = field(default_factory=dict)  # acronym -> spelled in lowercase
    _counts: dict[str, int] = field(default_factory=dict)  # whole-word uses
    _substrings: dict[str, int] = field(default_factory=dict)  # uses inside any word
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, papers: Iterable[Paper]) -> Vocabulary:
        v = cls()
        for p in papers:
            v.papers[p.id] = p
            for alias in p.aliases:
                v.aliases[alias] = p.id
            for name in p.authors:
                key = phrase(name)
                v.authors.setdefault(key, []).append(p.id)
                if key:
                    v.surnames.setdefault(key.split()[-1], set()).add(key)
                    for tok in key.split():
                        v.author_tokens.setdefault(tok, set()).add(key)
            v.tracks.setdefault(p.track, []).append(p.id)
            if is_position_paper(p):
                v.tracks.setdefault(POSITION_TRACK, []).append(p.id)
            for name, spelled in _names_of(p):
                ids = v.names.setdefault(name, [])
                if p.id not in ids:
                    ids.append(p.id)
                v.spellings.setdefault(name, set()).add(spelled)
            for words in _spelled_out(p, {name for name, _ in _names_of(p)}):
                v.spelled.setdefault(words, set()).add(p.id)
            for tok in set(_CAPITALISED.findall(f"{p.title} {p.abstract}")):
                v.capitalised.setdefault(tok, set()).add(p.id)
                for family in _families(tok):
                    v.families.setdefault(family, set()).add(p.id)
                    if looks_coined(tok):
                        v.coined_families.add(family)
        for track in v.tracks:
            if track:
                area, _, sub = track.partition(" · ")
                parts = [t for t in (tokens(track), tokens(area), tokens(sub)) if t]
                pieces = [p for p in (tokens(piece) for piece in _LISTED.split(sub)) if p]
                if len(pieces) > 1:
                    v.track_pieces.append((track, pieces))
                    # After its area, one of them names the track ("Social Aspects · Privacy").
                    parts += [tokens(area) + p for p in pieces]
                v.track_parts.append((track, parts))
        return v

    # ------------------------------------------------------------------ the collection's text

    def text(self) -> str:
        if self._text is None:
            written = self.written()  # takes the lock itself
            with self._lock:
                self._text = fold(written)  # "Gödel" is "Godel", as a question may write it
        return self._text

    def written(self) -> str:
        """Every title and abstract as written, joined."""
        if self._original is None:
            with self._lock:
                self._original = "\n".join(f"{p.title}\n{p.abstract}" for p in self.papers.values())
        return self._original

    def uses(self, word: str) -> int:
        """How often titles and abstracts use `word` as a whole word."""
        if word not in self._counts:
            pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
            self._counts[word] = sum(1 for _ in pattern.finditer(self.text()))
        return self._counts[word]

    def is_ordinary(self, word: str) -> bool:
        """Whether the collection uses a word often (substring count, so it errs towards
        ordinary): a name that is such a word ("Guidance: ...", a model coined as "MODEL")
        names its paper only when the question spells it the same way."""
        if word not in self._substrings:
            self._substrings[word] = self.text().count(word)
        return self._substrings[word] > 4 * MAX_NAME_SHARERS

    # ------------------------------------------------------------------ metadata

    def match_authors(self, name: str) -> list[str]:
        """Authors (folded full names) matching a full or partial, accent-free name."""
        want = tokens(name)
        if not want:
            return []
        return sorted(
            a for a in self.author_tokens.get(want[0], ()) if contains(a.split(), want) >= 0
        )

    def match_tracks(self, text: str) -> list[str]:
        """Tracks whose area or subarea is named by `text`; whole-name matches win."""
        want = tokens(text)
        if not want:
            return []
        exact, partial = [], []
        for track, parts in self.track_parts:
            if any(p == want for p in parts):
                exact.append(track)
            elif any(contains(p, want) >= 0 for p in parts):
                partial.append(track)
        return sorted(exact or partial)

    def author_names(self, ids: Iterable[str], keys: Iterable[str]) -> list[str]:
        """The authors' names as the papers spell them."""
        want = set(keys)
        return sorted({n for pid in ids for n in self.papers[pid].authors if phrase(n) in want})

    def find_authors(self, words: list[str], original: str) -> tuple[list[str], list[str]]:
        """Authors the question names and the words it used for them.

        A run of two or more words of an author's name is that author. A lone surname is
        often also a word ("Good", "Bigger", "Can"), so it is taken for a name only when the
        question marks it as one (capitalised inside a sentence; right after "by") or when
        the papers' own text (almost) never uses it and it stands next to the words that
        frame a question about papers, or opens the question ("Bouniot's papers?"). An
        acronym is not a surname ("AI agents"), nor is a single letter on its own.
        """
        best: tuple[list[str], list[str]] = ([], [])
        for size in (4, 3, 2):
            for i in range(len(words) - size + 1):
                span = words[i : i + size]
                found = [
                    a for a in self.author_tokens.get(span[0], ()) if contains(a.split(), span) >= 0
                ]
                if found and size > len(best[1]):
                    best = (found, span)
            if best[0]:
                return best
        # A full name with one letter of the surname wrong or missing ("Quentin Bouniott"); of
        # three letters or fewer, one edit away is another word ("Wei Ma" -> "Wei may").
        for first, last in itertools.pairwise(words):
            if len(last) > 3 and first not in FILLER:
                known = self.author_tokens.get(first, ())
                close = [a for a in known if one_edit(_after(a, first), last)]
                if close:
                    return sorted(close), [first, last]
        framing = [i for i, w in enumerate(words) if w in QUESTION_WORDS]
        capitalised, opening, acronyms = _capitals(original)
        named: list[str] = []
        used: list[str] = []
        for at, w in enumerate(words):
            if w not in self.surnames or w in FILLER or (w in acronyms and w not in capitalised):
                continue
            if len(w) == 1:  # "an SE(3) model" is no paper by an author surnamed E
                continue
            after_by = at > 0 and words[at - 1] == "by"
            # A question that is nothing but the name ("bouniot") frames itself.
            alone = all(x in FILLER for x in words if x != w)
            framed = any(abs(at - i) <= NAME_REACH for i in framing) or w in opening or alone
            if w in capitalised or after_by or (framed and self.uses(w) <= MAX_NAME_SHARERS):
                given = self._given_name(words, at, capitalised, original)
                if given is None:
                    # Every surname it names: "A et al. and B et al." are two people's papers.
                    named, used = [*named, *self.surnames[w]], [*used, w]
                    continue
                # "Marco Rossi" where only Ryan Rossi wrote here: another person, unknown.
                full = sorted(a for a in self.surnames[w] if given in a.split())
                span = [words[given_at] for given_at in sorted((at, words.index(given)))]
                return full, span
        return sorted(set(named)), used

    def _given_name(
        self, words: list[str], at: int, capitalised: set[str], original: str
    ) -> str | None:
        """A name-like word written right beside the surname at `at` (capitalised inside a
        sentence, no filler, no word of the papers' text; no comma between, as in a list of
        surnames): the person's other name, in either order."""
        surname, written = words[at], fold(original)
        for i in (at - 1, at + 1):
            if 0 <= i < len(words):
                w = words[i]
                pair = [re.escape(x) for x in ((w, surname) if i < at else (surname, w))]
                if (
                    len(w) > 1
                    and w in capitalised
                    and w not in FILLER
                    and w not in self.names
                    and stem(w) not in self.stems()
                    and re.search(rf"\b{pair[0]}\s+{pair[1]}\b", written)
                ):
                    return w
        return None

    def find_tracks(self, words: list[str]) -> tuple[list[str], list[str]]:
        """Tracks the words name, and the words used: the longest name of a track, area or
        subarea they contain, unless that is no whole track's name and a track's area and
        subarea both appear apart ("Social Aspects papers in Safety"): then that track."""
        best: list[str] = []
        whole = False
        for track, parts in self.track_parts:
            for part in parts:
                if len(part) > len(best) and contains(words, part) >= 0:
                    best, whole = part, part == tokens(track)
        if not whole:
            both: list[str] = []
            used: list[str] = []
            for track, _parts in self.track_parts:
                area, _, sub = track.partition(" · ")
                halves = [tokens(area), tokens(sub)]
                if all(h and contains(words, h) >= 0 for h in halves):
                    both.append(track)
                    used += [w for h in halves for w in h if w not in used]
            if both:
                return sorted(both), used
        return (self.match_tracks(" ".join(best)), best) if best else ([], [])

    def find_track_pieces(self, words: list[str]) -> tuple[list[str], list[str]]:
        """Tracks one of whose subarea's listed names the question uses ("the sequential
        models track" for "Sequential Models, Time series"), and the words it used."""
        best: list[str] = []
        found: list[str] = []
        for track, pieces in self.track_pieces:
            for piece in pieces:
                if len(piece) >= len(best) and contains(words, piece) >= 0:
                    found = [track] if len(piece) > len(best) else [*found, track]
                    best = piece
        return sorted(set(found)), best

    def named_papers(self, question: str, quoted: Iterable[str] = ()) -> tuple[list[str], set[str]]:
        """Papers whose coined name or short title head the question uses, or that use a
        phrase it `quoted`; and those of them named by something particular, not by a
        capitalised word that many texts could write ("English", "Mixture-of-Experts")."""
        found: list[str] = []
        firm: set[str] = set()
        for words in quoted:
            said = words.lower()
            ids = [p.id for p in self.papers.values() if said in f"{p.title} {p.abstract}".lower()]
            if len(ids) <= MAX_NAME_SHARERS:
                found += [pid for pid in ids if pid not in found]
                firm.update(ids)
        subject = _SUBJECT.search(question)
        inside = _names_inside(question)
        # A paper named by the words its short name stands for is meant, not the papers that
        # capitalise one of those words.
        spelled = self.spelled_in(question)
        found += [pid for pid in spelled if pid not in found]
        firm.update(spelled)
        covered = {w for words in spelled.values() for w in words}
        for m in re.finditer(r"[\w][\w\-]*[\w]|\w", question):
            raw = m.group()
            key = fold(raw)
            if key in covered:
                continue
            ids = self.names.get(key, [])
            if ids and raw not in self.spellings.get(key, ()) and self.is_ordinary(key):
                ids = []  # "works that use graph kernels" is not about "USE: ..."
            sure = bool(ids)
            if not ids and raw[:1].isupper() and fold(raw) in inside:
                # The papers that write the name, or a version of it ("Qwen": Qwen3-8B); a name
                # none writes may carry an ordinary word ("Llama-family": Llama, CodeLlama-7b).
                ids = sorted(self.capitalised.get(raw, set()) | self.families.get(raw, set()))
                sure = self._particular(raw)
                if not ids and (head := name_head(raw)) != raw:
                    ids = sorted(self.capitalised.get(head, set()) | self.families.get(head, set()))
                    sure = self._particular(head)
            if not ids and subject and raw == subject.group(1):
                # "What is X?": a capitalised name few papers use is what they share, even
                # if no abstract says "we propose" it.
                ids = sorted(self.capitalised.get(raw, ()))
            if len(ids) > MAX_NAME_SHARERS:
                continue
            for pid in ids:
                if pid not in found:
                    found.append(pid)
            if sure:
                firm.update(ids)
        return found, firm

    def _particular(self, written: str) -> bool:
        """Whether a capitalised word names one thing: a model family some coined name
        carries ("Qwen" of Qwen3-8B), or a coined shape with a part that is no word the
        collection writes in lowercase nor a common short form ("ImageNet", not "AI-generated")."""
        if written in self.coined_families:
            return True
        ordinary = self._lowercase_words() | PLAIN_ACRONYMS
        return looks_coined(written) and any(
            fold(part).removesuffix("s") not in ordinary and fold(part) not in ordinary
            for part in written.split("-")
            if part
        )

    def spelled_in(self, question: str) -> dict[str, tuple[str, ...]]:
        """The papers whose own short name the question spells out in full, with the words."""
        said = tokens(question)
        return {
            pid: words
            for words, ids in self.spelled.items()
            if contains(said, list(words)) >= 0
            for pid in ids
        }

    def naming(self, words: Iterable[str], ids: Iterable[str], own: bool = False) -> set[str]:
        """Those of `words` (as written) that name one of the papers `ids`; with `own`, only
        by a paper's own name (a coined name or a title's head), not a word it capitalises."""
        want = set(ids)
        return {
            w
            for w in words
            if want.intersection(self.names.get(fold(w), ()))
            or (not own and want & (self.capitalised.get(w, set()) | self.families.get(w, set())))
        }

    def unknown_name(self, names: Iterable[str]) -> str:
        """A name no title or abstract contains (a substring test: errs towards known). A
        common short form ("VAE", "PhD") names no particular thing, so its absence is no
        sign that nothing indexed is about the question."""
        text = self.text()
        return next((n for n in _particular(names) if not mentions_name(text, n, self.stems())), "")

    def unseen_name(self, names: Iterable[str]) -> str:
        """A name with a word no title or abstract writes in any form, alone or in a compound
        ("Zorblax-KV"; not "PPO-vs-CFR", whose words all occur): nothing indexed is about it."""
        text = self.text()
        said = self.stems()
        return next(
            (
                n
                for n in _particular(names)
                if any(
                    said.isdisjoint({stem(w), stem(w.removesuffix("s"))}) for w in plain_words(n)
                )
                and not mentions_name(text, n)
            ),
            "",
        )

    def about_itself(self, pid: str) -> str:
        """The sentences of a paper's abstract about its own work: those that write one of its
        names or speak as its authors ("we", "this paper"), not those on prior work ("most
        methods fine-tune ..."). All of them where none is."""
        p = self.papers[pid]
        own = {name for name, ids in self.names.items() if pid in ids}
        sentences = split_sentences(p.abstract)
        mine = [
            s
            for s in sentences
            if _SELF.search(s) or not own.isdisjoint(fold(w) for w in WORD.findall(s))
        ]
        return " ".join(mine or sentences)

    def names_written(self, pid: str, kind: str = "") -> list[str]:
        """The names a paper's title and abstract write for things other than itself (a
        model, a benchmark, a language): tokens shaped like coined names, and words
        capitalised inside a sentence that the collection never writes in lowercase. Not
        names: the paper's own names and the words they abbreviate, short forms of words
        the collection writes in lowercase ("LLMs"), quantities ("7B"), links and maths.
        With `kind`, not the names the abstract labels as things of another kind (the
        "benchmarks (MMMB, MMStar)" of a question for an LLM)."""
        p = self.papers[pid]
        text = _MARKUP.sub(" ", f"{p.title}. {p.abstract}").replace("*", "")
        own = {name for name, ids in self.names.items() if pid in ids}
        for m in _DEFINED.finditer(text):
            words, inside = m.group(1).split(), m.group(2)
            if fold(inside) in own:  # "Zero-order Routing Policy (ZRP)"
                own.update(tokens(m.group(1)))
            elif fold(words[-1]) in own:  # "ZRP (Zero-order Routing Policy)"
                own.update(tokens(inside))
            elif " " not in inside and (
                len(words) == 1 or words[-1].islower() or re.fullmatch(r"[A-Z]{2,}s", inside)
            ):
                # A short form of plain words ("chain-of-thought (CoT)"), or a plural one, of
                # a class of things ("Diffusion Language Models (DLMs)").
                own.add(fold(inside))
        out = []
        labels: dict[str, set[int]] = {}  # a name's kinds, wherever the abstract labels it
        # Those of the sentences an unlabelled name is in: the kinds they write that label
        # no name ("results on benchmark datasets ... on HumanML3D").
        nearby: dict[str, set[int]] = {}
        for sentence in split_sentences(text):
            # "X's" is X; "Qwen3-1.7B" one word.
            words = [re.sub(r"['’]s$", "", w) for w in _VERSIONED.findall(sentence)]
            names = []
            for i, w in enumerate(words):
                parts = [x for x in re.split(r"[-‑]", w) if x]
                own_name = any(
                    fold(x) in own or fold(x).removesuffix("s") in own for x in [w, *parts]
                )
                # A kind capitalised in a phrase ("Data Engine") labels it; it names nothing.
                names.append(
                    not own_name
                    and not _is_kind(w)
                    and any(self._is_name(x, i == 0) for x in parts)
                )
            # The kinds it writes that label no name next to them.
            kinds = {
                family
                for j, w in enumerate(words)
                if not names[j]
                and not any(names[max(j - 1, 0) : j + 2])
                and (family := KIND_FAMILY.get(_kind(w))) is not None
            }
            for i, w in enumerate(words):
                if names[i]:
                    # A name that carries a parameter count ("Qwen3-8B") is a model's.
                    label = _MODEL_FAMILY if _SIZED.search(w) else _label(words, names, i)
                    # A plain capitalised word that modifies a lowercase one, unlabelled, is an
                    # eponym ("Bayes risk", "Bayes-optimal"), not a thing's name ("in Klingon").
                    if label is None and not (is_acronym(w) or looks_coined(w)):
                        after = words[i + 1] if i + 1 < len(words) else ""
                        if re.search(r"[-‑][a-z]", w) or (
                            after[:1].islower() and fold(after) not in FILLER
                        ):
                            continue
                    out.append(w)
                    labels.setdefault(w, set()).update(() if label is None else (label,))
                    nearby.setdefault(w, set()).update(kinds if label is None else ())
        if not kind:
            return out
        family = KIND_FAMILY.get(_kind(kind))
        # A label next to the name settles its kind; else its sentence's kinds do, if any.
        kind_of = {w: labels[w] or nearby[w] for w in out}
        return [w for w in out if not kind_of[w] or family in kind_of[w]]

    def _is_name(self, word: str, opening: bool) -> bool:
        """Whether one word (or part of a compound) of an abstract is written as a name."""
        short = word.removesuffix("s")
        if len(word) < 2 or word[0].isdigit() or short.lower() in PLAIN_ACRONYMS:
            return False  # "CoT" as much as "LLMs"
        if is_acronym(word):
            if len(short) <= SHORT_NAME:  # spells out too many runs by chance
                return True
            if short not in self._described:
                self._described[short] = spells_out(self.written(), short)
            return not self._described[short]
        if looks_coined(word):
            return True
        return word[0].isupper() and not opening and fold(word) not in self._lowercase_words()

    def _lowercase_words(self) -> set[str]:
        if self._lowercase is None:
            text = self.written()  # takes the lock itself
            with self._lock:
                self._lowercase = set(re.findall(r"\b[a-z]+\b", text))
        return self._lowercase

    def stems(self) -> set[str]:
        """The stems of every word of the titles and abstracts."""
        if self._stems is None:
            text = self.text()  # takes the lock itself
            with self._lock:
                # Each distinct word stemmed once: at ICML scale a fifth faster than in order.
                self._stems = {stem(w) for w in set(plain_words(text))}
        return self._stems


# Links, TeX maths and markdown emphasis ("**L**LM"), which write no names.
_MARKUP = re.compile(r"https?://\S+|\$[^$]*\$|\\\w+")
# Words and what follows them in parentheses: a short form of them, or their long form.
_SELF = re.compile(r"\b(?:we|our|us)\b|\bthis\s+(?:paper|work|study|article)\b", re.IGNORECASE)
_VERSIONED = re.compile(r"[\w][\w'’\-]*(?:\.\d[\w'’\-]*)*")
_SIZED = re.compile(r"[-‑]\d+(?:\.\d+)?[BMbm]$")
_MODEL_FAMILY = KIND_FAMILY["model"]
_DEFINED = re.compile(r"((?:[\w-]+\s+){1,6})\(([^()]{2,60})\)")


def _shaped(names: Iterable[str], question: str) -> list[str]:
    """The names written as names: plain lowercase words in quotes may be the asker's own,
    set apart or recalled loosely ("a score that is 'quietly wrong'"), no sign that nothing
    indexed is about the question. Nor is a short form the question spells out itself ("a
    topological data analysis person ... TDA tools"): its words are the topic."""
    return [
        n
        for n in names
        if (n != n.lower() or any(c.isdigit() for c in n))
        and not (is_acronym(n) and spells_out(question.lower(), n.removesuffix("s")))
    ]


def _particular(names: Iterable[str]) -> list[str]:
    """`names` but the field's common short forms (rag/words/generic_acronyms.txt)."""
    return [n for n in names if fold(n).removesuffix("s") not in GENERIC_ACRONYMS]


def _after(name: str, token: str) -> str:
    """The word of a folded name after `token` ("" if none)."""
    parts = name.split()
    at = parts.index(token) if token in parts else len(parts)
    return parts[at + 1] if at + 1 < len(parts) else ""


def _names_of(p: Paper) -> Iterable[tuple[str, str]]:
    """(folded, as spelled) for each name the paper coins or its title leads with."""
    for name in p.names:
        yield fold(name), name
    head = p.title.split(":", 1)[0].strip()
    if ":" in p.title and len(head.split()) <= 3:
        yield fold(head), head  # "TVI-CoT: Text-Visual ..." -> "tvi-cot"


def _spelled_out(p: Paper, own: set[str]) -> Iterable[tuple[str, ...]]:
    """The capitalised words, two or more, that the abstract writes just before one of the
    paper's own names in parentheses ("Risk Awareness Injection (RAI)"), folded."""
    text = _MARKUP.sub(" ", p.abstract).replace("*", "")
    for m in _DEFINED.finditer(text):
        if fold(m.group(2)) in own:
            run = list(itertools.takewhile(lambda w: w[:1].isupper(), reversed(m.group(1).split())))
            if len(run) > 1:
                yield tuple(w for r in reversed(run) for w in tokens(r))


def _capitals(original: str) -> tuple[set[str], set[str], set[str]]:
    """The folded words written with a capital inside a sentence, those opening one, and
    the all-capital ones."""
    capitalised: set[str] = set()
    opening: set[str] = set()
    acronyms: set[str] = set()
    for m in WORD.finditer(original):
        w = m.group()
        if len(w) > 1 and w.isupper():
            acronyms.update(tokens(w))
        elif w[:1].isupper():
            opens = not original[: m.start()].strip() or bool(
                _SENTENCE_END.search(original[: m.start()])
            )
            (opening if opens else capitalised).update(tokens(w))
    return capitalised, opening, acronyms


def name_head(word: str) -> str:
    """A name without the ordinary words hyphenated to it: "Llama-family" -> "Llama",
    "GPT-4-based" -> "GPT-4"."""
    return "-".join(p for p in word.split("-") if p[:1].isupper() or p[:1].isdigit()) or word


def _families(name: str) -> set[str]:
    """The names of model families a name carries, when they are not the name itself: the
    letters it opens with, before a version ("Qwen3-1.7B" -> Qwen), and their capitalised
    parts ("CodeLlama-7b" -> CodeLlama, Code, Llama)."""
    head = _LETTERS.match(name)
    if head is None:
        return set()
    return {head.group(), *_HUMP.findall(head.group())} - {name}


_LETTERS = re.compile(r"[A-Za-z]+")
_HUMP = re.compile(r"[A-Z][a-z]{2,}")


def _names_inside(question: str) -> set[str]:
    """The folded words a question writes with a capital inside a sentence, filler aside:
    written as names ("does it beat Llama checkpoints?")."""
    inside, _opening, _acronyms = _capitals(question)
    return inside - FILLER


def counted(question: str) -> tuple[str, ...]:
    """What a "how many" question counts: the words after "how many" (or "number of") up to
    the first filler word, at most three, a noun phrase's length ("how many robot arms did
    ..." -> robot arms), or those before "count" ("the parameter count" -> parameter).
    What is counted is plural, so the first plural word ends the phrase ("how many rollouts
    went into it?" -> rollouts)."""
    m = _HOW_MANY.search(question)
    if not m and (before := _COUNT_OF.search(question)):
        # Counted things are many: "parameter count" counts parameters.
        words = [w for w in tokens(before.group(1)) if w not in FILLER]
        return tuple(w if w.endswith("s") else f"{w}s" for w in words)
    out: list[str] = []
    for w in tokens(m.group(1)) if m else []:
        if w in FILLER or len(out) == 3:
            break
        out.append(w)
        if w.endswith("s") and not w.endswith(("ss", "us", "is")):
            break
    return tuple(out)


def measured(question: str, own_names: Iterable[str] = ()) -> tuple[str, ...]:
    """What a "what <result> does <paper> reach?" question asks the value of, or the metric
    a "how much" question names ("how much does X cut the FID?" -> FID), papers' own names
    (`own_names`) aside: an abstract gives the figure beside what it measures. Other words
    after "how much" say what changes ("cut its cost"), which an abstract words its own way."""
    m = _WHAT_RESULT.search(question) or _WHAT_IS_RESULT.search(question)
    if m:
        return tuple(w for w in WORD.findall(m.group(1)) if fold(w) not in FILLER)
    m = _HOW_MUCH.search(question)
    own = set(own_names)
    # A metric's name is one singular word (FID, F1, BLEU): not a method's hyphenated name,
    # nor a plural short form ("LMs"), nor a function word in capitals ("NOT").
    rest = coined_tokens(question[m.end() :]) if m else []
    return tuple(
        w
        for w in rest
        if fold(w) not in own | FILLER and "-" not in w and not re.search(r"[A-Z]s$", w)
    )


_WHICH = re.compile(
    r"(?:\b(?:which|what)(?:['’]s\s+the|\s+(?:are|were|is|was)\s+the)?|^\W*(?:list|name)"
    r"(?:\s+all)?(?:\s+(?:of\s+)?the)?)\s+(?:names?\s+of\s+(?:the\s+)?)?",
    re.IGNORECASE,
)


def which(question: str) -> str:
    """The kind of thing a "which K" question asks the name of ("which LLM does X use?",
    "what were the three corpora X was run on?", "list the 12 games in X"): a word of
    rag/words/kinds.txt after at most three words that modify it, none of them filler
    (numbers aside) or a name ("what is the X benchmark?" asks what X is)."""
    return _which(question)[0]


def which_number(question: str) -> float | None:
    """How many things a "which K" question asks the names of, where it says ("which five
    games ..." -> 5): the number among the words that modify the kind."""
    return _which(question)[1]


def _which(question: str) -> tuple[str, float | None]:
    for m in _WHICH.finditer(question):
        after = WORD.findall(question[m.end() :])
        if after and fold(after[0]) in ("one", "ones"):
            # "tested on six LLMs - which ones?": the kind named before it.
            kinds = [w for w in WORD.findall(question[: m.start()]) if _is_kind(w)]
            return (kinds[-1] if kinds else ""), None
        names = "name" in m.group().lower()
        number: float | None = None
        for i, w in enumerate(after[:4]):
            f = fold(w)
            # A kind before another modifies it: "which language model backbone" asks for a
            # backbone.
            if _is_kind(w) and i + 1 < min(len(after), 4) and _is_kind(after[i + 1]):
                continue
            # "the names of the two games it plays": things of any kind, asked by name.
            if _is_kind(w) or (names and w.islower() and f.endswith("s") and f not in FILLER):
                return w, number
            number = number_value(f) if number is None else number
            # A name asks what it is ("what is the X benchmark?", "the Data Engine"); a short
            # form the field uses for a plain thing modifies the kind ("which RL algorithm").
            if (f in FILLER and f not in NUMBER_WORDS) or (
                (looks_coined(w) or w[:1].isupper()) and f.removesuffix("s") not in GENERIC_ACRONYMS
            ):
                break
    return "", None


def _label(words: list[str], names: list[bool], i: int) -> int | None:
    """The family of the kind (rag/words/kinds.txt) that labels the name `words[i]`: the
    word right after it ("the MMStar benchmark"), or the one before it or before the list of
    names it is in ("benchmarks MMMB, MMStar and RealWorldQA"); None where none does."""
    after = KIND_FAMILY.get(_kind(words[i + 1])) if i + 1 < len(words) else None
    if after is not None:
        return after
    j = i - 1
    while j >= 0 and (names[j] or words[j].lower() in ("and", "or")):
        j -= 1
    return KIND_FAMILY.get(_kind(words[j])) if j >= 0 else None


def _kind(word: str) -> str:
    """The entry of rag/words/kinds.txt that `word` is, in the singular or plural, or ""."""
    f = re.sub(r"['’]s$", "", fold(word))  # "which model's activations"
    return next((k for k in (f, f.removesuffix("s"), re.sub(r"ies$", "y", f)) if k in KINDS), "")


def _is_kind(word: str) -> bool:
    return bool(_kind(word))


def _unpossessed(text: str) -> list[str]:
    """The words of `text`, "X's" as X."""
    return [re.sub(r"['’]s$", "", w) for w in WORD.findall(text)]


def _without(question: str, names: Iterable[str]) -> str:
    """The question with the names it uses blanked out: their digits are no figures
    ("Qwen3-8B")."""
    for name in sorted(names, key=len, reverse=True):
        # Whole names only: "024-step" read as a name is part of the figure "1,024-step".
        question = re.sub(rf"(?<![\w,.]){re.escape(name)}(?!\w)", " ", question)
    return question


def _cued_track(words: list[str]) -> str:
    """The name in "the X track" ("the Quantum Chemistry track"), or "". Not "keep track
    of"; and "area" or "category" also name a field in plain English."""
    for i, word in enumerate(words):
        if word.removeprefix("sub").removeprefix("-") in ("track", "tracks"):
            before = list(itertools.takewhile(lambda w: w not in FILLER, reversed(words[:i])))
            if before and i > len(before) and words[i - len(before) - 1] == "the":
                return " ".join(reversed(before))
    return ""


def self_description(question: str) -> set[str]:
    """The words by which the asker describes themselves ("I build ...", "my research is
    on ...", "I'm new to ..."): they frame a request, the field comes after them."""
    return {fold(w) for m in _ASKER.finditer(question) for w in m.groups() if w}


# "which papers use ...", "papers that study ...": the verb says what they do with the topic.
_PAPERS_DO = re.compile(
    r"\b(?:(?:which|what)\s+papers?|papers?\s+(?:that|which))\s+(?:(?:in\s+)?here\s+)?([a-z]+)\b"
)


# "in the protein folding paper, ...": one paper, described by its subject in a
# noun phrase (at most six words, as a title's head is).
_DESCRIBED = re.compile(
    r"\bthe\s+((?:(?!(?:the|of|on|about)\b)[\w'’/-]+\s+){1,6}?)(?:paper|work|study|article)\b(?!s)",
    re.IGNORECASE,
)


def described(question: str) -> str:
    """The words by which the question describes the one paper it is about ("the graph
    colouring paper" -> "graph colouring"), or ""."""
    m = _DESCRIBED.search(question)
    words = [w for w in tokens(m.group(1)) if w not in FILLER] if m else []
    # One word ("the theory paper") fits many papers.
    return " ".join(words) if len(words) > 1 else ""


def papers_do(question: str) -> set[str]:
    """The verb right after "papers" ("use", "study", "draw"), which frames a question for
    papers rather than naming their topic; not a filler word ("papers on ...")."""
    return {w for w in _PAPERS_DO.findall(question.lower()) if w not in FILLER}


def asks_of(question: str) -> Asks:
    for kind, pattern in _ASKS:
        if pattern.search(question):
            return kind
    return Asks.TOPIC


def parse(
    question: str,
    vocab: Vocabulary,
    author: str | None = None,
    track: str | None = None,
    within: Iterable[str] | None = None,
) -> Query:
    """The question understood against the collection's vocabulary.

    `author` and `track` are explicit filters (the CLI's --author/--track): then the wording
    is not searched for names. `within` restricts a follow-up to earlier papers.
    """
    words = tokens(question)
    asks = asks_of(question)
    detail = _FULL_TEXT.search(question)
    # A phrase in quotes is a name too: the papers that use it are what the question is about.
    quoted = [m.group(1).strip() for m in _QUOTED.finditer(question)]
    titled = [t for t in _TITLED.findall(question) if not set(tokens(t)) <= FILLER]
    # A function word in capitals ("NOT") is emphasis, not a name.
    coined = [t for t in coined_tokens(question) if fold(t) not in FILLER]
    names = tuple(dict.fromkeys([*coined, *quoted, *titled]))
    framing = self_description(question) | papers_do(question)
    topical = [w for w in words if w not in FILLER and w not in framing]
    inside = _names_inside(question)
    proper = tuple(
        dict.fromkeys(
            name_head(w)
            for w in WORD.findall(question)
            if w[:1].isupper() and fold(w) in inside and w not in names
        )
    )
    q = Query(
        text=question,
        proper=proper,
        words=tuple(words),
        topical=tuple(topical),
        asks=asks,
        wants_all=asks is Asks.PAPERS,
        # A request for reading advice describes a field; it does not require each word of it.
        spells_topics=asks is not Asks.RECOMMEND
        and bool(re.search(r"\bpapers?\b", question, re.I)),
        # Reading advice may span a field's topics, and a comparison sets one against another.
        joins_topics=asks not in (Asks.RECOMMEND, Asks.COMPARE),
        names=names,
        topic_text=_AND.sub(" or ", question) if asks is Asks.RECOMMEND else question,
        # A "why" question asks for an explanation, which abstracts give; a detail it names
        # is its subject, not what it asks for.
        full_text_detail="" if _WHY.match(question) or not detail else detail.group(0),
        counted=counted(question),
        measured=measured(question, vocab.names),
        which=which(question),
        which_number=which_number(question),
        figure=bool(_HOW_MUCH.search(question)),
        figures=tuple(stated_figures(_without(question, names))),
        within=frozenset(within) if within is not None else None,
    )
    if author or track:
        authors = vocab.match_authors(author) if author else []
        tracks = vocab.match_tracks(track) if track else []
        return replace(
            q,
            authors=tuple(authors),
            tracks=tuple(tracks),
            unknown_author=author if author and not authors else "",
            unknown_track=track if track and not tracks else "",
            explicit=True,
            unknown_name=vocab.unknown_name(_shaped(names, question)),
            unseen_name=vocab.unseen_name(_shaped(names, question)),
        )
    named, firm = vocab.named_papers(question, quoted)
    spelled = vocab.spelled_in(question)  # papers named by the words their short names stand for
    authors, used = vocab.find_authors(words, question)
    nobody = used if not authors else []  # a full name of whom only the surname wrote here
    track_hit, track_used = vocab.find_tracks(words)
    # "my area is ..." describes the asker, not a track.
    cued = any(_track_cue(w) for w in words if w not in framing)
    if not track_hit and cued:
        # One of the names a subarea lists is a track's name only where a track is meant.
        track_hit, track_used = vocab.find_track_pieces(words)
    rest = [w for w in topical if w not in track_used and not _track_cue(w)]
    # A track's whole name ("Deep Learning · Theory") can only mean the track.
    whole = any(track_used == tokens(t) for t in track_hit if " · " in t)
    takes_track = bool(track_hit) and (whole or cued or POSITION_TRACK in track_hit or not rest)
    if authors and takes_track and len(track_used) > len(used):
        authors = []  # "Deep Learning · Theory" is a track, not papers by Mr Deep
    tracks = []
    unknown_author = ""
    if authors:
        topical = [w for w in topical if w not in used]
    else:
        about = _ABOUT_AUTHOR.search(question.strip())
        name = ((about.group("name") or about.group("name2") or "") if about else "").strip()
        if nobody:
            unknown_author = " ".join(w.capitalize() for w in nobody)
        elif name and not vocab.match_tracks(name):
            unknown_author = name
        elif takes_track:
            tracks, topical = track_hit, rest
    # "the Quantum Chemistry track": a track asked for by a name no track has.
    unknown_track = "" if tracks or authors else _cued_track(words)
    if unknown_track and vocab.match_tracks(unknown_track):
        unknown_track = ""
    # A track or an author written in quotes or with capitals is that filter, not a name.
    meta = set(used if authors else ()) | set(track_used if tracks else ())
    names = tuple(n for n in q.names if not set(tokens(n)) <= meta)
    return replace(
        q,
        topical=tuple(topical),
        authors=tuple(authors),
        tracks=tuple(tracks),
        unknown_author=unknown_author,
        unknown_track=unknown_track,
        named=tuple(named),
        own_named=tuple(
            p for p in named if vocab.naming(_unpossessed(question), [p], own=True) or p in spelled
        ),
        surely_named=tuple(p for p in named if p in firm),
        described=described(question),
        names=names,
        proper=tuple(w for w in q.proper if not set(tokens(w)) <= meta),
        # Checked once the names that are its filters are set aside: each is a scan of the
        # collection's text.
        unknown_name=vocab.unknown_name(_shaped(names, question)),
        unseen_name=vocab.unseen_name(_shaped(names, question)),
    )
