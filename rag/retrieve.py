"""Finds the papers a question is about: hybrid search, metadata questions, abstention.

- Topical questions: dense (Chroma) and BM25 legs, each a LlamaIndex retriever, fused by
  reciprocal rank fusion over *papers*; a method name the question mentions ("What is
  SOTAlign?") puts the paper that coins it first.
- Author and track questions ("papers by Bouniot", "the safety track") are answered from the
  metadata of every indexed paper: the complete list, not a top-k sample.
- When nothing indexed is about the question, the result is empty and says so. No LLM is
  called anywhere here.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from rag.corpus import Paper
from rag.index import Hit, PaperIndex, Snapshot
from rag.text import (
    GENERIC_WORDS,
    QUESTION_WORDS,
    STOPWORDS,
    coined_tokens,
    contains,
    fold,
    phrase,
    split_sentences,
    stems,
    tokens,
)
from rag.topics import Topics

# BM25 at half weight: measured on evals/questions.jsonl, it keeps method and numeric
# questions while paraphrases, which share no rare word with their paper, recover at scale
# (ICML: paraphrase recall@5 0.28 -> 0.41; seed: 0.91 -> 0.93).
LEG_WEIGHTS = {"dense": 1.0, "bm25": 0.5}
# A question that names a known topic wants papers that say those words, so BM25 weighs as
# much as dense in their order (ICML multi 0.760 ->
# 0.782; 2.0 gains nothing more). The abstention tests still read the LEG_WEIGHTS order:
# BM25 lifts papers that use the words in passing, which the topic check must not see.
TOPIC_BM25_WEIGHT = 1.0
RRF_K = 20.0
Ranked = tuple[str, float, str]  # (paper id, score, best passage)
MAX_NAME_SHARERS = 3
# Relevance of a topical question to the collection, from the dense and BM25 legs:
#   best cosine + GAP_WEIGHT * (best cosine - mean of the next five) + BM25_WEIGHT * min(best
#   BM25 score, BM25_CAP).
# Below ABSTAIN_BELOW the result is empty and flagged. The weights and threshold were
# calibrated with `python -m evals.retrieval --scale seed` on the questions of
# evals/questions.jsonl that the collection cannot answer, holding wrongly abstained
# answerable questions to at most 5% (see evals/README.md for what that buys).
GAP_WEIGHT = 2.0
BM25_WEIGHT = 0.06
BM25_CAP = 12.0
ABSTAIN_BELOW = 0.72
# Above it, a question about a known topic that none of this many closest papers mentions is
# abstained on too (rag.topics).
TOPIC_CHECK_PAPERS = 3
# Of this many best fused papers, those that mention the topic a question names go first.
TOPIC_FIRST_DEPTH = 20

_WORD = re.compile(r"[\w][\w'’\-]*", re.UNICODE)
_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*[\w]")
_WHAT_IS = re.compile(
    r"\b(?i:what|how)\s+(?i:is|are|does|do|did|was)\s+(?i:the\s+|an?\s+)?([A-Z][\w\-]*[\w])"
)
# Words that say nothing about a question's topic; a follow-up's filter also drops the
# words every abstract uses, since it needs words that tell papers apart.
_STOP = STOPWORDS | QUESTION_WORDS
_GENERIC = GENERIC_WORDS
# "by" is no cue on its own ("by how much", "word by word"); a name right after it is.
_AUTHOR_CUES = re.compile(
    r"(?:authors?|authored|co-?authors?|co-?authored|wrote|written|publish(?:ed)?|"
    r"worked|surname)"
)
CUE_REACH = 3  # words between an author cue and the surname it is about
_SENTENCE_END = re.compile(r"[.?!:;]\s*$")
_ASKS_FOR_PAPERS = re.compile(r"\bpapers?\b", re.IGNORECASE)
# ICML's position papers are a track of their own, but listings file them under their
# subject area; their titles ("Position: ...") or abstracts say what they are.
POSITION_TRACK = "Position papers"
_POSITION = re.compile(r"^\s*position\s*:|\bposition papers?\b", re.IGNORECASE)


def is_position_paper(p: Paper) -> bool:
    return bool(_POSITION.search(p.title) or _POSITION.search(p.abstract))


_TRACK_CUES = re.compile(r"\b(?:track|tracks|area|subarea|category|filed|submitted under)\b")
_UNKNOWN_AUTHOR = re.compile(
    r"^(?:(?:list|show|find|give me)\s+)?(?:all\s+)?(?:the\s+)?(?:papers?|work|articles?)\s+"
    r"(?:written\s+|authored\s+|co-?authored\s+)?by\s+(?P<name>[\w .'\-]+?)\s*\??$"
    r"|^what\s+(?:has|have|did)\s+(?P<name2>[\w .'\-]+?)\s+(?:worked|work|published|written)"
    r"\b",
    re.IGNORECASE,
)


@dataclass
class Retrieval:
    """What a question retrieved, and how."""

    query: str
    hits: list[Hit]
    abstained: bool = False
    reason: str = ""
    mode: str = "hybrid"  # hybrid | dense | bm25 | author | track
    authors: list[str] = field(default_factory=list)
    tracks: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    signals: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "abstained": self.abstained,
            "reason": self.reason,
            "authors": self.authors,
            "tracks": self.tracks,
            "timings": self.timings,
            "signals": self.signals,
            "results": [hit_dict(h) for h in self.hits],
        }


def hit_dict(h: Hit) -> dict[str, Any]:
    p = h.paper
    return {
        "id": p.id,
        "display_name": p.display_name,
        "title": p.title,
        "authors": list(p.authors),
        "track": p.track,
        "score": round(h.score, 4),
        "passage": h.passage,
        "matched": list(h.matched),
    }


@dataclass
class _Tables:
    """What retrieval reads of one version of the store, built from one PaperIndex snapshot.

    The lazily filled caches at the end belong to the version too.
    """

    version: str = ""
    content: dict[str, str] = field(default_factory=dict)  # paper id -> content hash
    papers: dict[str, Paper] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    authors: dict[str, list[str]] = field(default_factory=dict)  # folded full name -> ids
    surnames: dict[str, set[str]] = field(default_factory=dict)  # last token -> full names
    author_tokens: dict[str, set[str]] = field(default_factory=dict)  # any token -> names
    track_parts: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    names: dict[str, list[str]] = field(default_factory=dict)  # coined name / short title
    tracks: dict[str, list[str]] = field(default_factory=dict)  # track -> paper ids
    capitalised: dict[str, set[str]] = field(default_factory=dict)  # "IPVRM" -> paper ids
    bm25: Any = None
    all_text: str | None = None  # every title and abstract, lower-cased
    # "guidance" -> {"Guidance"} (of "Guidance: ..."), "model" -> {"MODEL"} (coined)
    spellings: dict[str, set[str]] = field(default_factory=dict)
    ordinary: dict[str, bool] = field(default_factory=dict)
    word_counts: dict[str, int] = field(default_factory=dict)


T = TypeVar("T")


class _Versioned(Generic[T]):
    """A Retriever attribute read from the tables the current question answers from."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = name.lstrip("_")

    def __get__(self, obj: Any, objtype: type | None = None) -> T:
        return cast(T, getattr(obj._tables_now(), self.field))

    def __set__(self, obj: Any, value: T) -> None:
        setattr(obj._tables_now(), self.field, value)


class Retriever:
    """Retrieval over one PaperIndex; loads its tables once and is safe to share.

    Each question first asks the store's version (one small request) and, when an ingest
    here or on another machine moved it, reads the new tables before it answers. A question
    reads one version's tables from start to end, even if another thread swaps them
    meanwhile; dense hits whose chunk is of other content than those tables are dropped,
    so vectors of one version never come with the text of another.
    """

    papers = _Versioned[dict[str, Paper]]()
    _aliases = _Versioned[dict[str, str]]()
    _authors = _Versioned[dict[str, list[str]]]()
    _surnames = _Versioned[dict[str, set[str]]]()
    _author_tokens = _Versioned[dict[str, set[str]]]()
    _track_parts = _Versioned[list[tuple[str, list[list[str]]]]]()
    _names = _Versioned[dict[str, list[str]]]()
    _tracks = _Versioned[dict[str, list[str]]]()
    _capitalised = _Versioned[dict[str, set[str]]]()
    _bm25 = _Versioned[Any]()
    _all_text = _Versioned[str | None]()
    _spellings = _Versioned[dict[str, set[str]]]()
    _ordinary = _Versioned[dict[str, bool]]()
    _word_counts = _Versioned[dict[str, int]]()
    _content = _Versioned[dict[str, str]]()

    def __init__(self, index: PaperIndex) -> None:
        self.index = index
        self._lock = threading.Lock()  # the lazily filled caches
        self._loading = threading.Lock()  # one thread reads a new version; others wait
        self._tables: _Tables | None = None
        self._pinned = threading.local()
        self._vector_index: Any = None
        self._vector_collection: Any = None  # the collection handle _vector_index reads
        self._vector_model: Any = None
        self._topics: Topics | None = None

    @property
    def topics(self) -> Topics:
        """The topic background (rag.topics), embedded on first use or read from its cache."""
        if self._topics is None:
            self._topics = Topics.load(
                lambda texts: self.index.query_model.get_text_embedding_batch(texts),
                self.index.topics_dir,
                self.index.model_key,
            )
        return self._topics

    # ------------------------------------------------------------------ loading

    def _tables_now(self) -> _Tables:
        pinned: _Tables | None = getattr(self._pinned, "tables", None)
        if pinned is not None:
            return pinned
        if self._tables is None:
            self.refresh()
        assert self._tables is not None
        return self._tables

    @contextmanager
    def _answering(self) -> Iterator[None]:
        """This thread reads the current tables until the block ends, whatever happens."""
        before = getattr(self._pinned, "tables", None)
        self._pinned.tables = self._tables_now()
        try:
            yield
        finally:
            self._pinned.tables = before

    @property
    def version(self) -> str:
        """The store version the loaded tables are of."""
        return self._tables_now().version

    @property
    def loaded(self) -> bool:
        """Whether tables of some version are loaded (possibly older than the store's)."""
        return self._tables is not None

    def load(self) -> None:
        """Read the tables if none are loaded (without asking whether the store moved)."""
        self._tables_now()

    def refresh(self, background: bool = False, wait: bool = False) -> bool:
        """Bring the tables in step with the store; returns whether they were read again.

        While another thread reads a new version (the page's `background` check, or another
        question), questions answer from the tables they have instead of waiting for it;
        with `wait` (after this process's own ingest) they wait for the new ones.
        """
        version = self.index.store_version(background)
        if self._tables is not None and self._tables.version == version:
            return False
        if not self._loading.acquire(blocking=wait or self._tables is None):
            return False
        try:
            version = self.index.store_version(background)  # it may have moved while waiting
            if self._tables is not None and self._tables.version == version:
                return False  # another thread read it meanwhile
            self._tables = self._build(self.index.snapshot(version))
        finally:
            self._loading.release()
        return True

    def _build(self, snapshot: Snapshot) -> _Tables:
        t = _Tables(version=snapshot.version, content=snapshot.content, bm25=snapshot.bm25)
        for p in snapshot.papers:
            t.papers[p.id] = p
            for alias in p.aliases:
                t.aliases[alias] = p.id
            for name in p.authors:
                key = phrase(name)
                t.authors.setdefault(key, []).append(p.id)
                if key:
                    t.surnames.setdefault(key.split()[-1], set()).add(key)
                    for tok in key.split():
                        t.author_tokens.setdefault(tok, set()).add(key)
            t.tracks.setdefault(p.track, []).append(p.id)
            if is_position_paper(p):
                t.tracks.setdefault(POSITION_TRACK, []).append(p.id)
            for name, spelled in self._names_of(p):
                ids = t.names.setdefault(name, [])
                if p.id not in ids:
                    ids.append(p.id)
                t.spellings.setdefault(name, set()).add(spelled)
            for tok in set(_CAPITALISED.findall(f"{p.title} {p.abstract}")):
                t.capitalised.setdefault(tok, set()).add(p.id)
        for track in t.tracks:
            if track:
                area, _, sub = track.partition(" · ")
                parts = [p for p in (tokens(track), tokens(area), tokens(sub)) if p]
                t.track_parts.append((track, parts))
        return t

    @staticmethod
    def _names_of(p: Paper) -> Iterable[tuple[str, str]]:
        """(folded, as spelled) for each name the paper coins or its title leads with."""
        for name in p.names:
            yield fold(name), name
        head = p.title.split(":", 1)[0].strip()
        if ":" in p.title and len(head.split()) <= 3:
            yield fold(head), head  # "TVI-CoT: Text-Visual ..." -> "tvi-cot"

    @property
    def vector_index(self) -> Any:
        # A new handle means the index reconnected (after a lost Chroma server); a new model
        # means the torch one finished loading behind a long-running page (faster when warm).
        model = self.index.query_model
        if (
            self._vector_index is None
            or self._vector_collection is not self.index.collection
            or self._vector_model is not model
        ):
            from llama_index.core import VectorStoreIndex
            from llama_index.vector_stores.chroma import ChromaVectorStore

            self._vector_collection = self.index.collection
            self._vector_model = model
            store = ChromaVectorStore(chroma_collection=self._vector_collection)
            self._vector_index = VectorStoreIndex.from_vector_store(store, embed_model=model)
        return self._vector_index

    def resolve(self, paper_id: str) -> str:
        """The current id of a paper known by an older or other id."""
        self.load()
        return paper_id if paper_id in self.papers else self._aliases.get(paper_id, paper_id)

    @property
    def tracks(self) -> list[str]:
        self.load()
        return sorted(t for t in self._tracks if t)

    # ------------------------------------------------------------------ metadata

    def match_authors(self, name: str) -> list[str]:
        """Authors (folded full names) matching a full or partial, accent-free name."""
        self.load()
        want = tokens(name)
        if not want:
            return []
        return sorted(
            a for a in self._author_tokens.get(want[0], ()) if contains(a.split(), want) >= 0
        )

    def match_tracks(self, text: str) -> list[str]:
        """Tracks whose area or subarea is named by `text`; whole-name matches win."""
        self.load()
        want = tokens(text)
        if not want:
            return []
        exact, partial = [], []
        for track, parts in self._track_parts:
            if any(p == want for p in parts):
                exact.append(track)
            elif any(contains(p, want) >= 0 for p in parts):
                partial.append(track)
        return sorted(exact or partial)

    def _find_author_in(self, words: list[str], original: str) -> tuple[list[str], list[str]]:
        """Author names in the query and the query words they used."""
        best: tuple[list[str], list[str]] = ([], [])
        for size in (4, 3, 2):
            for i in range(len(words) - size + 1):
                span = words[i : i + size]
                found = [
                    a
                    for a in self._author_tokens.get(span[0], ())
                    if contains(a.split(), span) >= 0
                ]
                if found and size > len(best[1]):
                    best = (found, span)
            if best[0]:
                return best
        # A lone surname is also often an English word ("Good", "Bigger", "Can", "E"), so a
        # word is taken for one only on a sign that it is a name here: capitalised inside a
        # sentence ("Has Locatello got ..."; an acronym such as "AI agents" is not the
        # surname Ai), right after "by" ("papers by akata", not "word by word"), or a
        # word the papers' own text (almost) never uses, near an author cue ("which papers
        # list bouniot as an author", not "a good proxy ... according to professional
        # authors") or opening the question ("Bouniot's papers?").
        cues = [i for i, w in enumerate(words) if _AUTHOR_CUES.fullmatch(w)]
        cues += [i + 1 for i, w in enumerate(words[:-1]) if w == "papers" and words[i + 1] == "of"]
        capitalised: set[str] = set()
        opening: set[str] = set()
        acronyms: set[str] = set()
        for m in _WORD.finditer(original):
            w = m.group()
            if len(w) > 1 and w.isupper():
                acronyms.update(tokens(w))
                continue
            if not w[:1].isupper():
                continue
            starts = not original[: m.start()].strip() or bool(
                _SENTENCE_END.search(original[: m.start()])
            )
            (opening if starts else capitalised).update(tokens(w))
        for at, w in enumerate(words):
            if w not in self._surnames or w in _STOP or (w in acronyms and w not in capitalised):
                continue
            after_by = at > 0 and words[at - 1] == "by"
            cued = any(abs(at - i) <= CUE_REACH for i in cues)
            rare = (cued or w in opening) and self._is_rare_word(w)
            if w in capitalised or after_by or rare:
                return sorted(self._surnames[w]), [w]
        return [], []

    def _find_track_in(self, words: list[str]) -> tuple[list[str], list[str]]:
        best: tuple[list[str], list[str]] = ([], [])
        for _, parts in self._track_parts:
            for part in parts:
                if len(part) > len(best[1]) and contains(words, part) >= 0:
                    best = ([], part)
        if not best[1]:
            return [], []
        return self.match_tracks(" ".join(best[1])), best[1]

    # ------------------------------------------------------------------ search

    def retrieve(
        self,
        query: str,
        k: int = 5,
        author: str | None = None,
        track: str | None = None,
        mode: str = "hybrid",
        within: set[str] | None = None,
    ) -> Retrieval:
        """Papers for a question. `author`/`track` restrict to matching papers (explicit
        filters), `within` to given paper ids (a follow-up about earlier results); `mode` is
        hybrid, dense or bm25 (the last two are the baselines)."""
        started = time.perf_counter()
        self.refresh()
        with self._answering():
            return self._retrieve_in(query, k, author, track, mode, within, started)

    def _retrieve_in(
        self,
        query: str,
        k: int,
        author: str | None,
        track: str | None,
        mode: str,
        within: set[str] | None,
        started: float,
    ) -> Retrieval:
        if within is not None:
            within = {self.resolve(pid) for pid in within} & set(self.papers)
            if not within:
                return Retrieval(query, [], True, "none of the earlier papers is indexed")
            words = [w for w in tokens(query) if w not in _STOP]
            if not words:
                return Retrieval(query, self._listing(within), False, "", "filtered")
            found = self._topical(query, len(within), within, "hybrid", [], [])
            # Every earlier paper ranks somewhere; only those whose text has the follow-up's
            # topical words (or that it names) answer "which of those ...".
            terms = [w for w in words if w not in _GENERIC and len(w) > 3]
            found.hits = [
                h
                for h in found.hits
                if "name" in h.matched or (terms and _mentions(h.paper, terms))
            ][:k]
            if not found.hits:
                return Retrieval(
                    query, [], True, f"none of the earlier papers mention {query!r}", "filtered"
                )
            found.mode = "filtered"
            return found
        result = self._retrieve(query, k, author, track, mode)
        result.timings["retrieve_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return result

    def _retrieve(
        self, query: str, k: int, author: str | None, track: str | None, mode: str
    ) -> Retrieval:
        allowed: set[str] | None = None
        authors: list[str] = []
        tracks: list[str] = []
        if author:
            authors = self.match_authors(author)
            allowed = {pid for a in authors for pid in self._authors[a]}
            if not allowed:
                return Retrieval(
                    query,
                    [],
                    True,
                    f"no indexed paper lists {author!r} as an author",
                    "author",
                    authors,
                )
        if track:
            tracks = self.match_tracks(track)
            ids = {pid for t in tracks for pid in self._tracks[t]}
            allowed = ids if allowed is None else allowed & ids
            if not ids:
                return Retrieval(
                    query, [], True, f"no indexed track matches {track!r}", "track", authors, tracks
                )

        words = tokens(query)
        if mode == "hybrid" and not (author or track):
            meta = self._metadata_question(query, words)
            if meta is not None:
                return meta

        topical = [w for w in words if w not in _STOP]
        if allowed is not None and not topical:
            hits = self._listing(allowed)
            kind = "author" if author else "track"
            return Retrieval(
                query,
                hits,
                not hits,
                "" if hits else "no papers match the filters",
                kind,
                authors,
                tracks,
            )
        if not words:
            return Retrieval(query, [], True, "the question is empty", mode)
        return self._topical(query, k, allowed, mode, authors, tracks)

    def _metadata_question(self, query: str, words: list[str]) -> Retrieval | None:
        """An author or track question answered from metadata, or None if it is topical."""
        found_authors, used = self._find_author_in(words, query)
        if found_authors and len(self._find_track_in(words)[1]) > len(used):
            found_authors = []  # "Deep Learning · Theory" is a track, not papers by Mr Deep
        if found_authors:
            rest = [w for w in words if w not in used and w not in _STOP]
            ids = {pid for a in found_authors for pid in self._authors[a]}
            names = sorted(
                {n for pid in ids for n in self.papers[pid].authors if phrase(n) in found_authors}
            )
            if not rest:
                return Retrieval(query, self._listing(ids), False, "", "author", names)
            return self._topical(query, len(ids), ids, "hybrid", names, [])
        unknown = _UNKNOWN_AUTHOR.search(query.strip())
        if unknown:
            name = (unknown.group("name") or unknown.group("name2") or "").strip()
            if name and not self.match_tracks(name):
                return Retrieval(
                    query, [], True, f"no indexed paper lists {name!r} as an author", "author"
                )
        found_tracks, used = self._find_track_in(words)
        if found_tracks:
            rest = [w for w in words if w not in used and w not in _STOP]
            cue = bool(_TRACK_CUES.search(fold(query))) or POSITION_TRACK in found_tracks
            if cue or not rest:
                ids = {pid for t in found_tracks for pid in self._tracks[t]}
                if not rest:
                    return Retrieval(
                        query, self._listing(ids), False, "", "track", [], found_tracks
                    )
                return self._topical(query, len(ids), ids, "hybrid", [], found_tracks)
        return None

    def _listing(self, ids: Iterable[str]) -> list[Hit]:
        papers = sorted((self.papers[i] for i in ids), key=lambda p: p.display_name.casefold())
        return [Hit(p, 1.0, _lead(p.abstract), ("metadata",)) for p in papers]

    def _topical(
        self,
        query: str,
        k: int,
        allowed: set[str] | None,
        mode: str,
        authors: list[str],
        tracks: list[str],
    ) -> Retrieval:
        depth = max(4 * k, 40)
        vector = None
        if mode in ("hybrid", "dense"):
            vector = self.index.query_model.get_query_embedding(query)
        dense = self._dense(query, vector, depth, allowed) if vector is not None else []
        sparse = self._sparse(query, depth, allowed) if mode in ("hybrid", "bm25") else []
        topics: list[tuple[str, ...]] = []
        # The topics a question asking for papers spells out are what the papers must be
        # about (rag.topics); other questions use such words in passing.
        asks_for_papers = bool(_ASKS_FOR_PAPERS.search(query))
        if mode == "hybrid" and vector is not None and self.index.settings.search.topic_check:
            topics = self.topics.named(query, vector, asks_for_papers)

        passages: dict[str, tuple[float, str]] = {}
        fused = _fuse(dense, sparse, LEG_WEIGHTS["bm25"])
        why: dict[str, list[str]] = {}
        for leg, ranked in (("dense", dense), ("bm25", sparse)):
            for pid, score, text in ranked:
                why.setdefault(pid, []).append(leg)
                if leg == "dense" and (pid not in passages or score > passages[pid][0]):
                    passages[pid] = (score, text)
                passages.setdefault(pid, (score, text))
        named = self._named(query, allowed) if mode == "hybrid" else []
        for pid in named:
            fused[pid] = fused.get(pid, 0.0) + 1.0  # above anything fusion alone can score
            why.setdefault(pid, []).append("name")
            passages.setdefault(pid, (1.0, _lead(self.papers[pid].abstract)))

        ranked_ids = sorted(fused, key=lambda pid: -fused[pid])
        first_ids = ranked_ids[:TOPIC_CHECK_PAPERS]
        if topics and not named:  # a paper the question names stays first
            order = _fuse(dense, sparse, TOPIC_BM25_WEIGHT)
            ranked_ids = self._topic_first(topics, sorted(order, key=lambda pid: -order[pid]))
        ranked_ids = ranked_ids[:k]
        hits = [
            Hit(self.papers[pid], round(fused[pid], 6), passages[pid][1], tuple(why[pid]))
            for pid in ranked_ids
            if pid in self.papers
        ]
        score = relevance(dense, sparse)
        signals = {
            "relevance": round(score, 4),
            "top_dense": round(dense[0][1], 4) if dense else 0.0,
            "named": float(len(named)),
        }
        if mode == "hybrid":
            abstain = not named and allowed is None and score < ABSTAIN_BELOW
        else:
            abstain = False  # the plain legs are baselines: no abstention of their own
        if abstain or not hits:
            reason = (
                f"nothing indexed is about this question (relevance {score:.2f} < "
                f"{ABSTAIN_BELOW:.2f})"
                if mode != "bm25"
                else "no indexed paper shares a term with the question"
            )
            return Retrieval(query, [], True, reason, mode, authors, tracks, signals=signals)
        if (
            mode == "hybrid"
            and vector is not None
            and not named
            and allowed is None
            and self.index.settings.search.topic_check
        ):
            texts = [f"{self.papers[pid].title} {self.papers[pid].abstract}" for pid in first_ids]
            topic = self.topics.unmentioned(query, vector, texts, asks_for_papers)
            if topic:
                reason = f"the question is about {topic!r}; none of the closest papers mention it"
                signals["unmentioned_topic"] = 1.0
                return Retrieval(query, [], True, reason, mode, authors, tracks, signals=signals)
            name = self._unknown_name(query)
            if name:
                reason = f"no indexed paper mentions {name!r}"
                signals["unknown_name"] = 1.0
                return Retrieval(query, [], True, reason, mode, authors, tracks, signals=signals)
        return Retrieval(query, hits, False, "", mode, authors, tracks, signals=signals)

    def _topic_first(self, topics: list[tuple[str, ...]], ranked: list[str]) -> list[str]:
        """Papers that mention the known topics a question names, ahead of those that do not
        (those that mention more of them first).

        Among thousands of papers of one field, fusion ranks papers near a topic among those
        that use it; a paper that never says the topic's words does not answer the question.
        """
        head = ranked[:TOPIC_FIRST_DEPTH]
        says = {
            pid: self.topics.mentioned(topics, f"{p.title} {p.abstract}")
            for pid in head
            for p in (self.papers[pid],)
        }
        # Stable: within the same number of topics mentioned, fusion's order stands.
        return sorted(head, key=lambda pid: -says[pid]) + ranked[TOPIC_FIRST_DEPTH:]

    def _unknown_name(self, query: str) -> str | None:
        """A name the question asks about (AlphaFold, GPT-2, BLEU) that no paper contains.

        Matched as a substring of all titles and abstracts, so it errs towards "mentioned"
        ("PC" is inside "PCA"); the text is joined on the first question that has a name.
        """
        names = coined_tokens(query)
        if not names:
            return None
        text = self._text()
        for name in names:
            if name.lower() not in text:
                return name
        return None

    def _text(self) -> str:
        if self._all_text is None:
            with self._lock:
                self._all_text = "\n".join(
                    f"{p.title}\n{p.abstract}" for p in self.papers.values()
                ).lower()
        return self._all_text

    def _is_ordinary(self, word: str) -> bool:
        """Whether the collection uses a word often (substring count, so it errs towards
        ordinary): a name that is such a word ("Guidance: ...", "USE: ...", a model coined as
        "MODEL") names its paper only when the question spells it the same way."""
        if word not in self._ordinary:
            self._ordinary[word] = self._text().count(word) > 4 * MAX_NAME_SHARERS
        return self._ordinary[word]

    def _is_rare_word(self, word: str) -> bool:
        """Whether titles and abstracts use `word` as a whole word at most a few times: a
        surname ("Bouniot", "Kolter") is, an English word that is also one ("Good",
        "Bigger", "Can") is not."""
        if word not in self._word_counts:
            pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
            self._word_counts[word] = sum(1 for _ in pattern.finditer(self._text()))
        return self._word_counts[word] <= MAX_NAME_SHARERS

    def _named(self, query: str, allowed: set[str] | None) -> list[str]:
        found: list[str] = []
        subject = _WHAT_IS.search(query)
        for raw in re.findall(r"[\w][\w\-]*[\w]|\w", query):
            key = fold(raw)
            ids = self._names.get(key, [])
            if ids and raw not in self._spellings.get(key, ()) and self._is_ordinary(key):
                ids = []  # "papers that use sparse autoencoders" is not about "USE: ..."
            if not ids and subject and raw == subject.group(1):
                # "What is Stochastax?": a capitalised name few papers use is what they
                # share, even if no abstract says "we propose" it.
                ids = sorted(self._capitalised.get(raw, ()))
            if len(ids) > MAX_NAME_SHARERS:
                continue  # a name many papers coin ("LLM-X") identifies none of them
            for pid in ids:
                if (allowed is None or pid in allowed) and pid not in found:
                    found.append(pid)
        return found

    def _dense(
        self, query: str, vector: list[float], depth: int, allowed: set[str] | None
    ) -> list[tuple[str, float, str]]:
        from llama_index.core.schema import QueryBundle
        from llama_index.core.vector_stores.types import (
            FilterOperator,
            MetadataFilter,
            MetadataFilters,
        )

        filters = None
        if allowed is not None:
            filters = MetadataFilters(
                filters=[
                    MetadataFilter(
                        key="paper_id", value=sorted(allowed), operator=FilterOperator.IN
                    )
                ]
            )
        with self.index.reaching_store():
            retriever = self.vector_index.as_retriever(similarity_top_k=depth, filters=filters)
            # The question's vector is passed in: the topic check uses it too.
            nodes = retriever.retrieve(QueryBundle(query_str=query, embedding=vector))
        content = self._content
        return _best_per_paper(
            (str(n.node.metadata["paper_id"]), float(n.score or 0.0), n.node.get_content())
            for n in nodes
            # Of the content these tables know: an ingest may have moved the store since.
            if content.get(str(n.node.metadata["paper_id"])) == n.node.metadata.get("content_hash")
        )

    def _sparse(
        self, query: str, depth: int, allowed: set[str] | None
    ) -> list[tuple[str, float, str]]:
        if self._bm25 is None:
            return []
        from llama_index.retrievers.bm25 import BM25Retriever

        n_docs = len(self._bm25.corpus) if self._bm25.corpus is not None else depth
        top = n_docs if allowed is not None else min(depth, n_docs)
        retriever = BM25Retriever(existing_bm25=self._bm25, similarity_top_k=top)
        rows = []
        for n in retriever.retrieve(query):
            pid = str(n.node.metadata["paper_id"])
            if (allowed is None or pid in allowed) and (n.score or 0.0) > 0:
                rows.append(
                    (
                        pid,
                        float(n.score or 0.0),
                        _strip_title(n.node.get_content(), pid, self.papers),
                    )
                )
        return _best_per_paper(rows)


def _fuse(dense: list[Ranked], sparse: list[Ranked], bm25_weight: float) -> dict[str, float]:
    """Reciprocal rank fusion of the two legs, BM25 at `bm25_weight`."""
    fused: dict[str, float] = {}
    for weight, ranked in ((LEG_WEIGHTS["dense"], dense), (bm25_weight, sparse)):
        for rank, (pid, _score, _text) in enumerate(ranked):
            fused[pid] = fused.get(pid, 0.0) + weight / (RRF_K + rank)
    return fused


def relevance(dense: list[Ranked], sparse: list[Ranked]) -> float:
    """How much the collection is about a question (see ABSTAIN_BELOW)."""
    if not dense:
        return 0.0
    top = dense[0][1]
    rest = [d[1] for d in dense[1:6]]
    gap = top - sum(rest) / len(rest) if rest else 0.0
    bm25 = min(sparse[0][1], BM25_CAP) if sparse else 0.0
    return top + GAP_WEIGHT * gap + BM25_WEIGHT * bm25


def _mentions(paper: Paper, terms: list[str]) -> bool:
    """Whether the paper's title or abstract has any of the terms (plural/singular alike)."""
    said = set(stems(f"{paper.title} {paper.abstract}"))
    return any(stem in said for term in terms for stem in stems(term))


def _best_per_paper(rows: Iterable[Ranked]) -> list[Ranked]:
    """Chunks to papers: each paper once, at its best chunk's score and text."""
    best: dict[str, tuple[str, float, str]] = {}
    for pid, score, text in rows:
        if pid not in best or score > best[pid][1]:
            best[pid] = (pid, score, text)
    return sorted(best.values(), key=lambda r: -r[1])


def _strip_title(text: str, pid: str, papers: dict[str, Paper]) -> str:
    p = papers.get(pid)
    if p and p.title and text.startswith(p.title + "\n"):
        return text[len(p.title) + 1 :]
    return text


def _lead(abstract: str, limit: int = 300) -> str:
    """The first sentences of an abstract, up to about `limit` characters."""
    out = ""
    for sentence in split_sentences(abstract):
        if out and len(out) + len(sentence) > limit:
            break
        out = f"{out} {sentence}".strip()
    return out
