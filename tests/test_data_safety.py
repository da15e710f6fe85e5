"""Ingest and prune touch nothing but RAG_HOME.

The CLI runs as a real subprocess with RAG_HOME, HOME and TMPDIR in a temporary folder, beside
the corpus it reads and a sibling folder it has no business with. Every file outside RAG_HOME
is hashed before and after: ingest and prune may not write, touch or delete any of them, and
may not create anything in HOME (the model cache under ~/.cache/paper-rag belongs to the
local LLM, which ingest never loads). TMPDIR is the one other place a process may write.
Prune takes out of the index only what the pruned source had put there; files are never
deleted, uploads included.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rag.index import PaperIndex
from rag.settings import EmbedSettings, Settings

from .conftest import CORPUS, run_cli

Snapshot = dict[str, tuple[int, int, str]]


def snapshot(root: Path, *skip: Path) -> Snapshot:
    """Every file and folder under root (but those skipped): mtime, size and content hash."""
    out: Snapshot = {}
    for path in sorted(root.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        out[str(path.relative_to(root))] = (st.st_mtime_ns, st.st_size, digest)
    return out


def row(pid: str, text: str) -> str:
    abstract = f"{text} We evaluate the method on several benchmarks and report clear gains."
    return json.dumps({"id": pid, "authors": ["Ann Lee"], "abstract": abstract}) + "\n"


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    (corpus / "extra.jsonl").write_text(row("e1", "Extra paper on graph kernels."))
    # Same prefix as corpus/: a prune of corpus/ must not take it for one of its files.
    near = tmp_path / "corpus2"
    near.mkdir()
    (near / "near.jsonl").write_text(row("n1", "Near paper on ocean wave forecasting."))
    sibling = tmp_path / "sibling"
    (sibling / "notes").mkdir(parents=True)
    (sibling / "notes" / "keep.txt").write_text("not a corpus\n")
    (sibling / "data.jsonl").write_text(row("s1", "Sibling paper never ingested."))
    for name in ("home", "tmp"):
        (tmp_path / name).mkdir()
    return {
        "root": tmp_path,
        "rag": tmp_path / "rag",
        "corpus": corpus,
        "near": near,
        "env_home": tmp_path / "home",
        "tmp": tmp_path / "tmp",
    }


def ingest(world: dict[str, Path], *args: str) -> dict[str, object]:
    env: dict[str, str | None] = {
        "RAG_HOME": str(world["rag"]),
        "HOME": str(world["env_home"]),
        "TMPDIR": str(world["tmp"]),
        "XDG_CACHE_HOME": str(world["env_home"] / ".cache"),
        # The model's ONNX export is made once per machine by `make setup` (the installation,
        # like the model packages); ingest only reads it.
        "RAG_EMBED_CACHE": str(EmbedSettings().cache),
    }
    done = run_cli("rag.ingest", *args, "--json", "--no-progress", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_ingest_and_prune_write_only_inside_rag_home(world: dict[str, Path]) -> None:
    # TMPDIR is scratch space, not the user's data: torch leaves an empty
    # torchinductor_<user> folder there on import.
    root, rag, tmp = world["root"], world["rag"], world["tmp"]
    before = snapshot(root, rag, tmp)
    first = ingest(world, str(world["corpus"]), str(world["near"]))
    assert first["new"] == 62 and first["problems"] == []
    assert snapshot(root, rag, tmp) == before  # nothing outside RAG_HOME written or touched
    assert sorted(p.name for p in rag.iterdir()) >= ["bm25", "catalog.sqlite", "chroma"]

    # An upload the page stored, and a listing removed from corpus/ by its owner.
    uploads = rag / "uploads"
    uploads.mkdir()
    (uploads / "abc-upload.jsonl").write_text(row("u1", "Uploaded paper on moth flight."))
    ingest(world, str(uploads))
    (world["corpus"] / "003_6c529f114504893a.txt").unlink()
    before = snapshot(root, rag, tmp)
    kept_uploads = snapshot(uploads)

    pruned = ingest(world, str(world["corpus"]), "--prune")
    assert pruned["removed"] == 20 and pruned["total_papers"] == 43
    assert snapshot(root, rag, tmp) == before
    assert snapshot(uploads) == kept_uploads  # prune drops index entries, never files
    ids = {p.id for p in PaperIndex(Settings(home=rag)).papers()}
    assert {"e1", "n1", "u1"} <= ids  # other sources, and a same-prefix folder, kept
    assert not any((world["env_home"]).iterdir())  # no cache or dotfile in HOME
