"""A damaged or incomplete index folder is found at start-up, said plainly, and repairable.

Every case damages real files in a copy of the seed index (truncated like a disk that filled
up or a copy that was cut short) and runs the real commands or the real open path.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.index import IndexDamaged, PaperIndex
from rag.retrieve import Retriever
from rag.settings import Settings

from .conftest import CORPUS, FAKE_ENV, run_cli
from .test_index import assert_consistent

QUESTION = "sparse autoencoders explain time series"
BOUND = 60.0  # seconds any command may take to give up on a damaged index


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as f:
        f.truncate(size)


def _segment(home: Path) -> Path:
    (folder,) = [p for p in (home / "chroma").iterdir() if p.is_dir()]
    return folder


def _cli(module: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    done = run_cli(module, *args, env={"RAG_HOME": str(home), **FAKE_ENV}, timeout=BOUND)
    assert time.monotonic() - started < BOUND
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _damaged(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    message = done.stderr.strip()
    assert message.startswith("error: ") and "\n" not in message  # one paragraph
    for word in words:
        assert word in message


def _persist_vectors(home: Path) -> None:
    """Make Chroma write the HNSW segment to disk, as it does past 1000 chunks.

    Below its sync threshold Chroma keeps vectors in its log only; with a threshold of 10,
    one write makes it persist the segment with its index_metadata.pickle. Done in a child
    process so that this process holds no chromadb client on the folder.
    """
    script = (
        "import sys, chromadb\n"
        "from chromadb.config import Settings\n"
        "c = chromadb.PersistentClient(sys.argv[1], Settings(anonymized_telemetry=False))\n"
        "(col,) = c.list_collections()\n"
        "col.modify(configuration={'hnsw': {'sync_threshold': 10, 'batch_size': 10}})\n"
        "g = col.get(limit=1, include=['embeddings', 'metadatas', 'documents'])\n"
        "col.upsert(ids=g['ids'], embeddings=g['embeddings'], metadatas=g['metadatas'],"
        " documents=g['documents'])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(home / "chroma")], check=True, timeout=BOUND)
    assert (_segment(home) / "index_metadata.pickle").exists()


# ---------------------------------------------------------------------------- a crashed run


def test_leftovers_of_a_crashed_run_are_harmless_and_cleaned(fake_seed_copy: Settings) -> None:
    home = fake_seed_copy.home
    index = PaperIndex(fake_seed_copy)
    for leftover in (".tmp", ".old"):
        junk = index.bm25_dir.with_name(index.name + leftover)
        junk.mkdir()
        (junk / "corpus.jsonl").write_text('{"half a')
    (home / "ingest.owner").write_text("999999999 1\n")  # a pid that cannot be running
    found = Retriever(index).retrieve(QUESTION, k=1)
    assert found.hits[0].paper.display_name == "TimeSAE"
    summary = PaperIndex(fake_seed_copy).ingest([CORPUS], progress=False)
    assert summary.unchanged == 60
    assert sorted(p.name for p in index.bm25_dir.parent.iterdir()) == [index.name]
    assert (home / "ingest.owner").read_text().split()[0] == str(os.getpid())


# ---------------------------------------------------------------------------- Chroma store


def test_truncated_chroma_sqlite_is_refused_by_every_command_and_repaired(
    fake_seed_copy: Settings,
) -> None:
    home = fake_seed_copy.home
    db = home / "chroma" / "chroma.sqlite3"
    half = db.stat().st_size // 2
    _truncate(db, half)
    for module, args in (
        ("rag.search", [QUESTION]),
        ("rag.ask", [QUESTION, "--llm", "extractive"]),
        ("rag.ingest", ["--no-progress"]),
    ):
        _damaged(
            _cli(module, *args, home=home),
            str(home / "chroma"),
            "chroma.sqlite3 is truncated",
            "python -m rag.ingest --repair",
        )
    repaired = _cli("rag.ingest", "--repair", "--no-progress", "--json", home=home)
    assert repaired.returncode == 0, repaired.stderr
    (broken,) = home.glob("broken-*")
    assert (broken / "chroma" / "chroma.sqlite3").stat().st_size == half  # kept, not deleted
    assert json.loads(repaired.stdout)["new"] == 60  # re-embedded from the catalog
    index = PaperIndex(fake_seed_copy)
    assert_consistent(index, 60)
    assert index.dense_search(QUESTION, k=1)[0].paper.display_name == "TimeSAE"


def test_garbled_chroma_pages_give_exit_2_and_stop_ingest(fake_seed_copy: Settings) -> None:
    """Damage inside the file, at its full size: the quick start-up checks cannot see it,
    chromadb fails on it, and the command still ends with a message, not a traceback."""
    home = fake_seed_copy.home
    db = home / "chroma" / "chroma.sqlite3"
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(4096 * 100)
        f.write(b"\xff" * (size - 4096 * 200))
    _damaged(_cli("rag.search", QUESTION, home=home), str(home / "chroma"), "--repair")
    with pytest.raises(IndexDamaged, match="failed its integrity check"):
        PaperIndex(fake_seed_copy).ingest([CORPUS], progress=False)


def test_empty_chroma_sqlite_is_not_taken_for_an_empty_index(fake_seed_copy: Settings) -> None:
    _truncate(fake_seed_copy.home / "chroma" / "chroma.sqlite3", 0)
    with pytest.raises(IndexDamaged, match="is not a SQLite database"):
        PaperIndex(fake_seed_copy).count_chunks()


def test_missing_chroma_sqlite_beside_vectors_is_damage(fake_seed_copy: Settings) -> None:
    (fake_seed_copy.home / "chroma" / "chroma.sqlite3").unlink()
    with pytest.raises(IndexDamaged, match=r"chroma\.sqlite3 is missing"):
        Retriever(PaperIndex(fake_seed_copy)).retrieve(QUESTION)


def test_unpersisted_vector_files_are_rebuilt_by_chroma(fake_seed_copy: Settings) -> None:
    """Measured: below the sync threshold Chroma rebuilds the HNSW files from its log."""
    segment = _segment(fake_seed_copy.home)
    assert not (segment / "index_metadata.pickle").exists()
    _truncate(segment / "header.bin", 10)
    _truncate(segment / "data_level0.bin", 1000)
    hits = PaperIndex(fake_seed_copy).dense_search(QUESTION, k=1)
    assert hits[0].paper.display_name == "TimeSAE"


HNSW_DAMAGE = [
    ("header.bin", 10, "header.bin has 10 bytes"),  # unchecked, chromadb segfaults
    ("data_level0.bin", 1000, "data_level0.bin is truncated"),
    ("link_lists.bin", 100, "link_lists.bin is truncated"),
    ("length.bin", 10, "length.bin is truncated"),
    ("index_metadata.pickle", 100, "index_metadata.pickle is truncated"),
]


@pytest.mark.parametrize(("name", "size", "said"), HNSW_DAMAGE, ids=[d[0] for d in HNSW_DAMAGE])
def test_truncated_persisted_vector_file_is_refused(
    fake_seed_copy: Settings, name: str, size: int, said: str
) -> None:
    _persist_vectors(fake_seed_copy.home)
    _truncate(_segment(fake_seed_copy.home) / name, size)
    with pytest.raises(IndexDamaged, match=re.escape(said)) as caught:
        PaperIndex(fake_seed_copy).count_chunks()
    assert "python -m rag.ingest --repair" in str(caught.value)


def test_segfaulting_vector_header_gives_exit_2(fake_seed_copy: Settings) -> None:
    home = fake_seed_copy.home
    _persist_vectors(home)
    _truncate(_segment(home) / "header.bin", 10)
    _damaged(_cli("rag.search", QUESTION, home=home), "header.bin has 10 bytes", "--repair")


# ---------------------------------------------------------------------------- catalog


def test_truncated_catalog_stops_ingest_and_repair_rebuilds_it(fake_seed_copy: Settings) -> None:
    home = fake_seed_copy.home
    catalog = home / "catalog.sqlite"
    _truncate(catalog, catalog.stat().st_size // 3)
    with pytest.raises(IndexDamaged, match=r"catalog\.sqlite is truncated") as caught:
        PaperIndex(fake_seed_copy).ingest([CORPUS], progress=False)
    assert "--repair" in str(caught.value)
    # Search does not read the catalog: it goes on answering meanwhile.
    assert PaperIndex(fake_seed_copy).dense_search(QUESTION, k=1)[0].paper.display_name == "TimeSAE"
    summary = PaperIndex(fake_seed_copy).ingest([CORPUS], progress=False, repair=True)
    assert "moved catalog.sqlite" in summary.repaired[0]
    assert summary.chunks_embedded == 0 and summary.total_papers == 60  # the store was sound
    assert (next(home.glob("broken-*")) / "catalog.sqlite").exists()


def test_ingest_cli_names_the_damaged_catalog(fake_seed_copy: Settings) -> None:
    catalog = fake_seed_copy.home / "catalog.sqlite"
    catalog.write_bytes(b"\0" * 4096)
    _damaged(
        _cli("rag.ingest", "--no-progress", home=fake_seed_copy.home),
        str(catalog),
        "python -m rag.ingest --repair",
    )


# ---------------------------------------------------------------------------- BM25


@pytest.mark.parametrize(
    "damage", ["truncated corpus", "truncated matrix", "garbled vocab", "no state", "no folder"]
)
def test_damaged_or_missing_bm25_is_rebuilt(
    fake_seed_copy: Settings, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    index = PaperIndex(fake_seed_copy)
    folder = index.bm25_dir
    if damage == "truncated corpus":
        _truncate(folder / "corpus.jsonl", 100)
    elif damage == "truncated matrix":
        _truncate(folder / "data.csc.index.npy", 10)
    elif damage == "garbled vocab":  # same size, so only loading it can tell
        vocab = folder / "vocab.index.json"
        vocab.write_bytes(b"{" * vocab.stat().st_size)
    elif damage == "no state":
        (folder / "state.json").unlink()
    else:
        shutil.rmtree(folder)
    with caplog.at_level(logging.WARNING, logger="rag.index"):
        found = Retriever(index).retrieve("What is SOTAlign?", k=1, mode="bm25")
    assert found.hits[0].paper.display_name.startswith("SOTAlign")
    assert "rebuilt in memory" in caplog.text
    assert index.refresh_bm25() is True  # what the next ingest does
    assert index.refresh_bm25() is False
    assert len(index.load_bm25().corpus) == index.count_chunks()


def test_search_cli_rebuilds_missing_bm25(fake_seed_copy: Settings) -> None:
    import shutil

    shutil.rmtree(fake_seed_copy.home / "bm25")
    found = _cli("rag.search", QUESTION, "--k", "1", home=fake_seed_copy.home)
    assert found.returncode == 0 and "TimeSAE" in found.stdout
    assert "rebuilt in memory" in found.stderr
