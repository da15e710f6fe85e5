"""Stores papers as embedded chunks in Chroma, incrementally.

Layout of RAG_HOME:
    chroma/          embedded Chroma store (unused when RAG_CHROMA_HOST is set)
    catalog.sqlite   which records each source file gave (see rag.catalog)
    bm25/<name>/     the BM25 index of the collection, rebuilt from Chroma when out of step
    ingest.lock      held while an ingest runs
    broken-<time>/   damaged parts that `ingest --repair` moved aside

Crash safety: an ingest first commits what the sources say to the catalog (with the papers
that must leave the store), then brings Chroma in step with the catalog, then BM25 with
Chroma. Each step can be killed at any point and the next ingest finishes the job: it
re-embeds papers that are missing or incomplete in the store, removes those still listed
for removal, and rebuilds BM25, whose state is withdrawn before the store is touched.
Last, it writes the collection's version (VERSION_KEY), which the question side compares
before each question to notice ingests made from other processes and machines.

A paper's chunks carry all of its metadata, and chunk 0 also its whole abstract, so the
question side needs nothing but the Chroma collection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag.catalog import Catalog, record_key, source_file
from rag.corpus import Paper, merge_records, read_records, source_name
from rag.embed import load_embedding, load_tokenizer, model_identity
from rag.faults import checkpoint
from rag.integrity import check_sqlite, check_store
from rag.settings import PROJECT_ROOT, Settings, fingerprint
from rag.store import (
    DAMAGE_SIGNS,
    REPAIR,
    IndexBusy,
    IndexDamaged,
    IndexError_,
    ServerLock,
    StoreTimeout,
    StoreUnavailable,
    damaged_store,
    make_client,
    store_name,
    timed_out,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import BaseNode, TextNode

# Bump when the text given to the embedding model, or the chunk layout, changes shape.
TEXT_FORMAT_VERSION = 1
LIST_SEP = "; "
# Saved with the BM25 index: every paper's chunk-0 metadata, and every chunk's vector with
# its paper's id, for a fast cold start.
PAPERS_FILE = "papers.json"
VECTORS_FILE = "vectors.npy"
VECTOR_IDS_FILE = "vector_ids.json"
# A full read of 6,000 chunks from a `chroma run` server takes about 2 s; pages of this size
# take about 0.6 s each (well inside the default RAG_CHROMA_TIMEOUT of 5 s).
READ_PAGE = 2000
# The collection's metadata key that every ingest advances, written last: a hash of every
# chunk's id and content, so processes that did not ingest see that the store moved.
VERSION_KEY = "rag_version"

log = logging.getLogger(__name__)


@dataclass
class IngestSummary:
    read: int = 0
    papers: int = 0
    new: int = 0
    changed: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    stale: int = 0
    repaired: list[str] = field(default_factory=list)
    chunks_embedded: int = 0
    total_papers: int = 0
    total_chunks: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    estimate_seconds: float | None = None
    collection: str = ""
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        lines = [
            f"read {self.read} records -> {self.papers} papers: {self.new} new, "
            f"{self.changed} changed, {self.updated} metadata-only, {self.unchanged} unchanged, "
            f"{self.removed} removed",
            f"embedded {self.chunks_embedded} chunks in {self.embed_seconds:.1f}s "
            + (
                f"(estimated {self.estimate_seconds:.0f}s) "
                if self.estimate_seconds is not None
                else ""
            )
            + f"(total {self.seconds:.1f}s); index {self.collection}: "
            f"{self.total_papers} papers, {self.total_chunks} chunks",
        ]
        if self.repaired:
            lines.insert(0, "repaired: " + "; ".join(self.repaired))
        if self.stale:
            lines.append(
                f"{self.stale} papers are no longer in their source files; "
                "run with --prune to remove them"
            )
        if self.problems:
            lines.append(f"{len(self.problems)} problems (skipped):")
            lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)


@dataclass(frozen=True)
class Snapshot:
    """What questions read of one version of the store (PaperIndex.snapshot)."""

    version: str
    papers: list[Paper]
    content: dict[str, str]  # paper id -> content hash, which its chunks' metadata carries
    bm25: Any  # a bm25s.BM25 over every chunk, or None for an empty store
    # Every chunk's unit vector, and its paper's id: the relevance model needs each
    # candidate's cosine and where it stands among the whole collection's.
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    vector_ids: list[str] = field(default_factory=list)


@dataclass
class _StoreRead:
    nodes: list[BaseNode] = field(default_factory=list)
    chunk0: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str = ""
    vectors: list[Any] = field(default_factory=list)
    vector_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Hit:
    """A paper found by a search, with its best-matching passage."""

    paper: Paper
    score: float
    passage: str
    matched: tuple[str, ...] = ("dense",)


# Jobs of at least this many chunks get a time estimate, timed on a block of PROBE_CHUNKS.
ESTIMATE_FROM_CHUNKS = 500
PROBE_CHUNKS = 64


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def collection_name(settings: Settings) -> str:
    """Derived from everything that shapes the vectors, so vectors of two setups never mix."""
    shape = {
        "model": model_identity(settings.embed),
        "max_length": settings.embed.max_length,
        "chunk": [settings.chunk.size, settings.chunk.overlap],
        "text": TEXT_FORMAT_VERSION,
    }
    return f"{settings.chroma.collection_prefix}_{fingerprint(shape)}"


def _flat(paper: Paper, chunk: int, n_chunks: int, content_hash: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "paper_id": paper.id,
        "display_name": paper.display_name,
        "title": paper.title,
        "authors": LIST_SEP.join(paper.authors),
        "first_author": paper.first_author,
        "authors_truncated": paper.authors_truncated,
        "track": paper.track,
        "area": paper.area,
        "subarea": paper.subarea,
        "venue": paper.venue,
        "url": paper.url,
        "year": paper.year or 0,
        "keywords": LIST_SEP.join(paper.keywords),
        "sources": LIST_SEP.join(paper.sources),
        "aliases": LIST_SEP.join(paper.aliases),
        "names": LIST_SEP.join(paper.names),
        "chunk": chunk,
        "n_chunks": n_chunks,
        "content_hash": content_hash,
        "embed_hash": "",
    }
    if chunk == 0:
        meta["abstract"] = paper.abstract
    return meta


def paper_from_metadata(meta: dict[str, Any]) -> Paper:
    def split(key: str) -> tuple[str, ...]:
        value = meta.get(key) or ""
        return tuple(v for v in str(value).split(LIST_SEP) if v)

    sources = split("sources")
    return Paper(
        id=str(meta["paper_id"]),
        abstract=str(meta.get("abstract", "")),
        title=str(meta.get("title", "")),
        authors=split("authors"),
        authors_truncated=bool(meta.get("authors_truncated", False)),
        track=str(meta.get("track", "")),
        venue=str(meta.get("venue", "")),
        url=str(meta.get("url", "")),
        year=int(meta["year"]) if meta.get("year") else None,
        keywords=split("keywords"),
        source=sources[0] if sources else "",
        sources=sources,
        aliases=split("aliases"),
        display_name=str(meta.get("display_name", "")),
        names=split("names"),
    )


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class PaperIndex:
    """The Chroma collection for the configured embedding model and chunking."""

    def __init__(
        self,
        settings: Settings | None = None,
        embed_model: BaseEmbedding | None = None,
        client: ClientAPI | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.name = collection_name(self.settings)
        self._embed_model = embed_model
        self._client = client
        self._collection: Collection | None = None
        self._splitter: Any = None
        # After a request timed out, questions fail at once for one more timeout: a page
        # whose users queue behind a silent server tells each of them in seconds, not minutes.
        self._quiet_until = 0.0
        self._server_lock: ServerLock | None = None
        self.read_page = READ_PAGE

    # ------------------------------------------------------------------ plumbing

    @property
    def client(self) -> ClientAPI:
        if self._client is None:
            if not self.settings.chroma.host:
                self.check_store()
            try:
                self._client = make_client(self.settings)
            except StoreTimeout:
                self._quiet_until = time.monotonic() + self.settings.chroma.timeout
                raise
        return self._client

    def check_store(self, thorough: bool = False) -> None:
        """Refuse a damaged embedded store before chromadb opens it (it may crash or hang)."""
        problems = check_store(self.settings.home / "chroma", thorough)
        if problems:
            raise damaged_store(self.settings.home, "; ".join(problems))

    @property
    def collection(self) -> Collection:
        if self._collection is None:
            self._collection = self._open_collection()
        return self._collection

    def _open_collection(self) -> Collection:
        """The collection, looked up (or created) on the store: one request to a server."""
        client = self.client  # raises its own StoreUnavailable
        with self.reaching_store():
            try:
                return client.get_or_create_collection(
                    self.name,
                    embedding_function=None,  # we always pass vectors; the default downloads
                    metadata={
                        "hnsw:space": "cosine",
                        "embed_model": Path(self.settings.embed.model).name,
                        "chunk_size": self.settings.chunk.size,
                    },
                )
            except (KeyboardInterrupt, SystemExit):
                raise
            except IndexError_:
                raise
            except BaseException as err:  # as in make_client: errors and Rust panics
                if _transport_error(err):
                    raise  # reaching_store says the server cannot be reached
                if not self.settings.chroma.host and DAMAGE_SIGNS.search(str(err)):
                    raise damaged_store(self.settings.home, str(err)) from err
                raise StoreUnavailable(
                    f"cannot open collection {self.name} in {store_name(self.settings)}: {err}"
                ) from err

    def _current_collection(self) -> Collection:
        """The collection as the store has it now, read without writing (an embedded
        store's get-or-create takes the write lock an ingest in another process holds)."""
        from chromadb.errors import NotFoundError

        client = self.client
        with self.reaching_store():
            try:
                return client.get_collection(self.name, embedding_function=None)
            except NotFoundError:
                pass  # created below: an empty index
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:
                if _transport_error(err):
                    raise
                # anything else is diagnosed (damage, a Rust panic) where it is opened
        return self._open_collection()

    def store_version(self, background: bool = False) -> str:
        """The version the last finished ingest wrote on the collection ("" before one did).

        One small request; questions ask it first, so it is also where a server that has
        just timed out on a question is reported without waiting again. A `background` check
        (the page's own) neither waits for that nor starts it: no user is waiting on it, and
        a server still starting up would otherwise turn away the first questions after it.
        """
        if not background and time.monotonic() < self._quiet_until:
            raise timed_out(self.settings)
        quiet = self._quiet_until
        try:
            fresh = self._current_collection()
        except StoreTimeout:
            if background:
                self._quiet_until = quiet
            raise
        self._quiet_until = 0.0  # it answers again
        if self._collection is None or self._collection.id != fresh.id:
            self._collection = fresh  # kept otherwise: retrievers built on the handle stay
        return str((fresh.metadata or {}).get(VERSION_KEY, ""))

    @contextmanager
    def reaching_store(self) -> Iterator[None]:
        """Lost connections (a Chroma server stopped or restarting) as StoreUnavailable.

        The collection handle is dropped, so once the server is back the same objects look
        the collection up again and carry on; nothing has to be restarted.
        """
        import httpx
        from chromadb.errors import NotFoundError

        try:
            yield
        except StoreTimeout:
            self._quiet_until = time.monotonic() + self.settings.chroma.timeout
            raise
        except httpx.TimeoutException as err:
            self._collection = None
            self._quiet_until = time.monotonic() + self.settings.chroma.timeout
            raise timed_out(self.settings) from err
        except (httpx.TransportError, ConnectionError, NotFoundError) as err:
            self._collection = None
            raise StoreUnavailable(
                f"cannot reach {store_name(self.settings)}: {err or type(err).__name__}"
            ) from err

    @property
    def embed_model(self) -> BaseEmbedding:
        if self._embed_model is None:
            self._embed_model = load_embedding(self.settings.embed)
        return self._embed_model

    @property
    def query_model(self) -> BaseEmbedding:
        """The model for questions: the one ingest uses (ONNX Runtime loads in a fraction of a
        second and imports no torch, so a one-off question needs no lighter stand-in)."""
        return self.embed_model

    @property
    def splitter(self) -> Any:
        if self._splitter is None:
            from llama_index.core.node_parser import SentenceSplitter

            tokenizer = load_tokenizer(self.settings.embed)
            self._splitter = SentenceSplitter(
                chunk_size=self.settings.chunk.size,
                chunk_overlap=self.settings.chunk.overlap,
                # Count in the embedding model's own tokens, with room for [CLS]/[SEP].
                tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False),
            )
        return self._splitter

    def _get_all(self, include: list[str], where: dict[str, Any] | None = None) -> dict[str, Any]:
        """`collection.get` of everything, in pages of READ_PAGE chunks, so that each request
        to a server stays well inside RAG_CHROMA_TIMEOUT at any collection size."""
        got: dict[str, Any] = {"ids": [], **{k: [] for k in include}}
        while True:
            page = self.collection.get(
                include=include,  # type: ignore[arg-type]
                where=where,
                limit=self.read_page,
                offset=len(got["ids"]),
            )
            got["ids"] += page["ids"]
            for key in include:
                part = page[key]  # type: ignore[literal-required]
                got[key] += [] if part is None else list(part)  # embeddings: an array
            if len(page["ids"]) < self.read_page:
                return got

    def count_chunks(self) -> int:
        with self.reaching_store():
            return int(self.collection.count())

    # ------------------------------------------------------------------ chunking

    def chunk_texts(self, paper: Paper) -> list[str]:
        if paper.title:
            # The title is embedded with every chunk, so it takes from each chunk's budget.
            return list(self.splitter.split_text_metadata_aware(paper.abstract, paper.title))
        return list(self.splitter.split_text(paper.abstract))

    def nodes_for(self, paper: Paper) -> list[TextNode]:
        """The paper's chunks as LlamaIndex nodes; only the title joins the embedded text."""
        from llama_index.core.schema import MetadataMode, TextNode

        chunks = self.chunk_texts(paper)
        content_hash = _hash(paper.to_dict())
        nodes = []
        for i, text in enumerate(chunks):
            meta = _flat(paper, i, len(chunks), content_hash)
            hidden = [k for k in meta if k != "title" or not paper.title]
            nodes.append(
                TextNode(
                    id_=f"{paper.id}#{i}",
                    text=text,
                    metadata=meta,
                    excluded_embed_metadata_keys=hidden,
                    excluded_llm_metadata_keys=hidden,
                    metadata_template="{value}",
                    text_template="{metadata_str}\n{content}",
                )
            )
        embed_hash = _hash([n.get_content(MetadataMode.EMBED) for n in nodes])
        for node in nodes:
            node.metadata["embed_hash"] = embed_hash
        return nodes

    # ------------------------------------------------------------------ reading the store

    def indexed_state(self) -> dict[str, dict[str, Any]]:
        """paper_id -> {chunk ids, chunk count, embed and content hashes} of what is stored."""
        state: dict[str, dict[str, Any]] = {}
        got = self._get_all(["metadatas"])
        for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
            pid = str(meta.get("paper_id", cid.split("#")[0]))
            entry = state.setdefault(
                pid, {"ids": [], "hashes": set(), "content": set(), "files": set()}
            )
            entry["ids"].append(cid)
            entry["files"].update(
                s.rsplit(":", 1)[0] for s in str(meta.get("sources") or "").split(LIST_SEP) if s
            )
            entry["hashes"].add(meta.get("embed_hash"))
            entry["content"].add(meta.get("content_hash"))
            entry["n"] = int(str(meta.get("n_chunks") or 0))
        return state

    def papers(self, where: dict[str, Any] | None = None) -> list[Paper]:
        """Every indexed paper (or those matching a Chroma `where`), from chunk 0 metadata."""
        if where is None:
            snapshot = self._papers_snapshot()
            if snapshot is not None:
                return snapshot
        clause: dict[str, Any] = {"chunk": 0}
        if where:
            clause = {"$and": [clause, where]}
        with self.reaching_store():
            got = self._get_all(["metadatas"], where=clause)
        papers = [paper_from_metadata(dict(m)) for m in got["metadatas"] or []]
        return sorted(papers, key=lambda p: p.id)

    # ------------------------------------------------------------------ ingest

    def ingest(
        self,
        paths: Sequence[Path],
        prune: bool = False,
        progress: bool | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        repair: bool = False,
    ) -> IngestSummary:
        """Bring the index in step with `paths`; embeds only new or changed chunks.

        With `repair`, damaged parts of the index folder are first moved aside and rebuilt.
        """
        from filelock import FileLock, Timeout

        started = time.perf_counter()
        home = self.settings.home
        home.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(home / "ingest.lock"))
        try:
            lock.acquire(timeout=self.settings.ingest.lock_timeout)
        except Timeout as err:
            owner = _read_owner(home)
            raise IndexBusy(
                f"another ingest is running on {home}{owner}; waited "
                f"{self.settings.ingest.lock_timeout:.0f}s (RAG_INGEST_LOCK_TIMEOUT). "
                "Try again when it has finished."
            ) from err
        try:
            # A killed holder leaves this file behind, but not the lock: flock dies with it.
            (home / "ingest.owner").write_text(f"{os.getpid()} {time.time():.0f}\n")
            checkpoint("ingest.locked")
            repaired = self._move_damaged_aside() if repair else []
            # Before reading any source: a damaged index stops the run at once.
            if not self.settings.chroma.host and self._client is None:
                self.check_store(thorough=True)
            self._check_catalog()
            with self.reaching_store():
                if self.settings.chroma.host:
                    self._server_lock = ServerLock(
                        self.client,
                        self.name,
                        self.settings.chroma.lock_ttl,
                        store_name(self.settings),
                    )
                    self._server_lock.acquire(self.settings.ingest.lock_timeout)
                    checkpoint("ingest.server_locked")
                summary = self._ingest_locked(paths, prune, progress, on_progress)
            summary.repaired = repaired
        finally:
            if self._server_lock is not None:
                self._server_lock.release()
                self._server_lock = None
            lock.release()
        summary.seconds = time.perf_counter() - started
        return summary

    def _ingest_locked(
        self,
        paths: Sequence[Path],
        prune: bool,
        progress: bool | None,
        on_progress: Callable[[int, int], None] | None,
    ) -> IngestSummary:
        summary = IngestSummary(collection=self.name)
        limits = {
            "max_abstract_chars": self.settings.ingest.max_abstract_chars,
            "max_file_bytes": self.settings.ingest.max_file_bytes,
        }
        result = read_records(paths, root=PROJECT_ROOT, **limits)
        summary.read = len(result.papers)
        summary.problems = [str(p) for p in result.problems]
        summary.papers = len({rec.key for rec in result.papers})  # distinct abstracts read

        catalog = self._open_catalog()
        try:
            catalog.begin()
            seen: dict[str, set[str]] = {}
            for rec in result.papers:
                seen.setdefault(source_file(rec), set()).add(record_key(rec))
            for path in result.files:
                seen.setdefault(source_name(path, PROJECT_ROOT), set())
            known_files = catalog.files() | set(seen)
            covered = self._covered_files(paths, catalog.files())
            stale_keys = {f: catalog.keys(f) - seen.get(f, set()) for f in covered | set(seen)}
            catalog.upsert(result.papers)
            if prune:
                for f, keys in stale_keys.items():
                    catalog.delete(f, keys)
            papers = merge_records(catalog.records())
            if not prune:
                summary.stale = sum(len(keys) for keys in stale_keys.values())
            state = self.indexed_state()
            wanted = {p.id for p in papers}
            aliases = {a for p in papers for a in p.aliases}
            # Stored papers that are not wanted: re-keyed (now an alias of a merged paper)
            # always go; others only when pruning, since another source may still be
            # ingested later, and only if they came from files this catalog knows (on a
            # shared server, other machines' papers are not this run's to remove). They are
            # recorded with the catalog, so that a run killed before deleting them all is
            # finished by the next run, --prune or not.
            catalog.add_removals(
                pid
                for pid in state
                if pid not in wanted
                and (pid in aliases or (prune and state[pid]["files"] <= known_files))
            )
            catalog.commit()
            checkpoint("catalog.committed")
            gone = sorted(pid for pid in catalog.removals() if pid not in wanted)
            self._sync(papers, state, gone, summary, progress, on_progress)
            count, version = self._store_fingerprint()
            self._refresh_bm25(count, version)
            self._write_version(version)
            checkpoint("ingest.synced")
            catalog.clear_removals()
        except BaseException:
            catalog.rollback()
            raise
        finally:
            catalog.close()
        summary.total_papers = len(papers)
        summary.total_chunks = self.count_chunks()
        return summary

    def _check_catalog(self) -> None:
        path = self.settings.home / "catalog.sqlite"
        problem = check_sqlite(path)
        if problem:
            raise IndexDamaged(
                f"the catalog {path} is damaged: {problem}. Repair it with `{REPAIR}` "
                "[PATH ...]: it moves the catalog aside (nothing is deleted) and rebuilds it "
                "from the files that run reads; give it every source you had ingested."
            )

    def _open_catalog(self) -> Catalog:
        path = self.settings.home / "catalog.sqlite"
        try:
            return Catalog(path)
        except sqlite3.DatabaseError as err:
            msg = f"the catalog {path} cannot be opened: {err}. Run `{REPAIR}`."
            raise IndexDamaged(msg) from err

    def _move_damaged_aside(self) -> list[str]:
        """Move damaged parts of the index folder to broken-<time>/; say what moved."""
        home = self.settings.home
        damaged: list[tuple[Path, str]] = []
        if not self.settings.chroma.host:
            problems = check_store(home / "chroma", thorough=True)
            if problems:
                damaged.append((home / "chroma", "; ".join(problems)))
        catalog = home / "catalog.sqlite"
        problem = check_sqlite(catalog)
        if problem:
            for suffix in ("", "-wal", "-shm"):
                part = catalog.with_name(catalog.name + suffix)
                if part.exists():
                    damaged.append((part, problem))
        if not damaged:
            return []
        broken = home / f"broken-{time.strftime('%Y%m%d-%H%M%S')}"
        n = 1
        while broken.exists():
            n += 1
            broken = home / f"broken-{time.strftime('%Y%m%d-%H%M%S')}-{n}"
        broken.mkdir()
        moved = []
        for path, why in damaged:
            path.rename(broken / path.name)
            moved.append(f"moved {path.name} ({why}) to {broken}")
        self._client, self._collection = None, None
        return moved

    @staticmethod
    def _covered_files(paths: Sequence[Path], known: set[str]) -> set[str]:
        """Known source files that this run speaks for: read now, or gone from a named place."""
        covered: set[str] = set()
        for path in paths:
            name = source_name(path, PROJECT_ROOT)
            for f in known:
                inside = f == name or f.startswith(name.rstrip("/") + "/")
                if inside and not (PROJECT_ROOT / f).exists():
                    covered.add(f)
        return covered

    def _sync(
        self,
        papers: list[Paper],
        state: dict[str, dict[str, Any]],
        gone: list[str],
        summary: IngestSummary,
        progress: bool | None,
        on_progress: Callable[[int, int], None] | None,
    ) -> None:
        to_embed: list[tuple[Paper, list[TextNode]]] = []
        to_update: list[TextNode] = []
        for paper in papers:
            have = state.get(paper.id)
            if have is None:
                summary.new += 1
                to_embed.append((paper, self.nodes_for(paper)))
                continue
            complete = len(have["ids"]) == have["n"]
            if complete and have["content"] == {_hash(paper.to_dict())}:
                summary.unchanged += 1  # the common case: no chunking, no hashing of chunks
                continue
            nodes = self.nodes_for(paper)
            same_vectors = have["hashes"] == {nodes[0].metadata["embed_hash"]} and sorted(
                have["ids"]
            ) == sorted(n.node_id for n in nodes)
            if same_vectors:
                summary.updated += 1
                to_update.extend(nodes)
            else:
                summary.changed += 1
                to_embed.append((paper, nodes))

        gone = [pid for pid in gone if pid in state]
        if gone or to_update or to_embed:
            self._check_server_lock()
            self._withdraw_bm25()
        if gone:
            self.collection.delete(ids=[cid for pid in gone for cid in state[pid]["ids"]])
            summary.removed = len(gone)
            checkpoint("store.removed")

        if to_update:
            for batch in _batches(to_update, self.settings.ingest.write_batch_chunks):
                self._check_server_lock()
                self.collection.update(
                    ids=[n.node_id for n in batch], metadatas=[_store_meta(n) for n in batch]
                )
                checkpoint("store.updated")
        self._embed_and_write(to_embed, state, summary, progress, on_progress)

    def _embed_and_write(
        self,
        items: list[tuple[Paper, list[TextNode]]],
        state: dict[str, dict[str, Any]],
        summary: IngestSummary,
        progress: bool | None,
        on_progress: Callable[[int, int], None] | None,
    ) -> None:
        if not items:
            return
        from llama_index.core.schema import MetadataMode
        from llama_index.vector_stores.chroma import ChromaVectorStore
        from tqdm import tqdm

        store = ChromaVectorStore(chroma_collection=self.collection)
        # Length-sorted batches: padding is what the model wastes time on.
        items.sort(key=lambda item: sum(len(n.text) for n in item[1]))
        total = len(items)
        done = 0
        bar = tqdm(
            total=total,
            unit="paper",
            desc="embedding",
            disable=not progress if progress is not None else None,
            file=sys.stderr,
        )
        embed_started = time.perf_counter()
        estimate, probed = self._estimate(items)
        if estimate is not None:
            summary.estimate_seconds = round(estimate, 1)
            if progress is not False:
                name = model_identity(self.settings.embed).get("name", self.settings.embed.model)
                chunks = sum(len(nodes) for _, nodes in items)
                tqdm.write(
                    f"embedding {total:,} papers ({chunks:,} chunks) with {name}: about "
                    f"{_duration(estimate)} on this machine",
                    file=sys.stderr,
                )
        try:
            limit = self.settings.ingest.write_batch_chunks
            for batch in _batches(items, limit, size=lambda it: len(it[1])):
                nodes = [n for _, nodes in batch for n in nodes]
                texts = [n.get_content(MetadataMode.EMBED) for n in nodes]
                # The estimate's probe block was embedded already: its vectors are kept.
                need = [t for t in dict.fromkeys(texts) if t not in probed]
                fresh = dict(
                    zip(need, self.embed_model.get_text_embedding_batch(need), strict=True)
                )
                vectors = [probed[t] if t in probed else fresh[t] for t in texts]
                checkpoint("embed.batch")
                for node, vec in zip(nodes, vectors, strict=True):
                    node.embedding = vec
                # A kill between the delete and the add leaves these papers absent from the
                # store, and the next run embeds them as new.
                old = [cid for p, _ in batch for cid in state.get(p.id, {}).get("ids", [])]
                self._check_server_lock()
                if old:
                    self.collection.delete(ids=old)
                    checkpoint("store.deleted")
                store.add(nodes)
                checkpoint("store.added")
                summary.chunks_embedded += len(nodes)
                done += len(batch)
                bar.update(len(batch))
                if on_progress:
                    on_progress(done, total)
        finally:
            bar.close()
            summary.embed_seconds = time.perf_counter() - embed_started

    def _estimate(
        self, items: list[tuple[Paper, list[TextNode]]]
    ) -> tuple[float | None, dict[str, list[float]]]:
        """Seconds the embedding will take, from timing a block of typical chunks (a job too
        small to need an estimate gets none), and the block's vectors."""
        from llama_index.core.schema import MetadataMode

        texts = [n.get_content(MetadataMode.EMBED) for _, nodes in items for n in nodes]
        if len(texts) < ESTIMATE_FROM_CHUNKS:
            return None, {}
        # Every n-th chunk: the probe has the job's mix of lengths (long chunks cost more per
        # character: attention grows with the square of the length).
        probe = list(dict.fromkeys(texts[:: max(1, len(texts) // PROBE_CHUNKS)]))
        started = time.perf_counter()
        vectors = self.embed_model.get_text_embedding_batch(probe)
        seconds = time.perf_counter() - started
        estimate = seconds * sum(map(len, texts)) / max(1, sum(map(len, probe)))
        return estimate, dict(zip(probe, vectors, strict=True))

    # ------------------------------------------------------------------ BM25 beside Chroma

    @property
    def model_key(self) -> str:
        """What makes this index's vectors comparable: the embedding model and its length."""
        embed = self.settings.embed
        return fingerprint({"model": model_identity(embed), "max_length": embed.max_length})

    @property
    def bm25_dir(self) -> Path:
        return self.settings.home / "bm25" / self.name

    def _store_fingerprint(self) -> tuple[int, str]:
        got = self._get_all(["metadatas"])
        return len(got["ids"]), _store_hash(got["ids"], got["metadatas"])

    def _bm25_state(self, verify: bool = False) -> dict[str, Any] | None:
        """The persisted BM25 index's state, if it is whole: every file at its written size
        (cheap, for readers) and, with `verify`, with its written content (for ingest)."""
        folder = self.bm25_dir
        try:
            state = json.loads((folder / "state.json").read_text())
            for name, (size, digest) in state["files"].items():
                if (folder / name).stat().st_size != size:
                    return None
                if verify and _file_hash(folder / name) != digest:
                    return None
            return dict(state)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _withdraw_bm25(self) -> None:
        """The store is about to change: the persisted BM25 must not claim to match it."""
        (self.bm25_dir / "state.json").unlink(missing_ok=True)

    def _check_server_lock(self) -> None:
        if self._server_lock is not None:
            self._server_lock.check()

    def _write_version(self, version: str) -> None:
        """Advance the collection's version to what the store now holds; the last write."""
        collection = self._open_collection()
        meta = dict(collection.metadata or {})
        if meta.get(VERSION_KEY) == version:
            return
        self._check_server_lock()
        # Chroma replaces the whole metadata, and refuses to be handed the distance again
        # (it stays in the collection's configuration).
        meta = {k: v for k, v in meta.items() if not k.startswith("hnsw:")}
        collection.modify(metadata={**meta, VERSION_KEY: version})
        checkpoint("store.versioned")

    def refresh_bm25(self) -> bool:
        """Rebuild the persisted BM25 index when it is missing or out of step with Chroma.

        Called by ingest under its lock; returns whether it rebuilt.
        """
        return self._refresh_bm25(*self._store_fingerprint())

    def _refresh_bm25(self, count: int, fp: str) -> bool:
        for leftover in (".tmp", ".old"):  # from a run killed while swapping
            shutil.rmtree(self.bm25_dir.with_name(self.bm25_dir.name + leftover), True)
        state = self._bm25_state(verify=True)
        if (
            state
            and (state["count"], state["fingerprint"]) == (count, fp)
            # absent in folders written before they existed
            and {PAPERS_FILE, VECTORS_FILE} <= state["files"].keys()
        ):
            return False
        self._write_bm25(count, fp)
        return True

    def _saved_state(self, version: str) -> dict[str, Any] | None:
        """The BM25 index and paper list saved in this RAG_HOME, if they are of the store's
        current content: written for this version (when the collection has one; another
        machine's ingest moves it) and for as many chunks as the store holds."""
        state = self._bm25_state()
        if not state or not {PAPERS_FILE, VECTORS_FILE} <= state["files"].keys():
            return None
        if version and state["fingerprint"] != version:
            return None
        if state["count"] != self.count_chunks():
            return None
        return state

    def _papers_snapshot(self, version: str | None = None) -> list[Paper] | None:
        """Every paper from the copy of chunk-0 metadata saved with the BM25 index.

        Reading 13,000 papers' metadata back from Chroma takes seconds on every cold start
        (most of `rag.ask`'s time to its first paper); the copy is a single file read. It is
        trusted on the same terms as the BM25 index beside it: ingest withdraws both before
        it touches the store and writes both once the store is in step.
        """
        metas = self._saved_metas(self.store_version() if version is None else version)
        return None if metas is None else [paper_from_metadata(m) for m in metas]

    def _saved_metas(self, version: str) -> list[dict[str, Any]] | None:
        if self._saved_state(version) is None:
            return None
        try:
            metas = json.loads((self.bm25_dir / PAPERS_FILE).read_text(encoding="utf-8"))
            for m in metas:
                paper_from_metadata(m)  # all readable, or none used
            return list(metas)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            log.warning("the paper list in %s cannot be read (%s)", self.bm25_dir, err)
            return None

    def snapshot(self, version: str | None = None) -> Snapshot:
        """One version of what questions read besides the vectors: every paper, each one's
        content hash and the BM25 index, from the copy this RAG_HOME saved when it is of
        the store's current content, else read from the store in one request.

        `version` is the collection's version read before this call: asked first, a change
        that lands while the snapshot is read moves it again and is picked up next time.
        """
        import bm25s

        version = self.store_version() if version is None else version
        metas = self._saved_metas(version)
        bm25 = None
        vectors, vector_ids = np.zeros((0, 0), dtype=np.float32), []
        if metas is not None and metas:
            try:
                bm25 = bm25s.BM25.load(str(self.bm25_dir), load_corpus=True, show_progress=False)
                vectors = np.load(self.bm25_dir / VECTORS_FILE, allow_pickle=False)
                vector_ids = json.loads((self.bm25_dir / VECTOR_IDS_FILE).read_text("utf-8"))
                if len(vector_ids) != len(vectors):
                    raise ValueError(f"{len(vectors)} vectors for {len(vector_ids)} ids")
            except Exception as err:  # damaged inside, at the right size: read the store
                log.warning("the BM25 index in %s cannot be loaded (%s)", self.bm25_dir, err)
                metas = None
        if metas is None:
            saved = self._bm25_state()
            ingested_here = (self.settings.home / "catalog.sqlite").exists()
            elsewhere = not ingested_here or (saved and version and saved["fingerprint"] != version)
            if elsewhere:
                log.info(
                    "the collection was changed by another RAG_HOME's ingest (or this one never "
                    "ingested): reading it from %s",
                    store_name(self.settings),
                )
            else:
                log.warning(
                    "the BM25 index in %s is missing, damaged or out of date; rebuilt in "
                    "memory (`python -m rag.ingest` saves it again)",
                    self.bm25_dir,
                )
            read = self._read_store()
            built = None
            if read.nodes:
                from llama_index.retrievers.bm25 import BM25Retriever

                built = BM25Retriever.from_defaults(nodes=read.nodes)
            if elsewhere and version and read.fingerprint == version:
                # What another home's ingest wrote, saved for this home's next cold start
                # (about half of it at conference scale). Damage here is left to ingest.
                self._save_copy(read, built)
            if built is not None:
                built.bm25.corpus = built.corpus  # as a loaded index has it: results map to nodes
                bm25 = built.bm25
            metas = read.chunk0
            vectors, vector_ids = _unit(read.vectors), read.vector_ids
        metas.sort(key=lambda m: str(m.get("paper_id")))
        return Snapshot(
            version=version,
            papers=[paper_from_metadata(m) for m in metas],
            content={str(m["paper_id"]): str(m.get("content_hash", "")) for m in metas},
            bm25=bm25,
            vectors=vectors,
            vector_ids=vector_ids,
        )

    def _read_store(self) -> _StoreRead:
        """Every chunk in one request: light BM25 nodes (id, paper id, embedded text, so the
        persisted corpus stays small), chunk-0 metadata and the fingerprint of what was read."""
        from llama_index.core.schema import MetadataMode, TextNode
        from llama_index.core.vector_stores.utils import metadata_dict_to_node

        with self.reaching_store():
            got = self._get_all(["documents", "metadatas", "embeddings"])
        read = _StoreRead(fingerprint=_store_hash(got["ids"], got["metadatas"]))
        read.vectors = list(got["embeddings"])
        read.vector_ids = [str(m["paper_id"]) for m in got["metadatas"] or []]
        for cid, doc, meta in zip(
            got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
        ):
            if meta.get("chunk") == 0:
                read.chunk0.append(dict(meta))
            full = metadata_dict_to_node(dict(meta), text=doc)
            read.nodes.append(
                TextNode(
                    id_=cid,
                    text=full.get_content(MetadataMode.EMBED),
                    metadata={"paper_id": str(meta["paper_id"])},
                    excluded_embed_metadata_keys=["paper_id"],
                )
            )
        return read

    def _save_copy(self, read: _StoreRead, built: Any) -> None:
        """Save a read of the store as this home's BM25 copy, unless an ingest here is
        running (it writes its own) or the home cannot be written (then memory serves)."""
        from filelock import FileLock, Timeout

        try:
            self.settings.home.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.settings.home / "ingest.lock"))
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            return
        try:
            self._write_bm25(len(read.nodes), read.fingerprint, read, built)
        except OSError as err:
            log.info("could not save the BM25 copy in %s: %s", self.bm25_dir, err)
        finally:
            lock.release()

    def _write_bm25(
        self,
        count: int,
        fingerprint_: str,
        read: _StoreRead | None = None,
        built: Any = None,
    ) -> None:
        target = self.bm25_dir
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        read = read or (self._read_store() if count else _StoreRead())
        if read.nodes:
            from llama_index.retrievers.bm25 import BM25Retriever

            built = built or BM25Retriever.from_defaults(nodes=read.nodes)
            built.persist(str(tmp), show_progress=False)
        else:
            tmp.mkdir()
        chunk0 = sorted(read.chunk0, key=lambda m: str(m.get("paper_id")))
        (tmp / PAPERS_FILE).write_text(json.dumps(chunk0, ensure_ascii=False), encoding="utf-8")
        np.save(tmp / VECTORS_FILE, _unit(read.vectors), allow_pickle=False)
        (tmp / VECTOR_IDS_FILE).write_text(json.dumps(read.vector_ids), encoding="utf-8")
        files = {p.name: [p.stat().st_size, _file_hash(p)] for p in tmp.iterdir() if p.is_file()}
        state = {"count": count, "fingerprint": fingerprint_, "files": files}
        (tmp / "state.json").write_text(json.dumps(state))
        checkpoint("bm25.written")
        # Swap directories so a reader never sees a half-written index.
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
            checkpoint("bm25.swapping")
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    def load_bm25(self) -> Any:
        """The BM25 index of the store's current content (None when the store is empty)."""
        return self.snapshot().bm25

    # ------------------------------------------------------------------ dense search

    def dense_search(
        self, query: str, k: int = 5, where: dict[str, Any] | None = None
    ) -> list[Hit]:
        """Nearest papers by embedding; a paper's chunks collapse to its best one."""
        if self.count_chunks() == 0:
            return []
        vector = self.query_model.get_query_embedding(query)
        n = min(self.count_chunks(), max(k * 4, 20))
        with self.reaching_store():
            got: Any = self.collection.query(
                query_embeddings=[vector],  # type: ignore[arg-type]
                n_results=n,
                where=where,
                include=["metadatas", "documents", "distances"],
            )
        best: dict[str, tuple[float, str]] = {}
        for meta, doc, dist in zip(
            got["metadatas"][0],
            got["documents"][0],
            got["distances"][0],
            strict=True,
        ):
            pid = str(meta["paper_id"])
            score = 1.0 - float(dist)
            if pid not in best or score > best[pid][0]:
                best[pid] = (score, str(doc))
        ranked = sorted(best.items(), key=lambda kv: -kv[1][0])[:k]
        papers = {p.id: p for p in self.papers({"paper_id": {"$in": [pid for pid, _ in ranked]}})}
        return [
            Hit(papers[pid], score, passage) for pid, (score, passage) in ranked if pid in papers
        ]


def _unit(vectors: Sequence[Any]) -> np.ndarray:
    """Vectors as rows of unit length (float32), so that a dot product is the cosine."""
    out = np.asarray(vectors, dtype=np.float32)
    if out.ndim != 2 or not len(out):
        return np.zeros((0, 0), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def _store_hash(ids: list[str], metas: list[Any]) -> str:
    """The store's content as the collection's version names it: every chunk's id, vectors'
    text and paper content (so a metadata-only edit moves it too)."""
    return _hash(
        sorted(
            f"{cid}:{m.get('embed_hash')}:{m.get('content_hash')}"
            for cid, m in zip(ids, metas or [], strict=True)
        )
    )


def _transport_error(err: BaseException) -> bool:
    import httpx
    from chromadb.errors import NotFoundError

    return isinstance(err, (httpx.TransportError, ConnectionError, NotFoundError))


def _store_meta(node: TextNode) -> dict[str, Any]:
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    meta = node_to_metadata_dict(node, remove_text=True, flat_metadata=True)
    return {k: ("" if v is None else v) for k, v in meta.items()}


def _batches(
    items: list[Any], limit: int, size: Callable[[Any], int] = lambda _: 1
) -> Iterable[list[Any]]:
    batch: list[Any] = []
    used = 0
    for item in items:
        n = size(item)
        if batch and used + n > limit:
            yield batch
            batch, used = [], 0
        batch.append(item)
        used += n
    if batch:
        yield batch


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_owner(home: Path) -> str:
    try:
        pid, started = (home / "ingest.owner").read_text().split()
        return f" (pid {pid}, started {time.strftime('%H:%M:%S', time.localtime(float(started)))})"
    except (OSError, ValueError):
        return ""
