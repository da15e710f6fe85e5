"""Reading a question once: `parse(question, vocabulary) -> Query`.

Only what is exact is read here, by rules: the authors and tracks a question names (resolved
against the indexed papers' metadata), the papers it names (a name the paper coins, its
title's head, a phrase in quotes), and whether it follows up on an earlier answer. What it
asks for comes from the fitted intent classifier (rag.intent); which papers answer it, and
whether any does, from the fitted relevance model (rag.relevance).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from rag import intent
from rag.corpus import Paper
from rag.intent import Asks
from rag.text import STOPWORDS, WORD, contains, fold, one_edit, phrase, tokens

__all__ = ["Asks", "FollowUp", "Query", "Vocabulary", "follow_up", "parse"]

# A name at most this many papers share identifies them ("LLM-X", coined by dozens, does
# not), and a word the collection uses at most this many times is rare enough to be a name.
MAX_NAME_SHARERS = 3
# ICML's position papers are a track of their own, but listings file them under their
# subject area; their titles ("Position: ...") or abstracts say what they are.
POSITION_TRACK = "Position papers"
_POSITION = re.compile(r"^\s*position\s*:|\bposition papers?\b", re.IGNORECASE)
# Words that put a surname in the role of an author when they stand within two words of it
# ("which papers list bouniot as an author"): a lowercase surname is otherwise a word.
_AUTHOR_CUES = frozenset(
    {"author", "authors", "authored", "et", "paper", "papers", "wrote", "surname", "surnames"}
)
# Words that ask for papers and nothing else ("theory papers", "show all the safety work").
_LISTING = frozenset({"paper", "papers", "work", "works", "list", "show", "all", "every"})
_TRACK_CUES = frozenset(
    {
        "track",
        "tracks",
        "area",
        "areas",
        "category",
        "filed",
        "submitted",
        "subarea",
        "sub-track",
        "belong",
        "belongs",
    }
)
_SENTENCE_END = re.compile(r"[.?!:;]\s*$")
# A phrase the question puts in quotes ("what is 'token dropping' here?"); past 80
# characters a quote is a passage, not a name.
_QUOTED = re.compile(r"(?<!\w)['‘\"“]([^'‘’\"“”]{3,80})['’\"”](?!\w)")
# Between the names a subarea lists: "Accountability, Transparency, and Interpretability".
_LISTED = re.compile(r",\s*(?:and\s+)?")
# "papers by X", "what has X worked on": a question about an author, whoever X is.
_ABOUT_AUTHOR = re.compile(
    r"^(?:(?:list|show|find|give me)\s+)?(?:all\s+)?(?:the\s+)?(?:papers?|work|articles?)\s+"
    r"(?:written\s+|authored\s+|co-?authored\s+)?by\s+(?P<name>[\w .'\-]+?)\s*\??$"
    r"|^what\s+(?:has|have|did)\s+(?P<name2>[\w .'\-]+?)\s+(?:worked|work|published|written)"
    r"\b",
    re.IGNORECASE,
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
    """A question, read."""

    text: str
    words: tuple[str, ...]  # folded words
    asks: Asks = Asks.EXPLAIN
    authors: tuple[str, ...] = ()  # folded full names of matching authors
    tracks: tuple[str, ...] = ()
    unknown_author: str = ""  # asked about as an author, listed on no paper
    unknown_track: str = ""  # a track asked for that no track is called
    explicit: bool = False  # authors/tracks came from filters, not from the wording
    named: tuple[str, ...] = ()  # ids of the papers whose names or quoted phrases it uses
    meta_words: tuple[str, ...] = ()  # the words that named its authors or tracks
    within: frozenset[str] | None = None  # a follow-up: only these papers

    @property
    def wants_all(self) -> bool:
        """A question for every paper that fits, not a top few."""
        return self.asks is Asks.PAPERS


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
        words = rest.split()
        if words and words[0].lower() in ("which", "what"):
            words = words[1:]
        rest = " ".join(words).strip(" ?") or question
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
    spellings: dict[str, set[str]] = field(default_factory=dict)  # name -> as papers write it
    _text: str | None = None  # every title and abstract, folded, joined on first use
    _counts: dict[str, int] = field(default_factory=dict)  # whole-word uses
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

    def uses(self, word: str) -> int:
        """How often titles and abstracts use `word` (folded) as a whole word."""
        if word not in self._counts:
            if self._text is None:
                with self._lock:
                    self._text = " ".join(
                        fold(f"{p.title} {p.abstract}") for p in self.papers.values()
                    )
            pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
            self._counts[word] = sum(1 for _ in pattern.finditer(self._text))
        return self._counts[word]

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
        often also a word ("Good", "Bigger", "Can"), so it is taken for a name only where the
        question marks it as one (capitalised inside a sentence; right after "by"; "X's"), or
        where the papers' own text never uses it as a word and it stands near a word that
        makes it an author ("papers", "et al."), or is all the question says. An acronym is
        not a surname ("AI agents"), nor is a single letter on its own.
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
            if len(last) > 3 and first not in STOPWORDS:
                known = self.author_tokens.get(first, ())
                close = [a for a in known if one_edit(_after(a, first), last)]
                if close:
                    return sorted(close), [first, last]
        capitalised, acronyms = _capitals(original)
        named: list[str] = []
        used: list[str] = []
        for at, w in enumerate(words):
            if w not in self.surnames or (w in acronyms and w not in capitalised):
                continue
            if len(w) == 1:  # "an SE(3) model" is no paper by an author surnamed E
                continue
            after_by = at > 0 and words[at - 1] == "by"
            near = words[max(at - 2, 0) : at] + words[at + 1 : at + 3]
            cued = (
                bool(_AUTHOR_CUES.intersection(near))
                or f"{w}'s" in fold(original).replace("’", "'")
                or all(x in STOPWORDS for x in words if x != w)
            )
            if w in STOPWORDS and not (w in capitalised and (after_by or cued)):
                continue  # a function word is a surname only written as one: "He et al."
            if w in capitalised or after_by or (cued and self.uses(w) == 0):
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
        sentence, no function word, a word the papers never use; no comma between, as in a
        list of surnames): the person's other name, in either order."""
        surname, written = words[at], fold(original)
        for i in (at - 1, at + 1):
            if 0 <= i < len(words):
                w = words[i]
                pair = f"{w} {surname}" if i < at else f"{surname} {w}"
                if (
                    len(w) > 1
                    and w in capitalised
                    and w not in STOPWORDS
                    and w not in self.names
                    and self.uses(w) == 0
                    and pair in written
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

    def named_papers(self, question: str) -> list[str]:
        """Papers whose coined name or short title head the question uses, and papers that
        write a phrase it puts in quotes; a name or phrase that many papers share names none."""
        found: list[str] = []
        for m in _QUOTED.finditer(question):
            said = m.group(1).strip().lower()
            ids = [p.id for p in self.papers.values() if said in f"{p.title} {p.abstract}".lower()]
            if len(ids) <= MAX_NAME_SHARERS:
                found += [pid for pid in ids if pid not in found]
        for m in WORD.finditer(question):
            raw = m.group().strip("'’-")
            if raw.endswith(("'s", "’s")):  # "FS-DFM's sampling" names FS-DFM
                raw = raw[:-2]
            key = fold(raw)
            ids = self.names.get(key, [])
            # A name that is an ordinary word ("Guidance: ...", a model coined as "MODEL")
            # names its paper only as the paper spells it.
            if ids and raw not in self.spellings.get(key, ()) and self.uses(key) > MAX_NAME_SHARERS:
                continue
            if len(ids) <= MAX_NAME_SHARERS:
                found += [pid for pid in ids if pid not in found]
        return found


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


def _capitals(original: str) -> tuple[set[str], set[str]]:
    """The folded words written with a capital inside a sentence, and the all-capital ones."""
    capitalised: set[str] = set()
    acronyms: set[str] = set()
    for m in WORD.finditer(original):
        w = m.group()
        if len(w) > 1 and w.isupper():
            acronyms.update(tokens(w))
        elif w[:1].isupper():
            before = original[: m.start()]
            if before.strip() and not _SENTENCE_END.search(before):
                capitalised.update(tokens(w))
    return capitalised, acronyms


def _cued_track(words: list[str]) -> str:
    """The name in "the X track" ("the Quantum Chemistry track"), or "". Not "keep track
    of"; and "area" or "category" also name a field in plain English."""
    for i, word in enumerate(words):
        if word in ("track", "tracks", "sub-track"):
            before = list(itertools.takewhile(lambda w: w not in STOPWORDS, reversed(words[:i])))
            if before and i > len(before) and words[i - len(before) - 1] == "the":
                return " ".join(reversed(before))
    return ""


def parse(
    question: str,
    vocab: Vocabulary,
    author: str | None = None,
    track: str | None = None,
    within: Iterable[str] | None = None,
) -> Query:
    """The question read against the collection's vocabulary.

    `author` and `track` are explicit filters (the CLI's --author/--track): then the wording
    is not searched for names. `within` restricts a follow-up to earlier papers.
    """
    words = tokens(question)
    q = Query(
        text=question,
        words=tuple(words),
        asks=intent.model().predict(question),
        within=frozenset(within) if within is not None else None,
    )
    if author or track:
        matched = vocab.match_authors(author) if author else []
        filtered = vocab.match_tracks(track) if track else []
        return replace(
            q,
            explicit=True,
            authors=tuple(matched),
            tracks=tuple(filtered),
            unknown_author=author if author and not matched else "",
            unknown_track=track if track and not filtered else "",
        )
    authors, used = vocab.find_authors(words, question)
    nobody = used if not authors else []  # a full name of whom only the surname wrote here
    track_hit, track_used = vocab.find_tracks(words)
    # "my area is ..." describes the asker, not a track.
    cued = any(
        w in _TRACK_CUES and (i == 0 or words[i - 1] not in ("my", "our"))
        for i, w in enumerate(words)
    )
    if not track_hit and cued:
        # One of the names a subarea lists is a track's name only where a track is meant.
        track_hit, track_used = vocab.find_track_pieces(words)
    # A track's whole name ("Deep Learning · Theory") can only mean the track; a part of one
    # ("theory") is a track where the question says so or asks for nothing but papers.
    rest = [w for w in words if w not in track_used and w not in STOPWORDS | _LISTING]
    whole = any(track_used == tokens(t) for t in track_hit if " · " in t)
    takes_track = bool(track_hit) and (whole or cued or POSITION_TRACK in track_hit or not rest)
    if authors and takes_track and len(track_used) > len(used):
        authors = []  # "Deep Learning · Theory" is a track, not papers by Mr Deep
    tracks: list[str] = []
    unknown_author = ""
    if not authors:
        about = _ABOUT_AUTHOR.search(question.strip())
        name = ((about.group("name") or about.group("name2") or "") if about else "").strip()
        if nobody:
            unknown_author = " ".join(w.capitalize() for w in nobody)
        elif name and not vocab.match_tracks(name):
            unknown_author = name
        elif takes_track:
            tracks = track_hit
    # "the Quantum Chemistry track": a track asked for by a name no track has.
    unknown_track = "" if tracks or authors else _cued_track(words)
    if unknown_track and vocab.match_tracks(unknown_track):
        unknown_track = ""
    # The words that named the metadata, cues included ("the X subarea", "X as an author"),
    # are not what the question is about.
    meta = [*(used if authors else ()), *(track_used if tracks else ())]
    meta += [w for w in words if (authors and w in _AUTHOR_CUES) or (tracks and w in _TRACK_CUES)]
    return replace(
        q,
        authors=tuple(authors),
        tracks=tuple(tracks),
        unknown_author=unknown_author,
        unknown_track=unknown_track,
        named=tuple(vocab.named_papers(question)),
        meta_words=tuple(meta),
    )
