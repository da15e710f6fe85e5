"""Finds the papers a question is about: hybrid search, metadata questions, abstention.

- Topical questions: dense (Chroma) and BM25 legs, each a LlamaIndex retriever, fused by
  reciprocal rank fusion over *papers*; a method name the question mentions ("What is
  SOTAlign?") puts the paper that coins it first.
- Author and track questions ("papers by Bouniot", "the safety track") are answered from the
  metadata of every indexed paper: the complete list, not a top-k sample.
- A question for every paper on a topic ("which papers use X?") gets every paper that
  mentions it, with the count, after the best-ranked ones.
- When nothing indexed is about the question, the result is empty and says so. No LLM is
  called anywhere here. The question itself is read once, by rag.query.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from rag import abstain
from rag.corpus import Paper
from rag.embed import model_identity
from rag.index import Hit, PaperIndex, Snapshot
from rag.query import Asks, Query, Vocabulary, parse
from rag.text import (
    CONTRIBUTION_VERBS,
    GENERIC_WORDS,
    STOPWORDS,
    contains,
    contradicted,
    denied_only,
    fold,
    mentions_name,
    split_sentences,
    states_count,
    states_figure,
    states_figure_of,
    states_value,
    stem,
    stems,
    tokens,
    unwritten_modality,
    without_glosses,
)
from rag.topics import Topics

# Paraphrases share no rare word with their paper, so BM25 counts half as much as dense
# (measured in evals/README.md, "Retrieval").
LEG_WEIGHTS = {"dense": 1.0, "bm25": 0.5}
# A question naming a known topic wants papers that say its words: BM25 counts fully in
# their order (the abstention tests still read the default order).
TOPIC_BM25_WEIGHT = 1.0
RRF_K = 20.0  # reciprocal rank fusion's constant: the top few ranks dominate
Ranked = tuple[str, float, str]  # (paper id, score, best passage)
# Whether a topical question is about anything indexed is decided by rag.abstain, from a
# calibration of the embedding model in use. Its topic check reads this many closest papers.
TOPIC_CHECK_PAPERS = 3
# Of this many best fused papers, those that mention the topic a question names go first.
TOPIC_FIRST_DEPTH = 20


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
    parsed: Query | None = None  # the question as retrieval understood it
    total: int = 0  # papers that match when the question wants all of them (0: not counted)
    topics: list[str] = field(default_factory=list)  # the topics those papers mention
    unstated: str = ""  # what it asks for that the papers it is about do not state
    about: str = ""  # the one paper it is about, where retrieval is sure (listed first)
    data: str = ""  # the kind of data it asks about that none of the closest papers writes
    premise: str = ""  # a topic it asks of the paper it names, which that paper never says
    denied: bool = False  # the paper says the premise only to deny it ("without fine-tuning")
    contrary: str = ""  # the paper's sentence that says the opposite of the premise

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
            "total": self.total or len(self.hits),
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

    _vocab = _Versioned[Vocabulary]()
    _bm25 = _Versioned[Any]()
    _content = _Versioned[dict[str, str]]()

    def __init__(self, index: PaperIndex) -> None:
        self.index = index
        self._loading = threading.Lock()  # one thread reads a new version; others wait
        self._tables: _Tables | None = None
        self._pinned = threading.local()
        self._vector_index: Any = None
        self._vector_collection: Any = None  # the collection handle _vector_index reads
        self._vector_model: Any = None
        self._topics: Topics | None = None
        self._abstention: abstain.Abstention | None = None

    @property
    def topics(self) -> Topics:
        """The topic background (rag.topics), embedded on first use or read from its cache."""
        if self._topics is None:
            self._topics = Topics.load(
                lambda texts: self.index.query_model.get_text_embedding_batch(texts),
                self.index.topics_dir,
                self.index.model_key,
            )
            self._topics.near_cutoff = self.abstention.near_topic
        return self._topics

    @property
    def abstention(self) -> abstain.Abstention:
        """The abstention policy for this index's embedding model (rag.abstain)."""
        if self._abstention is None:
            self._abstention = abstain.load(
                [self.index.settings.home],
                self.index.model_key,
                str(model_identity(self.index.settings.embed).get("name", "")),
            )
        return self._abstention

    @abstention.setter
    def abstention(self, policy: abstain.Abstention) -> None:
        self._abstention = policy
        if self._topics is not None:
            self._topics.near_cutoff = policy.near_topic

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
        return _Tables(
            version=snapshot.version,
            content=snapshot.content,
            bm25=snapshot.bm25,
            vocab=Vocabulary.build(snapshot.papers),
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
        """The question understood against the loaded collection (rag.query)."""
        # Misspelt topic words are put right first, or neither search leg reads them.
        question = self.topics.mend(question, self._vocab.uses)
        return parse(question, self._vocab, author, track, within)

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
            # The index's own splitter: LlamaIndex's default one costs a tenth of a second to
            # build (tiktoken), on a path that never splits anything.
            self._vector_index = VectorStoreIndex.from_vector_store(
                store, embed_model=model, transformations=[self.index.splitter]
            )
        return self._vector_index

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

    def _retrieve(self, q: Query, k: int, mode: str) -> Retrieval:
        text = q.text
        # The baselines (dense, bm25) read no names from the wording; explicit filters hold.
        meta = q.explicit or mode == "hybrid"
        if meta and q.unknown_author:
            return Retrieval(
                text,
                [],
                True,
                f"no indexed paper lists {q.unknown_author!r} as an author",
                "author",
            )
        allowed: set[str] | None = None
        authors: list[str] = []
        tracks: list[str] = list(q.tracks) if meta else []
        if meta and q.authors:
            allowed = {pid for a in q.authors for pid in self._vocab.authors[a]}
            authors = self._vocab.author_names(allowed, q.authors)
        if meta and q.unknown_track:
            return Retrieval(
                text, [], True, f"no indexed track matches {q.unknown_track!r}", "track", authors
            )
        # A question that names papers, or follows up on some, is answered with them and what
        # they lack (_unstated).
        unseen = q.unseen_name and not q.named and q.within is None
        if mode == "hybrid" and unseen and self.index.settings.search.topic_check:
            return Retrieval(text, [], True, f"no indexed paper mentions {q.unseen_name!r}", mode)
        if tracks:
            ids = {pid for t in tracks for pid in self._vocab.tracks[t]}
            allowed = ids if allowed is None else allowed & ids
        if allowed is not None and not q.explicit and q.asks is Asks.COMPARE:
            # A comparison's sides may be picked out differently: one by its authors, one by
            # its own name ("Smith et al. versus TimeSAE").
            allowed |= set(q.own_named)
        if q.within is not None:
            return self._follow_up(q, k, allowed, authors, tracks)
        if allowed is not None and not q.topical:
            hits = self._listing(allowed)
            kind = "author" if authors or (q.explicit and not tracks) else "track"
            reason = "" if hits else "no papers match the filters"
            return Retrieval(text, hits, not hits, reason, kind, authors, tracks)
        if not q.words:
            return Retrieval(text, [], True, "the question is empty", mode)
        if allowed is not None and not q.explicit:
            k = len(allowed)  # a topic within an author's or a track's papers: rank them all
        return self._topical(q, k, allowed, mode, authors, tracks)

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
        if not q.topical:
            return Retrieval(q.text, self._listing(within), False, "", "filtered", authors, tracks)
        found = self._topical(q, len(within), within, "hybrid", authors, tracks)
        if found.unstated:  # none of the earlier papers can say
            found.mode = "filtered"
            return found
        # Every earlier paper ranks somewhere; only those whose text has the follow-up's
        # topical words (or that it names) answer "which of those ...".
        # Words of three letters or fewer ("use", "new", "gan") match too much by stem.
        terms = [w for w in q.topical if w not in _NOT_TOPICAL and len(w) > 3]
        found.hits = [
            h for h in found.hits if "name" in h.matched or (terms and _mentions(h.paper, terms))
        ][:k]
        found.mode = "filtered"
        if not found.hits:
            reason = f"none of the earlier papers mention {q.text!r}"
            return Retrieval(q.text, [], True, reason, "filtered", authors, tracks)
        found.abstained, found.reason = False, ""
        return found

    def _listing(self, ids: Iterable[str]) -> list[Hit]:
        papers = sorted((self.papers[i] for i in ids), key=lambda p: p.display_name.casefold())
        return [Hit(p, 1.0, _lead(p.abstract), ("metadata",)) for p in papers]

    def _topical(
        self,
        q: Query,
        k: int,
        allowed: set[str] | None,
        mode: str,
        authors: list[str],
        tracks: list[str],
    ) -> Retrieval:
        query = q.text
        # Each leg reads several chunks per paper it can return, and fusion needs overlap.
        depth = max(4 * k, 40)
        vector = None
        if mode in ("hybrid", "dense"):
            vector = self.index.query_model.get_query_embedding(query)
        dense = self._dense(query, vector, depth, allowed) if vector is not None else []
        sparse = self._sparse(query, depth, allowed) if mode in ("hybrid", "bm25") else []
        topics: list[tuple[str, ...]] = []
        written: dict[tuple[str, ...], str] = {}
        # The topics a question asking for papers spells out are what the papers must be
        # about (rag.topics); other questions use such words in passing.
        asks_for_papers = q.spells_topics
        if mode == "hybrid" and vector is not None and self.index.settings.search.topic_check:
            topics = self.topics.named(query, vector, asks_for_papers)
            if asks_for_papers and not topics:
                written = self._written_runs(q)
                topics = list(written)

        passages: dict[str, tuple[float, str]] = {}
        fused = _fuse(dense, sparse, LEG_WEIGHTS["bm25"])
        why: dict[str, list[str]] = {}
        for leg, ranked in (("dense", dense), ("bm25", sparse)):
            for pid, score, text in ranked:
                why.setdefault(pid, []).append(leg)
                if leg == "dense" and (pid not in passages or score > passages[pid][0]):
                    passages[pid] = (score, text)
                passages.setdefault(pid, (score, text))
        named = [p for p in q.named if allowed is None or p in allowed] if mode == "hybrid" else []
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
        signals: dict[str, float] = {"named": float(len(named))}

        def declined(reason: str, shown: list[Hit], **found: Any) -> Retrieval:
            """The question turned away, with the papers to show and what was found."""
            return Retrieval(
                query, shown, True, reason, mode, authors, tracks, signals=signals, **found
            )

        if (
            allowed is not None
            and (authors or tracks)
            and not named
            and vector is not None
            and mode == "hybrid"
            and self.index.settings.search.topic_check
            and (lacking := self._lacking_in(q, vector, allowed))
        ):
            whose = f"{', '.join(authors)}'s papers" if authors else "the track's papers"
            return declined(f"the question is about {lacking!r}; none of {whose} mention it", [])
        # The one paper the question is about: the one it names, or the one it names by a
        # name of its own among others it picks out by chance capitals ("ImageNet"), or the
        # one its description fits best ("the graph colouring paper").
        subject = named if len(q.named) == 1 else [p for p in named if p in q.own_named]
        fits = self._described(q, allowed) if mode == "hybrid" and not q.named else ""
        # Where the whole question puts another paper first, the paper that writes every
        # word of the description is meant (that one, if both do); a loose description may
        # fit neither.
        if fits and hits and hits[0].paper.id != fits:
            top = hits[0].paper.id
            if self._writes_all(top, q.described):
                fits = top
            elif not self._writes_all(fits, q.described):
                fits = ""
        if fits:
            subject = [fits]
        if (
            mode == "hybrid"
            and len(subject) == 1
            and not (q.authors or q.tracks)
            and q.asks in (Asks.EXPLAIN, Asks.DETAIL, Asks.TOPIC)
            and self.index.settings.search.topic_check
            and (found := self._false_premise(q, subject[0]))[0]
        ):
            premise, denied = found
            how = "describes" if fits else "names"
            says = "says only that it does without" if denied else "never mentions"
            reason = f"the paper the question {how} {says} {premise!r}"
            return declined(reason, hits, premise=premise, denied=denied)
        # What it says of a thing where the paper it is about says only the opposite ("why
        # do larger models do better?" of "smaller models outperform larger ones"). That
        # paper is the one it names or describes, or its authors' only one, else the closest.
        about = subject or (sorted(allowed) if authors and allowed and len(allowed) == 1 else [])
        if not about and hits and not named:
            about = [hits[0].paper.id]
        if (
            mode == "hybrid"
            and len(about) == 1
            and any(h.paper.id == about[0] for h in hits)
            and q.asks in (Asks.EXPLAIN, Asks.DETAIL, Asks.TOPIC)
            and self.index.settings.search.topic_check
        ):
            paper = self.papers[about[0]]
            if contrary := contradicted(f"{paper.title}. {paper.abstract}", q.text):
                # That paper is the one the answer shows first.
                hits.sort(key=lambda h: h.paper.id != about[0])
                reason = f"the paper it is about says {contrary.written!r}, not {contrary.asked!r}"
                return declined(reason, hits, premise=contrary.asked, contrary=contrary.sentence)
        # The kind of data it asks about ("watermarking speech"): close papers that never
        # write a word for it work on other data. Of the paper it is about, a false premise,
        # but as for topics, not where it is compared or asked yes or no, nor where another
        # paper it names writes it (the one it is about is then less sure).
        premised = q.asks in (Asks.EXPLAIN, Asks.DETAIL, Asks.TOPIC)
        data = ""
        if mode == "hybrid" and self.index.settings.search.topic_check and hits:
            on = (named or subject) if subject and premised else [h.paper.id for h in hits]
            texts = [f"{self.papers[p].title} {self.papers[p].abstract}" for p in on]
            # Its topical words and function words ("or" among them): either side of an "or"
            # may be what those papers are on. Not its glosses: "SAEs (e.g. on weather data)"
            # asks for SAEs, the instances being the asker's own.
            asked = " ".join(
                w for w in tokens(without_glosses(q.text)) if w in q.topical or w in STOPWORDS
            )
            data = unwritten_modality(asked, texts)
            if data and subject and premised:
                hits.sort(key=lambda h: h.paper.id != subject[0])
                reason = f"the paper the question is about never mentions {data!r}"
                return declined(reason, hits, premise=data)
        # Papers picked out by their authors ("Smith et al.") are as surely the ones asked
        # about as papers named by their own names.
        known = named or (sorted(allowed) if authors and allowed is not None else [])
        own = [pid for pid in named if pid in q.own_named] or known[len(named) :]
        if fits and not known:
            known = own = [fits]
        # "Which five games ...?" is about the one close paper that writes five games.
        if not known and q.which and q.which_number is not None:
            tallied = [
                h.paper.id
                for h in hits
                if states_count(f"{h.paper.title}. {h.paper.abstract}", (q.which,), q.which_number)
            ]
            if len(tallied) == 1:
                known = own = tallied
        if mode == "hybrid" and (unstated := self._unstated(q, known, own, hits)):
            reason = f"the question asks for {unstated!r}, which " + (
                "the abstracts of the papers it names do not state"
                if named
                else f"the abstracts of {', '.join(authors)}'s papers do not state"
                if authors and known
                else "the abstract of the paper it describes does not state"
                if known
                else "none of the closest abstracts states"
            )
            if len(known) == 1 and any(h.paper.id == known[0] for h in hits):
                hits.sort(key=lambda h: h.paper.id != known[0])
                return declined(reason, hits, unstated=unstated, about=known[0])
            return declined(reason, hits, unstated=unstated)
        # A paper that merely writes a capitalised word of the question ("English") may be
        # about something else: only a particular name exempts the question from the check.
        surely = [pid for pid in named if pid in q.surely_named]
        if mode == "hybrid" and not surely and allowed is None and vector is not None:
            decision = self._abstention_check(q, vector, dense, sparse, first_ids)
            signals |= decision.signals
            if decision.abstain:
                return declined(decision.reason, [])
        elif dense:  # named papers, filters and the plain legs are exempt
            signals["top_dense"] = round(dense[0][1], 4)
        # After that check: a topic or a name no paper has is the surer reason. The papers
        # are shown, as what they do for other data may still serve the asker.
        if data:
            reason = f"the question is about {data!r}; none of the closest papers mention it"
            return declined(reason, hits, data=data)
        if not hits:
            reason = (
                "no indexed paper shares a term with the question"
                if mode == "bm25"
                else "nothing indexed is about this question"
            )
            return declined(reason, [])
        total = 0
        phrases: list[str] = []
        if q.wants_all and topics and not named and mode == "hybrid":
            hits, total = self._every_mention(q, topics, hits, allowed, fused, passages)
            phrases = [written.get(t) or self.topics.phrase(t) for t in topics]
        return Retrieval(
            query,
            hits,
            False,
            "",
            mode,
            authors,
            tracks,
            signals=signals,
            total=total,
            topics=phrases,
        )

    def _lacking_in(self, q: Query, vector: list[float], allowed: set[str]) -> str | None:
        """A topic the question names that none of the papers its author or track picks out
        mentions ("Smith's papers on quantum chemistry"): the topical check, on those papers."""
        texts = [f"{self.papers[p].title} {self.papers[p].abstract}" for p in allowed]
        topics = abstain.topics_at(self.topics, self.abstention.near_topic)
        # Its words other than the author's name or the track's ("Theory" in "Deep Learning ·
        # Theory" names the track, not a topic its papers lack). Only a topic it is about
        # counts, not one it merely spells: its asker describes a few papers in their own
        # words ("irregular time series" for "unevenly sampled signals").
        own = {w for t in q.tracks for w in tokens(t)}
        topical = set(q.topical) - own
        # Its "or"s kept: either side may be what those papers mention.
        words = [w for w in q.words if w in topical or w == "or"]
        # Nearness is judged on those words: an author's name moves the question's vector.
        # The filter chose these papers, so one that writes a topic's words at all, however
        # far apart, mentions it ("alignment ... for safety" of "safety alignment").
        asked = " ".join(words)
        if topic := topics.unmentioned(
            asked, self.index.query_model.get_query_embedding(asked), texts, loose=True
        ):
            return topic
        # A topic the background list lacks: none of its words (as a follow-up reads them)
        # nor a name it uses is in any of those papers.
        if q.names:
            lowered = [fold(t) for t in texts]
            said = {w for t in lowered for w in stems(t)}
            for name in q.names:
                if not any(mentions_name(t, name, said) for t in lowered):
                    return name
        # One leftover word is as likely a verb that frames the question ("which paper landed
        # in ...") as a topic, and the background list knows one-word topics: two or more.
        terms = [w for w in words if w not in _NOT_TOPICAL and len(w) > 3]
        if len(terms) > 1 and not any(_mentions(self.papers[p], terms) for p in allowed):
            return " ".join(terms)
        return None

    def _unstated(self, q: Query, named: list[str], own: list[str], hits: list[Hit]) -> str:
        """What the question asks for that the papers it is about do not state, if anything:
        a detail only full papers give ("batch size") that none of them mentions, or, for
        papers it names, a name that neither they nor the papers found with them contain
        (a benchmark no abstract there names), or a count or a result whose figure none of
        them gives. Their abstracts cannot answer it, however close they are."""
        about = [self.papers[pid] for pid in named] or [h.paper for h in hits]
        written = [f"{p.title}. {p.abstract}" for p in about]
        texts = [fold(t) for t in written]
        # Asked of papers, not a question for papers ("which papers release source code?"),
        # whose detail words are its topic.
        asked = q.asks not in (Asks.PAPERS, Asks.RECOMMEND)
        detail = q.full_text_detail
        if asked and detail and not any(detail.lower() in t for t in texts):
            return detail
        # A count the abstracts of those papers do not give ("12 robot arms").
        if asked and q.counted and not any(states_count(t, q.counted) for t in written):
            return f"the number of {' '.join(q.counted)}"
        if named:
            texts += [fold(f"{h.paper.title} {h.paper.abstract}") for h in hits]
            words = {w for t in texts for w in stems(t)}
            # Words written as names, once the papers are named by names of their own
            # ("Orak"), not by words they capitalise: two papers that write "Nordic" are no
            # sign that a paraphrase is about them. The words that named them aside. Papers
            # picked out by their authors are named surely enough.
            proper: tuple[str, ...] = ()
            by_authors = not set(named) & set(q.named)
            if q.names or by_authors or self._vocab.naming(q.proper, named, own=True):
                picked = self._vocab.naming(q.proper, named)
                proper = tuple(w for w in q.proper if w not in picked)
            for name in (*q.names, *proper):
                if not any(mentions_name(t, name, words) for t in texts):
                    return name
        # "Which LLM does X use?" asks for a name, which an abstract that writes none but its
        # own cannot give. Only for papers named by their own names or their authors, not by
        # chance capitals.
        if (
            asked
            and q.which
            and own
            and not any(self._vocab.names_written(p, q.which) for p in own)
        ):
            return f"which {q.which}"
        # How large a result is, of papers whose abstracts give no figure at all.
        if asked and q.figure and named and not any(states_figure(t) for t in written):
            return "a figure"
        # A result whose figure none of them gives ("what error rate does X reach?"). A
        # benchmark the result is on ("how much does X gain on UnlearnCanvas?") is no metric.
        measured = q.measured
        if asked and measured:
            benchmarks = {
                n
                for p in about
                for n in set(self._vocab.names_written(p.id, "benchmark"))
                - set(self._vocab.names_written(p.id, "metric"))
            }
            measured = tuple(m for m in measured if m not in benchmarks)
        if asked and measured and not any(states_value(t, measured) for t in written):
            return " ".join(measured)
        return ""

    def _false_premise(self, q: Query, pid: str) -> tuple[str, bool]:
        """A topic the question asks of the one paper it names ("how does X use
        reinforcement learning?") that the paper's title and abstract never say, in any
        form, and to which the paper is not among the nearest papers: as many as say it,
        and at least a search's first page. A paper that stands among them is about the
        topic in other words ("optimisation" of a paper on a new step-size rule), not a
        premise it fails to bear. Comparisons and yes/no
        questions bring other topics up to set against it. Also a word the question asserts
        that the paper writes only to deny it (then True: "without fine-tuning")."""
        paper = self.papers[pid]
        text = f"{paper.title} {paper.abstract}"
        # What the question asserts of the paper that the paper writes only to deny it
        # ("how does X fine-tune ...?" of "... without fine-tuning").
        # Only where it speaks of its own work: it may well write that the work it improves
        # on fine-tunes.
        asserted = [w for w in q.topical if w not in GENERIC_WORDS]
        if denied := denied_only(self._vocab.about_itself(pid), asserted, q.text):
            return denied, True
        # A figure it states of the paper ("why ... 90% accuracy?") that the abstract never
        # gives of the same thing.
        for figure in q.figures:
            if not states_figure_of(text, figure):
                return figure.written, False
        topic = self.topics.unsaid(q.text, text)
        if not topic or not self.index.count_chunks():
            return "", False
        saying = len(self._mentioning([self.topics.needed(topic)]))
        nearest = max(saying, self.index.settings.search.k)
        vector = self.index.query_model.get_query_embedding(topic)
        return ("" if pid in self.index.nearest_papers(vector, nearest) else topic), False

    def _abstention_check(
        self,
        q: Query,
        vector: list[float],
        dense: list[Ranked],
        sparse: list[Ranked],
        first_ids: list[str],
    ) -> abstain.Decision:
        """rag.abstain's decision on a topical question, from its signals."""
        policy = self.abstention
        lacking = unknown = None
        sweep: list[float] = []
        texts: list[str] = []
        if self.index.settings.search.topic_check:
            texts = [f"{self.papers[pid].title} {self.papers[pid].abstract}" for pid in first_ids]

            def lacking(cutoff: float) -> str | None:
                topics = abstain.topics_at(self.topics, cutoff)
                return topics.unmentioned(
                    q.topic_text,
                    vector,
                    texts,
                    q.spells_topics,
                    joined=q.joins_topics,
                    advice=q.asks is Asks.RECOMMEND,
                )

            def unknown() -> str | None:
                return q.unknown_name

            if policy.recording:
                sweep = abstain.near_cutoffs(self.topics, vector)
        signals = abstain.measure(
            [d[1] for d in dense],
            [d[1] for d in sparse],
            lacking,
            policy.near_topic,
            unknown,
            sweep,
        )
        decision = policy.decide(signals)
        # Reading advice may name its field amid much about the asker, which lowers every
        # score: a close paper writing that field, a known topic, answers it.
        advice = q.asks is Asks.RECOMMEND
        if decision.abstain and advice and self.topics.field_written(q.topic_text, vector, texts):
            return abstain.Decision(False, "", decision.signals | {"field_written": 1.0})
        if decision.abstain and self._writes_topic(q, first_ids):
            # A paper that writes the question's whole topic word for word is about it,
            # however little the rest of the wording ("anything on X for me?") lets it score.
            return abstain.Decision(False, "", decision.signals | {"topic_written": 1.0})
        return decision

    def _writes_topic(self, q: Query, ids: list[str]) -> str:
        """The first of `ids` whose title or abstract writes the question's topical words
        in a row, in any form, when the question names nothing no paper contains. A known
        topic is written as its papers write it ("unlearning" for "machine unlearning")."""
        # Generic words ("uses", "method") are no part of a topic's run, as in rag.topics.
        asked = list(self.topics.needed(" ".join(q.topical))) or [
            stem(w) for w in q.topical if w not in GENERIC_WORDS
        ]
        if not asked or q.unknown_name:
            return ""
        for pid in ids:
            p = self.papers[pid]
            if contains(stems(f"{p.title}. {p.abstract}"), asked) >= 0:
                return pid
        return ""

    def _every_mention(
        self,
        q: Query,
        topics: list[tuple[str, ...]],
        hits: list[Hit],
        allowed: set[str] | None,
        fused: dict[str, float],
        passages: dict[str, tuple[float, str]],
    ) -> tuple[list[Hit], int]:
        """A question for *all* papers on a topic: the ranked hits as they stand (a paper
        about the topic in other words may be among them), then every other paper whose
        title or abstract mentions each topic it names. Returns the hits and
        how many papers mention the topics."""
        mentioning = self._mentioning(topics)
        if allowed is not None:
            mentioning = {pid: w for pid, w in mentioning.items() if pid in allowed}
        # The ranked hits that mention the topics are matches too ("topic" among their reasons).
        first = [
            Hit(h.paper, h.score, h.passage, (*h.matched, "topic"))
            if h.paper.id in mentioning and "topic" not in h.matched
            else h
            for h in hits
        ]
        rest = set(mentioning) - {h.paper.id for h in first}
        if rest:
            # The papers that say the topic's words most often first.
            said = {w for needed in topics for w in needed}
            count = {pid: sum(w in said for w in mentioning[pid]) for pid in rest}
            for pid in sorted(rest, key=lambda p: (-count[p], p)):
                passage = passages.get(pid, (0.0, _lead(self.papers[pid].abstract)))[1]
                score = round(fused.get(pid, 0.0), 6)
                first.append(Hit(self.papers[pid], score, passage, ("topic",)))
        return first, len(mentioning)

    def _writes_all(self, pid: str, words: str) -> bool:
        """Whether the paper's title and abstract write each of `words`, in any form."""
        p = self.papers[pid]
        said = set(stems(f"{p.title} {p.abstract}"))
        # A compound counts written whole or apart ("finetuning", "fine-tuning").
        return all(stem(w.replace("-", "")) in said or set(stems(w)) <= said for w in tokens(words))

    def _described(self, q: Query, allowed: set[str] | None) -> str:
        """The paper a "the <description> paper" question is about: the first for the
        description alone, by both legs, so the rest of the question (a premise it may
        fail) does not pick it."""
        if not q.described:
            return ""
        text = q.described
        dense = self._dense(text, self.index.query_model.get_query_embedding(text), 40, allowed)
        fused = _fuse(dense, self._sparse(text, 40, allowed), LEG_WEIGHTS["bm25"])
        return max(fused, key=lambda pid: fused[pid]) if fused else ""

    def _written_runs(self, q: Query) -> dict[tuple[str, ...], str]:
        """Topics the background list lacks, from the collection's own text: the longest runs
        of two or more of the question's topical words in a row that some paper writes
        together ("quantum annealing"), their stems to their wording."""
        topical = set(q.topical)
        runs: list[list[str]] = [[]]
        for w in q.words:
            if w in topical:
                runs[-1].append(w)
            elif runs[-1]:
                runs.append([])
        out: dict[tuple[str, ...], str] = {}
        for run in runs:
            taken: set[int] = set()
            for size in range(len(run), 1, -1):
                for i in range(len(run) - size + 1):
                    if taken & set(range(i, i + size)):
                        continue
                    needed = self.topics.needed_stems(" ".join(run[i : i + size]))
                    if len(needed) > 1 and self._mentioning([needed]):
                        out[needed] = " ".join(run[i : i + size])
                        taken |= set(range(i, i + size))
        return out

    def _mentioning(self, topics: list[tuple[str, ...]]) -> dict[str, list[str]]:
        """Papers whose title and abstract mention every one of `topics` (rag.topics), with
        the stems of their text: candidates from BM25's inverted index (same stemmer), then
        the words-together test."""
        candidates: set[str] | None = None
        for needed in topics:
            ids = self._papers_with(needed)
            candidates = ids if candidates is None else candidates & ids
        out = {}
        for pid in candidates or set():
            p = self.papers[pid]
            words = self.topics.text_stems(f"{p.title} {p.abstract}")
            if self.topics.mentioned_in(topics, words) == len(topics):
                out[pid] = words
        return out

    def _papers_with(self, stems: tuple[str, ...]) -> set[str]:
        """Papers that have every one of `stems` somewhere in their chunks."""
        bm25 = self._bm25
        if bm25 is None or bm25.corpus is None or not stems:
            return set()
        indptr, indices = bm25.scores["indptr"], bm25.scores["indices"]
        out: set[str] | None = None
        for word in stems:
            tid = bm25.vocab_dict.get(word)
            if tid is None:
                return set()
            docs = indices[indptr[tid] : indptr[tid + 1]]
            ids = {str(bm25.corpus[int(d)]["paper_id"]) for d in docs}
            out = ids if out is None else out & ids
        return out or set()

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


# Words any abstract may use whatever its topic ("propose", "introduce", "method").
_NOT_TOPICAL = GENERIC_WORDS | CONTRIBUTION_VERBS


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
