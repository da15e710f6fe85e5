"""Finds the papers a question is about, or says that none is.

- Author and track questions ("papers by Bouniot", "the safety track") are answered from the
  metadata of every indexed paper: the complete list.
- Every other question gathers candidates by hybrid search (the collection's closest papers
  by their vectors, by BM25, and the papers the question names) and the fitted relevance
  model (rag.relevance) weighs each one, and whether the collection answers the question at
  all. Below its threshold the question is declined, with the closest papers; a list answer
  holds every candidate judged relevant, with the count; other answers read the most
  relevant few.
- The `dense` and `bm25` modes are the plain legs: the baselines the evals compare against.

No LLM is called here. The question itself is read once, by rag.query.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import numpy as np

from rag import relevance
from rag.corpus import Paper
from rag.index import Hit, PaperIndex, Snapshot
from rag.query import Query, Vocabulary, parse
from rag.relevance import Candidate, Evidence, RelevanceModel
from rag.text import light, split_sentences, terms

# Candidates per search leg. A question for every paper that fits reads deeper: at 6,000
# papers a topic's papers run to dozens (38 write "conformal prediction" at ICML 2026).
DEPTH = 40
LIST_DEPTH = 150
# The closest papers a declined question shows, so the asker sees what is near.
CLOSEST = 3
RRF_K = 20.0  # reciprocal rank fusion's constant, for ranking when no model is fitted


Written = tuple[frozenset[str], frozenset[tuple[str, str]], frozenset[str], frozenset[str]]


@dataclass
class Retrieval:
    """What a question retrieved, and how."""

    query: str
    hits: list[Hit]
    abstained: bool = False
    reason: str = ""
    mode: str = "hybrid"  # hybrid | dense | bm25 | author | track | filtered
    authors: list[str] = field(default_factory=list)
    tracks: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    signals: dict[str, float] = field(default_factory=dict)
    parsed: Query | None = None  # the question as retrieval read it
    total: int = 0  # papers that fit when the question asks for all of them (0: not counted)
    topics: list[str] = field(default_factory=list)  # the question's words those papers write
    missing: list[str] = field(default_factory=list)  # its words no close paper writes

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
            "asks": self.parsed.asks.value if self.parsed else "",
            "total": self.total or (0 if self.abstained else len(self.hits)),
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
    """What retrieval reads of one version of the store, built from one PaperIndex snapshot."""

    version: str = ""
    content: dict[str, str] = field(default_factory=dict)  # paper id -> content hash
    vocab: Vocabulary = field(default_factory=Vocabulary)
    bm25: Any = None
    order: list[str] = field(default_factory=list)  # paper ids; the rows of the arrays below
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    vector_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    bm25_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    # paper id -> the terms of its title and abstract, their adjacent pairs, its title's
    # terms, its words' light forms
    written: dict[str, Written] = field(default_factory=dict)


T = TypeVar("T")


class _Versioned(Generic[T]):
    """A Retriever attribute read from the tables the current question answers from."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = name.lstrip("_")

    def __get__(self, obj: Any, objtype: type | None = None) -> T:
        return cast(T, getattr(obj._tables_now(), self.field))


class Retriever:
    """Retrieval over one PaperIndex; loads its tables once and is safe to share.

    Each question first asks the store's version (one small request) and, when an ingest
    here or on another machine moved it, reads the new tables before it answers. A question
    reads one version's tables from start to end, even if another thread swaps them
    meanwhile.
    """

    _vocab = _Versioned[Vocabulary]()
    _bm25 = _Versioned[Any]()

    def __init__(self, index: PaperIndex) -> None:
        self.index = index
        self._loading = threading.Lock()  # one thread reads a new version; others wait
        self._tables: _Tables | None = None
        self._pinned = threading.local()
        self._model: tuple[RelevanceModel | None, str] | None = None

    def _fitted(self) -> tuple[RelevanceModel | None, str]:
        if self._model is None:
            self._model = relevance.load([self.index.settings.home], self.index.model_key)
        return self._model

    @property
    def relevance(self) -> RelevanceModel | None:
        """The fitted relevance model for this index's embedding model (rag.relevance)."""
        return self._fitted()[0]

    @relevance.setter
    def relevance(self, model: RelevanceModel | None) -> None:
        self._model = (model, "")

    @property
    def warning(self) -> str:
        """Why questions are not judged as fitted (no model for this embedding model, a
        file that could not be read), or ""."""
        return self._fitted()[1]

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
        order = [p.id for p in snapshot.papers]
        at = {pid: n for n, pid in enumerate(order)}
        corpus = snapshot.bm25.corpus if snapshot.bm25 is not None else None
        return _Tables(
            version=snapshot.version,
            content=snapshot.content,
            bm25=snapshot.bm25,
            vocab=Vocabulary.build(snapshot.papers),
            order=order,
            vectors=snapshot.vectors,
            vector_rows=np.array([at.get(pid, -1) for pid in snapshot.vector_ids], dtype=int),
            bm25_rows=np.array(
                [at.get(str(doc["paper_id"]), -1) for doc in corpus or []], dtype=int
            ),
        )

    @property
    def papers(self) -> dict[str, Paper]:
        return self._vocab.papers

    def parse(
        self,
        question: str,
        author: str | None = None,
        track: str | None = None,
        within: Iterable[str] | None = None,
    ) -> Query:
        """The question read against the loaded collection (rag.query)."""
        return parse(question, self._vocab, author, track, within)

    def resolve(self, paper_id: str) -> str:
        """The current id of a paper known by an older or other id."""
        self.load()
        return paper_id if paper_id in self.papers else self._vocab.aliases.get(paper_id, paper_id)

    @property
    def tracks(self) -> list[str]:
        self.load()
        return sorted(t for t in self._vocab.tracks if t)

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
            q = self.parse(query, author, track, within)
            result = self._retrieve(q, k, mode)
            result.parsed = q
            result.timings["retrieve_ms"] = round((time.perf_counter() - started) * 1000, 2)
            return result

    def evidence(self, question: str, k: int = 5, topical: bool = False) -> Evidence | None:
        """What the relevance model reads of a question (None for an unknown author or
        track, and for an author's or track's list unless `topical` says it asks about a
        topic): `python -m evals.calibrate` fits on these."""
        self.refresh()
        with self._answering():
            q = self.parse(question)
            allowed = self._allowed(q)
            if q.unknown_author or q.unknown_track or (allowed is not None and not allowed):
                return None
            if allowed is not None and not (topical or self._topical_words(q)):
                return None
            return self._evidence(q, allowed, self._depth(q, k))[0]

    def _retrieve(self, q: Query, k: int, mode: str) -> Retrieval:
        text = q.text
        # The baselines (dense, bm25) read no names from the wording; explicit filters hold.
        meta = q.explicit or mode == "hybrid"
        if meta and q.unknown_author:
            reason = f"no indexed paper lists {q.unknown_author!r} as an author"
            return Retrieval(text, [], True, reason, "author")
        allowed = self._allowed(q) if meta else None
        authors = self._vocab.author_names(allowed or (), q.authors) if meta else []
        tracks = list(q.tracks) if meta else []
        if meta and q.unknown_track:
            reason = f"no indexed track is called {q.unknown_track!r}"
            return Retrieval(text, [], True, reason, "track", authors)
        if allowed is not None and not q.explicit and q.asks.value == "compare":
            # A comparison's sides may be picked out differently: one by its authors, one by
            # its own name ("Smith et al. versus TimeSAE").
            allowed |= set(q.named)
        if q.within is not None:
            return self._follow_up(q, k, allowed, authors, tracks)
        if allowed is not None and not self._topical_words(q):
            hits = self._listing(allowed)
            kind = "author" if authors or (q.explicit and not tracks) else "track"
            reason = "" if hits else "no papers match the filters"
            return Retrieval(text, hits, not hits, reason, kind, authors, tracks)
        if not q.words:
            return Retrieval(text, [], True, "the question is empty", mode)
        if allowed is not None and not allowed:
            return Retrieval(text, [], True, "no papers match the filters", mode, authors, tracks)
        return self._topical(q, k, allowed, mode, authors, tracks)

    def _allowed(self, q: Query) -> set[str] | None:
        """The papers the question's authors and tracks pick out, or None if it names none."""
        allowed: set[str] | None = None
        if q.authors:
            allowed = {pid for a in q.authors for pid in self._vocab.authors.get(a, ())}
        if q.tracks:
            ids = {pid for t in q.tracks for pid in self._vocab.tracks.get(t, ())}
            allowed = ids if allowed is None else allowed & ids
        return allowed

    def _topical_words(self, q: Query) -> bool:
        """Whether an author's or track's question also asks about a topic ("Smith's papers on
        graphs") rather than for the list ("what has Smith worked on?"): some word besides
        the names weighs as a topic's does, by the fitted term weights."""
        if q.explicit:
            return bool(q.words)  # filters from outside: the whole question is the topic
        model = self.relevance
        bm25 = self._bm25
        if model is None or bm25 is None:
            return False  # nothing weighs the words: the list, which is exact
        said = self.topic_terms(q)
        heaviest = model.terms.heaviest(said, [self._df(t) for t in said], len(bm25.corpus))
        return heaviest >= model.topic_from

    @staticmethod
    def topic_terms(q: Query) -> list[str]:
        """The question's terms besides the words that named its authors or tracks."""
        return [t for t, _ in terms(_about(q, whole=False))]

    def _follow_up(
        self, q: Query, k: int, allowed: set[str] | None, authors: list[str], tracks: list[str]
    ) -> Retrieval:
        """ "Which of those ...": the earlier papers that the follow-up's words pick out."""
        assert q.within is not None
        within = {self.resolve(pid) for pid in q.within} & set(self.papers)
        if allowed is not None:
            within &= allowed
        if not within:
            reason = (
                "none of the earlier papers matches"
                if allowed is not None and q.within
                else "none of the earlier papers is indexed"
            )
            return Retrieval(q.text, [], True, reason, "filtered", authors, tracks)
        if not self._topical_words(q):
            return Retrieval(q.text, self._listing(within), False, "", "filtered", authors, tracks)
        found = self._topical(q, len(within), within, "hybrid", authors, tracks, every=True)
        found.mode = "filtered"
        if found.abstained:
            found.reason = "none of the earlier papers answers this"
        return found

    def _listing(self, ids: Iterable[str]) -> list[Hit]:
        papers = sorted((self.papers[i] for i in ids), key=lambda p: p.display_name.casefold())
        return [Hit(p, 1.0, _lead(p.abstract), ("metadata",)) for p in papers]

    def _depth(self, q: Query, k: int) -> int:
        return max(LIST_DEPTH if q.wants_all else DEPTH, k)

    def _topical(
        self,
        q: Query,
        k: int,
        allowed: set[str] | None,
        mode: str,
        authors: list[str],
        tracks: list[str],
        every: bool = False,
    ) -> Retrieval:
        """A question about a topic (within `allowed`, if given); `every` relevant paper is
        listed when the question asks for all of them, or follows up on a list."""
        ev, legs = self._evidence(q, allowed, self._depth(q, k))
        found = Retrieval(q.text, [], mode=mode, authors=authors, tracks=tracks)
        if not ev.candidates:
            found.abstained, found.reason = True, "no indexed paper shares a word with the question"
            return found
        model = self.relevance if mode == "hybrid" else None
        if model is None:
            # The plain legs, or no fitted model: rank by search alone and decline nothing.
            score = {
                "dense": lambda c: c.cos,
                "bm25": lambda c: c.bm25,
            }.get(
                mode,
                # A paper the question names comes first: above anything fusion can score.
                lambda c: float(c.named) + 1 / (RRF_K + c.dense_rank) + 0.5 / (RRF_K + c.bm25_rank),
            )
            ranked = sorted(ev.candidates, key=score, reverse=True)
            if mode == "bm25":
                ranked = [c for c in ranked if c.bm25 > 0]
            found.hits = [self._hit(c, score(c), legs) for c in ranked[:k]]
            found.abstained = not found.hits
            found.reason = (
                "no indexed paper shares a term with the question" if found.abstained else ""
            )
            found.signals = {"calibrated": 0.0} if mode == "hybrid" else {}
            return found
        p, answerable = model.judge(ev)
        order = np.argsort(-p, kind="stable")
        found.signals = {
            "relevance": round(answerable, 4),
            "abstain_below": round(model.abstain_below, 4),
            "top_paper": round(float(p[order[0]]), 4),
            "calibrated": 1.0,
        }
        candidates = ev.candidates
        # Declining was fitted on collections of 60 papers and more: among a handful, how
        # far the closest stands out says little, so nothing is declined there.
        fitted = len(self._tables_now().order) >= model.smallest_collection
        if answerable < model.abstain_below and self.index.settings.search.decline and fitted:
            found.hits = [self._hit(candidates[i], p[i], legs) for i in order[:CLOSEST]]
            found.missing = _missing(ev, model, candidates[order[0]])
            found.abstained, found.reason = True, _declined_reason(found.missing, allowed, authors)
            return found
        listing = q.wants_all or every
        cut = model.keeps("papers" if listing else q.asks.value)
        keep = [int(i) for i in order if p[i] >= cut] or [int(order[0])]
        if q.asks.value == "compare" and len(keep) < 2 <= len(order):
            keep = [int(i) for i in order[:2]]  # a comparison needs both sides
        if listing:
            found.total = len(keep)
            found.topics = _shared_words(ev, [candidates[i] for i in keep], model)
        else:
            keep = keep[:k]
        found.hits = [self._hit(candidates[i], p[i], legs, p[i] >= cut) for i in keep]
        return found

    def _hit(
        self, c: Candidate, score: float, legs: dict[str, tuple[str, ...]], relevant: bool = False
    ) -> Hit:
        """A candidate as a result: its relevance (or search score), and how it was found
        ("relevant" when the model judges it so)."""
        paper = self.papers[c.id]
        matched = (*legs.get(c.id, ("dense",)), *(("relevant",) if relevant else ()))
        return Hit(paper, round(float(score), 6), _lead(paper.abstract), matched)

    # ------------------------------------------------------------------ evidence

    def _evidence(
        self, q: Query, allowed: set[str] | None, depth: int
    ) -> tuple[Evidence, dict[str, tuple[str, ...]]]:
        """The candidates (each leg's best `depth`, and the papers the question names) with
        what the relevance model reads of them; and which legs found each."""
        tables = self._tables_now()
        n = len(tables.order)
        mask = np.ones(n, dtype=bool)
        if allowed is not None:
            mask = np.zeros(n, dtype=bool)
            at = {pid: i for i, pid in enumerate(tables.order)}
            mask[[at[pid] for pid in allowed if pid in at]] = True
        # Among an author's or track's papers, the names say nothing of which one is meant:
        # none of Smith's abstracts writes "Smith". (Unfiltered, a baseline reads them all.)
        about = _about(q) if allowed is not None else q.text
        cos = self._cosines(about)
        said = terms(about)
        bm25 = self._bm25_scores([t for t, _ in said])
        dense_order = [int(i) for i in np.argsort(-np.where(mask, cos, -np.inf), kind="stable")]
        dense_order = dense_order[: int(mask.sum())]
        bm25_order = [int(i) for i in np.argsort(-np.where(mask, bm25, -np.inf), kind="stable")]
        bm25_order = [i for i in bm25_order[: int(mask.sum())] if bm25[i] > 0]
        dense_rank = {i: r for r, i in enumerate(dense_order)}
        bm25_rank = {i: r for r, i in enumerate(bm25_order)}
        legs: dict[str, tuple[str, ...]] = {}
        picked: list[int] = []
        for leg, ranked in (("dense", dense_order[:depth]), ("bm25", bm25_order[:depth])):
            for i in ranked:
                pid = tables.order[i]
                legs[pid] = (*legs.get(pid, ()), leg)
                if i not in picked:
                    picked.append(i)
        named = [pid for pid in q.named if allowed is None or pid in allowed]
        at_named = {pid: i for i, pid in enumerate(tables.order) if pid in named}
        for pid in named:
            legs[pid] = (*legs.get(pid, ()), "name")
            if pid in at_named and at_named[pid] not in picked:
                picked.append(at_named[pid])
        words = [t for t, _ in said]
        candidates = []
        for i in picked:
            pid = tables.order[i]
            has, pairs, title, surface = self._written(pid)
            candidates.append(
                Candidate(
                    id=pid,
                    cos=float(cos[i]),
                    dense_rank=dense_rank.get(i, n),
                    bm25=float(bm25[i]),
                    bm25_rank=bm25_rank.get(i, n),
                    has=tuple(t in has for t in words),
                    exact=tuple(light(w) in surface for _, w in said),
                    in_title=tuple(t in title for t in words),
                    pairs=tuple(pair in pairs for pair in itertools.pairwise(words)),
                    named=pid in named,
                )
            )
        inside = cos[mask] if mask.any() else cos
        passages = len(tables.bm25.corpus) if tables.bm25 is not None else n
        ev = Evidence(
            question=q.text,
            intent=q.asks.value,
            terms=tuple(words),
            words=tuple(w for _, w in said),
            df=tuple(self._df(t) for t in words),
            passages=passages,
            papers=int(mask.sum()),
            cos_mean=float(inside.mean()) if len(inside) else 0.0,
            cos_std=float(inside.std()) if len(inside) else 1.0,
            bm25_max=float(bm25[mask].max()) if mask.any() else 0.0,
            candidates=tuple(candidates),
        )
        return ev, legs

    def _cosines(self, question: str) -> np.ndarray:
        """Every paper's cosine to the question, by its closest passage.

        Brute force over the collection's vectors (a few milliseconds at 6,000 papers) rather
        than Chroma's nearest-neighbour search: the relevance model reads each candidate's
        cosine and where it stands among the whole collection's, which a top-k cannot give.
        """
        tables = self._tables_now()
        out = np.full(len(tables.order), -1.0, dtype=np.float32)
        if not len(tables.vectors):
            return out
        vector = np.asarray(self.index.query_model.get_query_embedding(question), dtype=np.float32)
        vector /= np.linalg.norm(vector) or 1.0
        scores = tables.vectors @ vector
        ok = tables.vector_rows >= 0
        np.maximum.at(out, tables.vector_rows[ok], scores[ok])
        return out

    def _bm25_scores(self, words: list[str]) -> np.ndarray:
        """Every paper's BM25 score for the question's terms, by its best passage."""
        tables = self._tables_now()
        out = np.zeros(len(tables.order), dtype=np.float32)
        bm25 = tables.bm25
        known = [t for t in words if bm25 is not None and t in bm25.vocab_dict]
        if not known:
            return out
        scores = np.asarray(bm25.get_scores(known), dtype=np.float32)
        ok = tables.bm25_rows >= 0
        np.maximum.at(out, tables.bm25_rows[ok], scores[ok])
        return out

    def _df(self, term: str) -> int:
        """How many passages hold a term (BM25's inverted index)."""
        bm25 = self._bm25
        if bm25 is None or term not in bm25.vocab_dict:
            return 0
        indptr = bm25.scores["indptr"]
        tid = bm25.vocab_dict[term]
        return int(indptr[tid + 1] - indptr[tid])

    def _written(self, pid: str) -> Written:
        """A paper's terms, adjacent term pairs and title terms, as BM25 reads them, and its
        words' light forms (kept)."""
        written = self._tables_now().written
        if pid not in written:
            paper = self.papers[pid]
            said = terms(f"{paper.title}\n{paper.abstract}")
            body = [t for t, _ in said]
            title = frozenset(t for t, _ in terms(paper.title))
            surface = frozenset(light(w) for _, w in said)
            written[pid] = (frozenset(body), frozenset(itertools.pairwise(body)), title, surface)
        return written[pid]


def _about(q: Query, whole: bool = True) -> str:
    """The question without the words that named its authors or tracks (with `whole`, the
    whole question when nothing else is left: what a search needs something of)."""
    meta = set(q.meta_words) | {w for a in q.authors for w in a.split()}
    if not meta:
        return q.text
    rest = " ".join(w for w in q.words if w not in meta)
    return rest or (q.text if whole else "")


def _missing(ev: Evidence, model: RelevanceModel, closest: Candidate) -> list[str]:
    """The question's words the closest paper never writes, heaviest first (at most three):
    what nothing near it is about."""
    weighed = sorted(
        (
            (model.terms.weigh(ev.terms[i], ev.df[i], ev.passages), ev.words[i])
            for i in ev.unique()
            if not closest.has[i]
        ),
        reverse=True,
    )
    heavy = [w for weight, w in weighed if weight >= model.topic_from][:3]
    return [w for w in ev.words if w in heavy and w not in heavy[: heavy.index(w)]]


def _declined_reason(missing: list[str], allowed: set[str] | None, authors: list[str]) -> str:
    whose = (
        f"{', '.join(authors)}'s papers"
        if authors
        else "the papers asked about"
        if allowed is not None
        else "the indexed papers"
    )
    if missing:
        said = ", ".join(repr(w) for w in missing)
        return f"none of {whose} answers this: the closest never mention {said}"
    return f"none of {whose} answers this"


def _shared_words(ev: Evidence, listed: list[Candidate], model: RelevanceModel) -> list[str]:
    """The question's topic words that most listed papers write, as the question writes them
    ("conformal prediction"): what the list has in common, in the question's own words."""
    if not listed:
        return []
    shared = [
        ev.words[i]
        for i in range(len(ev.terms))
        if sum(c.has[i] for c in listed) * 2 > len(listed)
        and model.terms.weigh(ev.terms[i], ev.df[i], ev.passages) >= model.topic_from
    ]
    return [" ".join(dict.fromkeys(shared))] if shared else []


def _lead(abstract: str, limit: int = 300) -> str:
    """The first sentences of an abstract, up to about `limit` characters."""
    out = ""
    for sentence in split_sentences(abstract):
        if out and len(out) + len(sentence) > limit:
            break
        out = f"{out} {sentence}".strip()
    return out
