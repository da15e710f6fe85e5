"""The collection's version, the tables a question reads, prune on a shared store, bounded
requests and kept uploads: on the hashing embedder and an embedded store (fast tier).

The same behaviour across real `chroma run` servers and pages is in test_shared_server.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rag.catalog import Catalog
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import ChromaSettings, Settings
from rag.store import StoreTimeout, StoreUnavailable
from ui.app import ChatService

from .conftest import FAKE_EMBED, SilentServer, free_port


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def rows(*specs: tuple[str, str]) -> list[dict[str, Any]]:
    return [
        {"id": pid, "title": f"Paper {pid}", "authors": ["Ada Lovelace"], "abstract": abstract}
        for pid, abstract in specs
    ]


FIRST = rows(
    ("p1", "Sparse autoencoders find interpretable features in vision transformers."),
    ("p2", "Glacier melt forecasts on Antarctic ice improve by 17 percent with graphs."),
    ("p3", "Diffusion models fold proteins from their sequence alone."),
    ("p4", "Gradient boosted trees beat deep networks on tabular benchmarks."),
)
EDITED = [
    *[r for r in FIRST if r["id"] not in ("p2", "p3")],
    *rows(
        ("p2", "Glacier melt forecasts on Himalayan ice improve by 42 percent with graphs."),
        ("p6", "An audio transformer classifies bird song recordings in forests."),
    ),
]


def test_every_ingest_advances_the_version_that_retrievers_follow(
    fake_settings: Settings, tmp_path: Path
) -> None:
    index = PaperIndex(fake_settings)
    assert index.store_version() == ""  # nothing ingested yet
    source = write(tmp_path / "lab.jsonl", FIRST)
    index.ingest([source], progress=False)
    first = index.store_version()
    assert first == index._store_fingerprint()[1]
    retriever = Retriever(PaperIndex(fake_settings))  # another process, in effect
    assert retriever.retrieve("glacier melt forecasts").hits[0].paper.id == "p2"
    assert retriever.version == first

    index.ingest([source], progress=False)
    assert index.store_version() == first  # nothing changed, nothing moved

    authors = [dict(r, authors=["Grace Hopper"]) if r["id"] == "p4" else r for r in FIRST]
    write(source, authors)
    summary = index.ingest([source], progress=False)
    assert summary.updated == 1 and summary.chunks_embedded == 0  # metadata only
    second = index.store_version()
    assert second != first
    found = retriever.retrieve("papers by Grace Hopper")
    assert retriever.version == second
    assert [h.paper.id for h in found.hits] == ["p4"]
    # The version is written beside what the collection keeps: the distance is unchanged.
    assert index.collection.configuration_json["hnsw"]["space"] == "cosine"
    assert index.collection.metadata["chunk_size"] == fake_settings.chunk.size


def test_a_question_reads_one_version_from_start_to_end(
    fake_settings: Settings, tmp_path: Path
) -> None:
    source = write(tmp_path / "lab.jsonl", FIRST)
    PaperIndex(fake_settings).ingest([source], progress=False)
    retriever = Retriever(PaperIndex(fake_settings))
    retriever.refresh()

    def closest() -> set[str]:
        cos = retriever._cosines("glacier")
        order = retriever._tables_now().order
        return {order[i] for i in range(len(order)) if cos[i] > -1}

    with retriever._answering():  # a question in flight
        write(source, EDITED)
        PaperIndex(fake_settings).ingest([source], prune=True, progress=False)
        other = threading.Thread(target=retriever.refresh)  # another session's question
        other.start()
        other.join()
        assert "p3" in retriever.papers and "p6" not in retriever.papers
        assert "Antarctic" in retriever.papers["p2"].abstract
        # The vectors read are of the version the question started on, whatever the store
        # holds meanwhile: every paper of those tables, and only those, has one.
        assert closest() == set(retriever.papers)
    assert "p6" in retriever.papers and "p3" not in retriever.papers  # the next question
    assert "Himalayan" in retriever.papers["p2"].abstract
    assert closest() == {"p1", "p2", "p4", "p6"}


def test_reads_of_the_whole_store_come_in_pages(fake_seed: Settings) -> None:
    whole = PaperIndex(fake_seed)
    paged = PaperIndex(fake_seed)
    paged.read_page = 7  # many pages, the last one short
    assert whole.count_chunks() > 7 * 5
    assert paged.papers() == whole.papers()
    assert paged.indexed_state() == whole.indexed_state()
    assert paged._store_fingerprint() == whole._store_fingerprint()
    assert paged._read_store().fingerprint == whole._store_fingerprint()[1]
    assert sorted(p.id for p in paged.papers({"track": {"$ne": ""}})) == sorted(
        p.id for p in whole.papers() if p.track
    )


def test_prune_removes_only_papers_from_files_this_catalog_knows(
    fake_settings: Settings, tmp_path: Path
) -> None:
    ours = write(tmp_path / "ours.jsonl", FIRST)
    theirs = write(tmp_path / "theirs.jsonl", EDITED[-1:])  # p6
    index = PaperIndex(fake_settings)
    index.ingest([ours, theirs], progress=False)
    # As on a shared server: p6 was written by another machine, whose catalog knows its file.
    catalog = Catalog(fake_settings.home / "catalog.sqlite")
    catalog.delete(next(f for f in catalog.files() if f.endswith("theirs.jsonl")))
    catalog.close()
    write(ours, FIRST[:-1])  # p4 leaves our file
    summary = index.ingest([ours], prune=True, progress=False)
    assert summary.removed == 1
    assert sorted(p.id for p in index.papers()) == ["p1", "p2", "p3", "p6"]


@pytest.mark.timed
def test_a_silent_server_is_reported_once_per_timeout(tmp_path: Path) -> None:
    silent = SilentServer(free_port())
    try:
        settings = Settings(
            home=tmp_path / "home",
            embed=FAKE_EMBED,
            chroma=ChromaSettings(host="127.0.0.1", port=silent.port, timeout=0.5),
        )
        index = PaperIndex(settings)
        with pytest.raises(StoreTimeout):  # the page's own check: nobody waits on it
            index.store_version(background=True)
        started = time.monotonic()
        with pytest.raises(StoreTimeout, match=r"no reply within 0\.5 s"):
            index.store_version()  # so a question still asks, and waits
        assert 0.5 <= time.monotonic() - started < 2
        started = time.monotonic()
        with pytest.raises(StoreTimeout):  # within the next timeout: said at once
            index.store_version()
        assert time.monotonic() - started < 0.2
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(StoreTimeout):  # then asked again
            index.store_version()
        assert time.monotonic() - started >= 0.5
    finally:
        silent.close()


def test_uploads_are_kept_until_an_ingest_takes_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    down = Settings(
        home=home,
        embed=FAKE_EMBED,
        chroma=ChromaSettings(host="127.0.0.1", port=free_port(), timeout=1),  # nobody there
    )
    service = ChatService(down)
    try:
        service.uploads.mkdir(parents=True)
        upload = write(service.uploads / "abc-lab.jsonl", FIRST)
        with pytest.raises(StoreUnavailable, match=r"Chroma server at 127\.0\.0\.1"):
            service.index_uploads([upload])
        assert service.pending() == [upload] and upload.exists()
        with pytest.raises(StoreUnavailable):  # asked again, still down: still kept
            service.index_uploads([])
        assert service.pending() == [upload]
    finally:
        service.close()
    up = ChatService(Settings(home=home, embed=FAKE_EMBED))  # the store is back
    try:
        summary, indexed = up.index_uploads([])
        assert indexed == [upload] and summary is not None and summary.new == 4
        assert up.pending() == [] and up.paper_count() == 4
        assert up.index_uploads([]) == (None, [])
    finally:
        up.close()
