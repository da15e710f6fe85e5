"""An ingest killed with SIGKILL at a named point, then the next ingest: a whole index.

The kill is real: `python -m rag.ingest` runs as a child process with RAG_FAULT_POINT set,
and rag.faults sends the process SIGKILL at that checkpoint, so no `finally`, rollback or
lock release runs. The next ingest then runs in this process, like a user's second try.

What is under test is the ingest's bookkeeping, so the children run on the hashing embedder
(tests.fake_cli, no torch import); one kill runs the real model's child end to end. Each
scenario's starting index is built once and copied for each of its kill points.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag.catalog import Catalog
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import IngestSettings, Settings
from rag.store import lock_held

from .conftest import CORPUS, FAKE_EMBED, FAKE_ENV, run_cli
from .test_index import assert_consistent

BATCH = 8  # chunks per write step, so that 60 papers are written in 8 steps
EXTRA_ROWS = [
    {
        "id": f"x{i}",
        "title": f"Extra paper {i}",
        "authors": ["Ada Byron"],
        "abstract": f"We study problem number {i} of quantum sheaf cohomology with a new "
        "spectral method, and report careful experiments on benchmark suites. " * 2,
    }
    for i in range(5)
]
NEW_ABSTRACT = "Zebrafish regeneration is predicted by a tiny recurrent model of fin growth. " * 3


@dataclass
class Case:
    """A starting index, the killed command, and what the index holds once it is finished."""

    home: Path
    args: list[str]  # of the killed ingest
    paths: list[Path]  # of the next ingest
    papers: int
    check: Callable[[PaperIndex], None]


def _write_rows(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _with_extras(seed: Settings, tmp_path: Path) -> tuple[Path, Path]:
    """The seed index plus five JSONL papers, ingested here before the killed run."""
    home = tmp_path / "home"
    shutil.copytree(seed.home, home)
    src = tmp_path / "src"
    src.mkdir()
    _write_rows(src / "extras.jsonl", EXTRA_ROWS)
    PaperIndex(seed.model_copy(update={"home": home})).ingest([src], progress=False)
    return home, src


def _edit(seed: Settings, tmp_path: Path) -> Case:
    """x2's abstract changes (old chunks deleted, new ones embedded); x4's authors change."""
    home, src = _with_extras(seed, tmp_path)
    rows = [dict(r) for r in EXTRA_ROWS]
    rows[2]["abstract"] = NEW_ABSTRACT
    rows[4]["authors"] = ["Grace Hopper", "Ada Byron"]
    _write_rows(src / "extras.jsonl", rows)

    def check(index: PaperIndex) -> None:
        papers = {p.id: p for p in index.papers()}
        assert papers["x2"].abstract == NEW_ABSTRACT.strip()
        assert papers["x4"].authors == ("Grace Hopper", "Ada Byron")
        found = Retriever(index).retrieve("zebrafish fin regeneration", k=1, mode="bm25")
        assert [h.paper.id for h in found.hits] == ["x2"]

    return Case(home, [str(src)], [src], 65, check)


def _prune(seed: Settings, tmp_path: Path) -> Case:
    """x0 and x1 leave their file; the killed run prunes, the next one is a plain ingest."""
    home, src = _with_extras(seed, tmp_path)
    _write_rows(src / "extras.jsonl", EXTRA_ROWS[2:])

    def check(index: PaperIndex) -> None:
        ids = {p.id for p in index.papers()}
        assert not {"x0", "x1"} & ids and {"x2", "x3", "x4"} <= ids

    return Case(home, ["--prune", str(src)], [src], 63, check)


def _fresh(seed: Settings, tmp_path: Path) -> Case:
    """The first ingest of the 60 seed papers into an empty folder."""

    def check(index: PaperIndex) -> None:
        found = Retriever(index).retrieve("sparse autoencoders explain time series", k=3)
        assert found.hits[0].paper.display_name == "TimeSAE"

    return Case(tmp_path / "home", [str(CORPUS)], [CORPUS], 60, check)


SCENARIOS = {"edit": _edit, "prune": _prune, "fresh": _fresh}


def _bm25_leftovers(index: PaperIndex) -> list[Path]:
    return sorted(index.bm25_dir.parent.glob(f"{index.name}.*"))


# What the killed run must have left, so that each kill really lands where it is named.
def _left(scenario: str, point: str, index: PaperIndex) -> None:
    ids = {str(m["paper_id"]) for m in index.collection.get(include=["metadatas"])["metadatas"]}
    count = index.count_chunks()
    if point == "embed.batch":
        assert index.papers({"paper_id": "x2"})[0].abstract != NEW_ABSTRACT.strip()
    elif point == "store.deleted":
        assert "x2" not in ids  # old chunks gone, new ones not written
    elif point == "store.added":
        # Same chunk count as before, but the saved BM25 no longer claims to match: a search
        # made before the next ingest rebuilds it and finds the new abstract.
        found = Retriever(index).retrieve("zebrafish fin regeneration", k=1, mode="bm25")
        assert [h.paper.id for h in found.hits] == ["x2"]
    elif point == "bm25.swapping":
        assert _bm25_leftovers(index)
        assert not (index.bm25_dir / "state.json").exists()
    elif scenario == "prune":
        assert {"x0", "x1"} <= ids if point == "catalog.committed" else not {"x0", "x1"} & ids
    elif point == "store.added:5":
        assert BATCH < count < 61


POINTS = [
    ("edit", "ingest.locked"),
    ("edit", "catalog.upsert"),
    ("edit", "catalog.committed"),
    ("edit", "store.updated"),
    ("edit", "embed.batch"),
    ("edit", "store.deleted"),
    ("edit", "store.added"),
    ("edit", "bm25.swapping"),
    ("prune", "catalog.committed"),
    ("prune", "store.removed"),
    ("prune", "ingest.synced"),
    ("fresh", "store.added:5"),
]


pytestmark = pytest.mark.slow  # real child processes, killed


@pytest.fixture(scope="module")
def starts(fake_seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    """Each scenario's starting index and source files, built once."""
    seed = Settings(home=fake_seed_home, embed=FAKE_EMBED)
    return {
        name: make(seed, tmp_path_factory.mktemp(f"start-{name}"))
        for name, make in SCENARIOS.items()
    }


def _start(starts: dict[str, Case], scenario: str, tmp_path: Path) -> Case:
    """A copy of the scenario's starting index; its source files are shared (only read, and
    the catalog knows them by their paths)."""
    case = starts[scenario]
    home = tmp_path / "home"
    if case.home.exists():
        shutil.copytree(case.home, home)
    return dataclasses.replace(case, home=home)


def _kill_and_recover(case: Case, scenario: str, point: str, embed: dict[str, str]) -> None:
    env = {
        **embed,
        "RAG_HOME": str(case.home),
        "RAG_FAULT_POINT": point,
        "RAG_INGEST_WRITE_BATCH_CHUNKS": str(BATCH),
    }
    killed = run_cli("rag.ingest", "--no-progress", *case.args, env=env, timeout=300)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])

    fake = embed.get("RAG_EMBED_MODEL") == FAKE_ENV["RAG_EMBED_MODEL"]
    settings = Settings(
        home=case.home,
        ingest=IngestSettings(write_batch_chunks=BATCH),
        **({"embed": FAKE_EMBED} if fake else {}),
    )
    _left(scenario, point, PaperIndex(settings))
    assert not lock_held(case.home)  # flock died with its holder; ingest.owner is stale
    assert (case.home / "ingest.owner").exists()

    index = PaperIndex(settings)
    summary = index.ingest(case.paths, progress=False)
    print(f"\n{scenario} killed at {point}; next ingest: {summary.render()}")

    assert summary.total_papers == case.papers
    assert_consistent(index, case.papers)
    case.check(index)
    catalog = Catalog(case.home / "catalog.sqlite")
    try:
        assert catalog.removals() == set()
    finally:
        catalog.close()
    # BM25 is persisted, whole, and of this very store; nothing is left from the swap.
    assert index.refresh_bm25() is False
    assert not _bm25_leftovers(index)
    assert len(index.load_bm25().corpus) == index.count_chunks()
    # A second run finds nothing to do.
    again = index.ingest(case.paths, progress=False)
    assert (again.chunks_embedded, again.new, again.changed, again.removed) == (0, 0, 0, 0)


@pytest.mark.parametrize(("scenario", "point"), POINTS, ids=[f"{s}-{p}" for s, p in POINTS])
def test_next_ingest_after_a_kill_leaves_a_whole_index(
    scenario: str, point: str, starts: dict[str, Case], tmp_path: Path
) -> None:
    _kill_and_recover(_start(starts, scenario, tmp_path), scenario, point, FAKE_ENV)


def test_a_real_model_ingest_killed_mid_edit_is_finished_by_the_next(
    seed_home: Path, tmp_path: Path
) -> None:
    """The same, with the real embedding model in the killed child and in the next ingest."""
    case = _edit(Settings(home=seed_home), tmp_path)
    _kill_and_recover(case, "edit", "store.deleted", {})


def test_a_malformed_fault_point_disables_the_hook() -> None:
    from rag.faults import _parse

    assert _parse("commit") == ("commit", 1) and _parse("commit:3") == ("commit", 3)
    assert _parse("commit:0") == ("commit", 1)  # the first time, at the earliest
    assert _parse("") is None and _parse(":2") is None and _parse("commit:soon") is None
