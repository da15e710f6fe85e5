from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent

from rag.corpus import read_papers
from rag.embed import resolve
from rag.index import PAPERS_FILE, IndexBusy, PaperIndex, collection_name, paper_from_metadata
from rag.settings import PROJECT_ROOT, ChunkSettings, EmbedSettings, Settings

from .conftest import CORPUS, FAKE_EMBED, FAKE_ENV, ICML, call_cli, free_port, run_cli


class EmbeddedTexts(BaseEventHandler):
    """Counts texts sent to the embedding model, through LlamaIndex instrumentation."""

    texts: int = 0

    @classmethod
    def class_name(cls) -> str:
        return "EmbeddedTexts"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, EmbeddingEndEvent):
            self.texts += len(event.chunks)


@pytest.fixture
def embedded() -> Iterator[EmbeddedTexts]:
    handler = EmbeddedTexts()
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    yield handler
    dispatcher.event_handlers.remove(handler)


def assert_consistent(index: PaperIndex, papers: int) -> None:
    got = index.collection.get(include=["metadatas"])
    ids = got["ids"]
    assert len(ids) == len(set(ids))
    by_paper: dict[str, list[dict[str, Any]]] = {}
    for meta in got["metadatas"] or []:
        by_paper.setdefault(str(meta["paper_id"]), []).append(dict(meta))
    assert len(by_paper) == papers
    for chunks in by_paper.values():
        assert sorted(int(m["chunk"]) for m in chunks) == list(range(int(chunks[0]["n_chunks"])))


def copy_corpus(tmp_path: Path) -> Path:
    dest = tmp_path / "corpus"
    shutil.copytree(CORPUS, dest)
    return dest


def test_ingest_builds_a_consistent_index(fake_seed: Settings) -> None:
    index = PaperIndex(fake_seed)
    assert_consistent(index, 60)
    papers = index.papers()
    assert len(papers) == 60
    timesae = next(p for p in papers if p.display_name == "TimeSAE")
    assert "Quentin Bouniot" in timesae.authors and timesae.subarea.startswith("Accountability")
    assert timesae.abstract.startswith("As black box models")
    meta = index.collection.get(ids=[f"{timesae.id}#0"], include=["metadatas"])["metadatas"][0]
    for key in (
        "paper_id",
        "display_name",
        "title",
        "authors",
        "first_author",
        "track",
        "area",
        "subarea",
        "venue",
    ):
        assert key in meta
    assert meta["first_author"] == "Khalid Oublal"


def test_unchanged_reingest_embeds_nothing(fake_seed_copy: Settings, embedded) -> None:
    summary = PaperIndex(fake_seed_copy).ingest([CORPUS], progress=False)
    assert embedded.texts == 0
    assert summary.chunks_embedded == 0
    assert (summary.unchanged, summary.new, summary.changed) == (60, 0, 0)


def test_changed_jsonl_abstract_reembeds_only_its_chunks(
    fake_settings: Settings, tmp_path, embedded
):
    src = tmp_path / "papers.jsonl"
    rows = [
        {
            "id": f"t{i}",
            "title": f"Paper {i}",
            "authors": ["A B"],
            "abstract": f"Topic number {i} is studied with a careful method and results. " * 3,
        }
        for i in range(5)
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index = PaperIndex(fake_settings)
    index.ingest([src], progress=False)
    first = embedded.texts
    assert first == 5
    rows[2]["abstract"] = "An entirely new abstract about graph neural networks and proteins. " * 2
    rows[3]["title"] = "Paper three, renamed"  # the title is embedded too
    rows[4]["authors"] = ["C D", "E F"]  # metadata only
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    summary = index.ingest([src], progress=False)
    assert embedded.texts - first == 2
    assert (summary.changed, summary.updated, summary.unchanged) == (2, 1, 2)
    papers = {p.id: p for p in index.papers()}
    assert papers["t2"].abstract.startswith("An entirely new")
    assert papers["t4"].authors == ("C D", "E F")
    assert_consistent(index, 5)


def papers_in_store(index: PaperIndex) -> list[Any]:
    got = index.collection.get(where={"chunk": 0}, include=["metadatas"])
    return sorted(
        (paper_from_metadata(dict(m)) for m in got["metadatas"] or []), key=lambda p: p.id
    )


def test_paper_list_saved_beside_bm25_follows_the_store(fake_settings: Settings, tmp_path: Path):
    src = tmp_path / "papers.jsonl"
    rows = [
        {"id": f"t{i}", "title": f"Paper {i}", "authors": ["A B"], "abstract": f"Topic {i}. " * 9}
        for i in range(4)
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index = PaperIndex(fake_settings)
    index.ingest([src], progress=False)
    saved = index.bm25_dir / PAPERS_FILE
    assert index._papers_snapshot() == papers_in_store(index) == index.papers()
    rows[1]["authors"] = ["C D"]  # metadata only: the vectors stay, the saved list must not
    rows[2]["abstract"] = "Something else entirely. " * 9
    rows.append({"id": "t9", "title": "Paper 9", "authors": ["E F"], "abstract": "New. " * 9})
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index.ingest([src], progress=False)
    papers = index._papers_snapshot()
    assert papers is not None and papers == papers_in_store(index)
    assert {p.id: p.authors for p in papers}["t1"] == ("C D",)
    del rows[0]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index.ingest([src], prune=True, progress=False)
    assert (
        [p.id for p in index.papers()]
        == ["t1", "t2", "t3", "t9"]
        == [p.id for p in index._papers_snapshot() or []]
    )
    # A store changed behind the saved list's back (another writer): the store is read.
    index.collection.delete(ids=["t9#0"])
    assert index._papers_snapshot() is None
    assert [p.id for p in index.papers()] == ["t1", "t2", "t3"]
    # A damaged list is not trusted either, and the next ingest writes it again.
    saved.write_text("x" * saved.stat().st_size)
    assert index._papers_snapshot() is None
    index.ingest([src], progress=False)
    assert index._papers_snapshot() == papers_in_store(index)


def test_edited_listing_and_prune(fake_settings: Settings, tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path)
    index = PaperIndex(fake_settings)
    index.ingest([corpus], progress=False)
    listing = corpus / "000_ca26f2752b4dd6e2.txt"
    text = listing.read_text(encoding="utf-8")
    listing.write_text(text.replace("The quadratic computational", "The cubic computational"))
    summary = index.ingest([corpus], progress=False)
    assert (summary.new, summary.stale) == (1, 1)
    assert summary.total_papers == 61
    summary = index.ingest([corpus], prune=True, progress=False)
    assert summary.removed == 1 and summary.total_papers == 60
    assert_consistent(index, 60)
    (corpus / "003_6c529f114504893a.txt").unlink()
    summary = index.ingest([corpus], prune=True, progress=False)
    assert summary.removed == 20 and summary.total_papers == 40
    assert_consistent(index, 40)


def test_prune_keeps_papers_from_other_sources(fake_seed_copy: Settings, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "o1", "abstract": "Another paper on kernels. " * 5}) + "\n")
    index = PaperIndex(fake_seed_copy)
    index.ingest([other], progress=False)
    summary = index.ingest([CORPUS], prune=True, progress=False)
    assert summary.removed == 0 and summary.total_papers == 61


@pytest.mark.skipif(not ICML.exists(), reason="../shared/corpora is not beside the project")
def test_later_source_merges_into_indexed_paper(fake_seed_copy: Settings, tmp_path: Path) -> None:
    seeds = {p.key: p for p in read_papers([CORPUS]).papers}
    rows = [json.loads(line) for line in ICML.open(encoding="utf-8")]
    from rag.corpus import abstract_key

    matching = [r for r in rows if abstract_key(r["abstract"]) in seeds][:3]
    assert len(matching) == 3
    extra = tmp_path / "icml_part.jsonl"
    extra.write_text("\n".join(json.dumps(r) for r in matching) + "\n", encoding="utf-8")
    index = PaperIndex(fake_seed_copy)
    summary = index.ingest([extra], progress=False)
    assert summary.total_papers == 60 and summary.removed == 3 and summary.new == 3
    papers = {p.id: p for p in index.papers()}
    for r in matching:
        assert papers[r["id"]].title == r["title"]
        assert papers[r["id"]].display_name == r["title"]
    assert_consistent(index, 60)
    # Reading the seeds again changes nothing: they are the same merged papers.
    again = index.ingest([CORPUS], progress=False)
    assert again.chunks_embedded == 0 and again.total_papers == 60


def test_collection_name_follows_what_shapes_vectors(tmp_path: Path) -> None:
    a = Settings(home=tmp_path)
    b = Settings(home=tmp_path, chunk=ChunkSettings(size=256))
    assert collection_name(a) == collection_name(Settings(home=tmp_path / "elsewhere"))
    assert collection_name(a) != collection_name(b)
    fake = Settings(home=tmp_path, embed=FAKE_EMBED)
    assert collection_name(fake) not in (collection_name(a), collection_name(b))


def test_dense_search_finds_papers(seed_readonly: Settings) -> None:
    hits = PaperIndex(seed_readonly).dense_search("explaining time series models with SAEs", k=3)
    assert hits[0].paper.display_name == "TimeSAE"
    assert len({h.paper.id for h in hits}) == 3


@pytest.mark.timed
def test_second_ingest_stops_within_seconds(fake_seed_copy: Settings) -> None:
    seed_settings = fake_seed_copy
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; "
            f"l = FileLock({str(seed_settings.home / 'ingest.lock')!r}); l.acquire(); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(IndexBusy, match="another ingest is running"):
            PaperIndex(
                seed_settings.model_copy(
                    update={"ingest": seed_settings.ingest.model_copy(update={"lock_timeout": 1.0})}
                )
            ).ingest([CORPUS], progress=False)
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait()
    # The lock dies with its holder: the next ingest goes through.
    assert PaperIndex(seed_settings).ingest([CORPUS], progress=False).total_papers == 60


@pytest.mark.slow
def test_two_ingests_at_once_both_finish_consistently(tmp_path: Path) -> None:
    # Two real processes contend for the lock; the hashing embedder keeps each one short.
    env = {"RAG_HOME": str(tmp_path / "home"), "RAG_INGEST_LOCK_TIMEOUT": "300", **FAKE_ENV}
    cmd = [sys.executable, "-m", "tests.fake_cli", "rag.ingest", "--json", "--no-progress"]
    cmd.append(str(CORPUS))
    import os

    procs = [
        subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            cwd=PROJECT_ROOT,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    summaries = sorted((json.loads(o) for o, _ in outs), key=lambda s: s["chunks_embedded"])
    assert summaries[0]["chunks_embedded"] == 0 and summaries[1]["new"] == 60
    assert_consistent(PaperIndex(Settings(home=tmp_path / "home", embed=FAKE_EMBED)), 60)


@pytest.mark.slow
def test_ingest_and_search_through_a_chroma_server(chroma_server, tmp_path: Path) -> None:
    # The real model's way to a server is tests/test_deploy.py; here the store's protocol.
    host, port = chroma_server
    env = {
        **FAKE_ENV,
        "RAG_HOME": str(tmp_path / "home"),
        "RAG_CHROMA_HOST": host,
        "RAG_CHROMA_PORT": str(port),
    }
    done = run_cli("rag.ingest", "--json", "--no-progress", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total_papers"] == 60
    assert not (tmp_path / "home" / "chroma").exists()  # the vectors live on the server
    found = run_cli("rag.search", "sparse autoencoders explain time series", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["display_name"] == "TimeSAE"
    again = run_cli("rag.ingest", "--json", "--no-progress", env=env)
    assert json.loads(again.stdout)["chunks_embedded"] == 0


@pytest.mark.timed
def test_server_down_is_a_clear_error(tmp_path: Path) -> None:
    from .conftest import free_port

    env = {
        "RAG_HOME": str(tmp_path / "home"),
        "RAG_CHROMA_HOST": "127.0.0.1",
        "RAG_CHROMA_PORT": str(free_port()),
    }
    started = time.monotonic()
    done = call_cli("rag.search", "anything", env=env)
    assert done.returncode == 3
    assert "Chroma server at 127.0.0.1" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 30


def test_cli_summary_search_and_help(fake_seed_copy: Settings, tmp_path: Path) -> None:
    env = {"RAG_HOME": str(fake_seed_copy.home), **FAKE_ENV}
    done = call_cli("rag.ingest", "--json", "--no-progress", env=env)
    summary = json.loads(done.stdout)
    assert summary["unchanged"] == 60 and summary["problems"] == []
    found = call_cli("rag.search", "how much faster is FS-DFM?", "--k", "2", env=env)
    assert found.returncode == 0 and "FS-DFM" in found.stdout.splitlines()[0]
    helped = call_cli("rag.ingest", "--help", env=env)
    assert "RAG_HOME" in helped.stdout and "RAG_CHUNK_SIZE" in helped.stdout


def test_cli_reports_bad_files_and_keeps_going(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "empty.txt").write_text("")
    shutil.copy(CORPUS / "000_ca26f2752b4dd6e2.txt", folder)
    done = call_cli(
        "rag.ingest",
        str(folder),
        "--no-progress",
        env={"RAG_HOME": str(tmp_path / "home"), **FAKE_ENV},
    )
    assert done.returncode == 0, done.stderr
    assert "20 new" in done.stdout and "empty.txt:0: empty file" in done.stdout


def test_search_on_empty_index_says_how_to_fill_it(tmp_path: Path) -> None:
    done = call_cli("rag.search", "anything", env={"RAG_HOME": str(tmp_path / "home"), **FAKE_ENV})
    assert done.returncode == 2 and "python -m rag.ingest" in done.stderr


def test_bad_setting_is_a_usage_error(tmp_path: Path) -> None:
    done = call_cli("rag.search", "x", env={"RAG_CHUNK_SIZE": "lots"})
    assert done.returncode == 2 and "RAG_" not in done.stdout and "chunk" in done.stderr


ODD_TEXTS = [
    "which papers use sparse autoencoders?",
    "What has Quentin Bouniot worked on here?",
    "Schölkopf — ünïcode 数学 ∑ $\\mathcal{O}(n^2)$ 🚀",
    "",
    "word " * 600,  # longer than max_length: both runtimes truncate the same way
]


@pytest.mark.slow
def test_onnx_runtime_gives_the_torch_models_vectors(tmp_path: Path) -> None:
    """The ONNX export, prompts, truncation and pooling reproduce sentence-transformers."""
    import numpy as np

    from rag.embed import load_embedding

    folder = tmp_path / "model"
    shutil.copytree(resolve(EmbedSettings()).folder, folder)
    # Prompts as EmbeddingGemma's folder names them: questions and passages differ.
    config = folder / "config_sentence_transformers.json"
    data = json.loads(config.read_text())
    data["prompts"] = {"query": "query: ", "document": "passage: "}
    config.write_text(json.dumps(data))
    texts = [*ODD_TEXTS, read_papers([CORPUS]).papers[0].abstract]
    base = EmbedSettings(model=str(folder), precision="fp32", dimensions=128, cache=tmp_path)
    onnx = load_embedding(base)
    torch = load_embedding(base.model_copy(update={"runtime": "torch"}))
    got = np.array(onnx.get_text_embedding_batch(texts))
    want = np.array(torch.get_text_embedding_batch(texts))
    assert got.shape == (len(texts), 128)
    assert np.abs(got - want).max() < 1e-5
    q = np.array(onnx.get_query_embedding(texts[0]))
    assert float(q @ np.array(torch.get_query_embedding(texts[0]))) > 0.99999
    assert float(q @ got[0]) < 0.999  # the query prompt was applied, not the passage one


@pytest.mark.slow
def test_int8_vectors_stay_close_to_fp32(tmp_path: Path) -> None:
    import numpy as np

    from rag.embed import load_embedding

    texts = [*ODD_TEXTS, *(p.abstract for p in read_papers([CORPUS]).papers[:20])]
    int8 = np.array(load_embedding(EmbedSettings(precision="int8")).get_text_embedding_batch(texts))
    fp32 = np.array(load_embedding(EmbedSettings()).get_text_embedding_batch(texts))
    # int8 kernels differ by CPU (0.965 at worst on CI, 0.97+ here): a broken quantisation
    # lands far below 0.9, and what retrieval needs is that every text stays its own nearest.
    assert (int8 * fp32).sum(1).min() > 0.9
    assert ((int8 @ fp32.T).argmax(1) == np.arange(len(texts))).all()


def test_a_folder_onnx_cannot_run_says_what_to_do(tmp_path: Path) -> None:
    from rag.embed import EmbeddingModelError, load_embedding

    folder = tmp_path / "model"
    shutil.copytree(resolve(EmbedSettings()).folder, folder)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(
        pooling.read_text().replace(
            '"pooling_mode_max_tokens": false', '"pooling_mode_max_tokens": true'
        )
    )
    with pytest.raises(EmbeddingModelError, match="RAG_EMBED_RUNTIME=torch"):
        load_embedding(EmbedSettings(model=str(folder), cache=tmp_path))
    assert not (tmp_path / "onnx").exists()  # refused before any export


def test_a_model_opened_in_the_background_is_the_one_questions_use(tmp_path: Path) -> None:
    from rag.embed import load_embedding, preload
    from rag.onnx_export import exported
    from rag.onnx_model import open_model
    from rag.onnx_model import preload as open_in_background

    settings = EmbedSettings(max_length=200)  # a length no other test opens the model with
    preload(settings)
    model = resolve(settings)
    onnx_file = exported(model.folder, settings.cache, model.precision)
    assert onnx_file is not None  # `make setup` exported it
    opened = open_model(model.folder, onnx_file, 200)
    assert load_embedding(settings)._model is opened
    # Not exported (another cache): nothing is exported behind the user's back.
    preload(settings.model_copy(update={"cache": tmp_path}))
    assert not (tmp_path / "onnx").exists()
    # A model that fails on the thread fails where it is asked for, with its own error.
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    open_in_background(model.folder, bad)
    with pytest.raises(Exception, match=r"(?i)protobuf|load model|invalid"):
        open_model(model.folder, bad)


def test_start_up_turns_garbage_collection_back_on() -> None:
    import gc

    from rag.cli import started

    gc.disable()
    try:
        started()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        started()  # already on: nothing changes
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_unknown_or_unfetched_models_are_named_errors(tmp_path: Path) -> None:
    from rag.embed import EmbeddingModelError

    with pytest.raises(EmbeddingModelError, match="minilm, embeddinggemma"):
        resolve(EmbedSettings(model=str(tmp_path / "nowhere")))
    with pytest.raises(EmbeddingModelError, match="make models-quality"):
        resolve(EmbedSettings(model="embeddinggemma", cache=tmp_path))
    done = call_cli(
        "rag.search",
        "x",
        env={
            "RAG_EMBED_MODEL": "embeddinggemma",
            "RAG_EMBED_CACHE": str(tmp_path),
            "RAG_HOME": str(tmp_path / "home"),
        },
    )
    assert done.returncode == 2 and "make models-quality" in done.stderr


def _maps_torch(pid: int) -> bool:
    """Whether a running process has torch's library loaded (it cannot be unloaded)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
def test_a_question_is_answered_without_importing_torch(
    seed_readonly: Settings, tmp_path: Path
) -> None:
    env = {**os.environ, "RAG_HOME": str(seed_readonly.home), "RAG_LLM": "extractive"}
    # The entry point as users run it (its model opens on a thread); -X importtime lists every
    # module the process imported, on any thread.
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "rag.ask",
            "Which papers use sparse autoencoders?",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0 and "[1]" in done.stdout, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "onnxruntime" in imported and "llama_index.core" in imported
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}

    # The chat page, in its own process as `make run` starts it.
    port = free_port()
    page = subprocess.Popen(
        [sys.executable, "-m", "ui"],
        env={**env, "RAG_UI_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from gradio_client import Client

        deadline = time.monotonic() + 120
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception:
                assert page.poll() is None and time.monotonic() < deadline, "no page"
                time.sleep(1)
        history, _, _ = client.predict(
            "Which papers use sparse autoencoders?",
            [],
            "All tracks",
            "",
            "extractive",
            api_name="/ask",
        )
        assert "](#src-" in str(history[-1]["content"])
        assert not _maps_torch(page.pid)
    finally:
        page.terminate()
        page.wait(timeout=30)


def test_a_long_ingest_announces_its_time_and_a_short_one_does_not(
    fake_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag.index import ESTIMATE_FROM_CHUNKS

    def listing(n: int, name: str) -> Path:
        path = tmp_path / name
        rows = [
            {
                "id": f"{name}{i}",
                "abstract": f"Paper {i} of {name} studies topic {i * 7919 % 997}. " * 4,
            }
            for i in range(n)
        ]
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return path

    index = PaperIndex(fake_settings)
    small = index.ingest([listing(20, "small.jsonl")])
    assert small.estimate_seconds is None and "about" not in capsys.readouterr().err
    big = index.ingest([listing(ESTIMATE_FROM_CHUNKS, "big.jsonl")])
    assert big.estimate_seconds is not None and big.estimate_seconds >= 0
    err = capsys.readouterr().err
    assert f"embedding {ESTIMATE_FROM_CHUNKS:,} papers" in err and "on this machine" in err
    assert "estimated" in big.render()
