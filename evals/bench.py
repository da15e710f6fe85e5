"""Scale and speed: what each cost does as the corpus grows, measured side by side.

    python -m evals.bench                       # everything (about 1.5-2 h on 2 cores)
    python -m evals.bench --parts ingest,retrieval --sizes 1000,5863
    python -m evals.bench --parts synthetic --synthetic 100000 --stores embedded,server

Parts (each adds its section to evals/reports/bench.json; evals/BENCHMARKS.md and
evals/reports/bench-growth.png are rewritten from that file after every part):
- ingest: per size, in a fresh child process (so peak memory is that run's): the floor (raw
  SentenceTransformer.encode of the same chunk texts, model loaded beforehand), the first
  ingest, an unchanged re-ingest, peak RSS and index size on disk;
- retrieval: per size, warm p50/p95 of dense, BM25 and hybrid over the eval questions, and of
  metadata list questions (authors, tracks);
- answer: time to first token and total per backend on the 60 seed papers (the openai backend
  against a real llama_cpp.server on 127.0.0.1 serving the bundled 0.5B model);
- cold: `python -m rag.ask` from process start to its "found N papers" line, and the chat page
  from launch to serving, on the smallest and the largest index; with `--vs REV`, also this
  checkout's `rag.ask` against REV's (a git worktree beside), runs alternating;
- synthetic: the vector store alone with N random unit 384-d vectors, embedded Chroma and a
  `chroma run` server: insert rate, query p50/p95, peak memory, disk;
- load: 20 sessions of the chat page asking 5 questions each at once (evals/load.py), answered
  extractively and by an OpenAI-compatible endpoint streaming 20 tokens/s; every answer is
  checked for another session's history or sources;
- shared: two homes on one `chroma run` server, per size: the version check a question makes,
  a cold read of the tables from the server (a home that did not ingest) and from the saved
  copy, how long a running retriever takes to follow a one-paper ingest made from the other
  home, and the server-side ingest lock.

Sizes: 60 (corpus/), 1000 (the first 1,000 ICML 2026 papers), 5863 (ICML 2026),
all (the three files of ../shared/corpora, about 13,000 papers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag.settings import PROJECT_ROOT, Settings

CORPORA = PROJECT_ROOT.parent / "shared" / "corpora"
ICML = CORPORA / "icml2026_main.jsonl"
ALL = [ICML, CORPORA / "icml2026_workshops.jsonl", CORPORA / "iclr2026.jsonl"]
WORK = PROJECT_ROOT / ".rag" / "bench"
RESULTS = PROJECT_ROOT / "evals" / "reports" / "bench.json"
MARKDOWN = PROJECT_ROOT / "evals" / "BENCHMARKS.md"
PLOT = PROJECT_ROOT / "evals" / "reports" / "bench-growth.png"
PARTS = ("ingest", "retrieval", "answer", "cold", "synthetic", "load", "shared")
LOAD_SESSIONS = 20
ANSWER_QUESTIONS = [
    "How much faster is FS-DFM?",
    "Which papers use sparse autoencoders?",
    "What is SOTAlign?",
    "How can a language model forget a concept without retraining?",
    "Which methods make diffusion sampling faster?",
]
COLD_QUESTION = "Which papers use sparse autoencoders?"


def _pct(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "n": len(ordered),
    }


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "RAG_HOME": str(home), **extra}


def _run_measured(cmd: list[str], env: dict[str, str]) -> tuple[str, int]:
    """Run a child to completion; its stdout and its own peak RSS in KiB (via wait4)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, cwd=PROJECT_ROOT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return out, int(usage.ru_maxrss)


# ---------------------------------------------------------------------- corpora per size


def size_paths(size: str) -> list[Path]:
    if size == "60":
        return [PROJECT_ROOT / "corpus"]
    missing = [p for p in (ALL if size == "all" else [ICML]) if not p.exists()]
    if missing:
        raise SystemExit(f"missing {missing[0]}: sizes above 60 need ../shared/corpora")
    if size == "all":
        return ALL
    if size == "5863":
        return [ICML]
    n = int(size)
    subset = WORK / f"icml-first-{n}.jsonl"
    if not subset.exists():
        subset.parent.mkdir(parents=True, exist_ok=True)
        lines = ICML.read_text(encoding="utf-8").splitlines()[:n]
        subset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [subset]


def home_for(size: str) -> Path:
    return WORK / f"home-{size}"


# ---------------------------------------------------------------------- ingest


def _cpu() -> float:
    """CPU seconds of this process, all threads: steadier than wall time on a busy machine."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_ingest(home: Path, paths: list[Path]) -> dict[str, Any]:
    """In its own process: floor, first ingest and unchanged re-ingest of the same texts."""
    from llama_index.core.schema import MetadataMode

    from rag.corpus import merge_records, read_records
    from rag.index import PaperIndex

    settings = Settings(home=home)
    index = PaperIndex(settings)
    model = index.embed_model
    model.get_text_embedding_batch(["warm up the model"] * 8)
    result = read_records(paths, root=PROJECT_ROOT)
    papers = merge_records(result.papers)
    texts = [n.get_content(MetadataMode.EMBED) for p in papers for n in index.nodes_for(p)]
    # The floor is the runtime's own encode of the same texts, with nothing around it.
    t0, c0 = time.perf_counter(), _cpu()
    model.get_text_embedding_batch(texts)
    floor, floor_cpu = time.perf_counter() - t0, _cpu() - c0
    t0, c0 = time.perf_counter(), _cpu()
    first = index.ingest(paths, progress=False)
    first_s, first_cpu = time.perf_counter() - t0, _cpu() - c0
    t0 = time.perf_counter()
    again = index.ingest(paths, progress=False)
    again_s = time.perf_counter() - t0
    return {
        "papers": first.total_papers,
        "chunks": len(texts),
        "floor_s": round(floor, 2),
        "floor_cpu_s": round(floor_cpu, 2),
        "ingest_s": round(first_s, 2),
        "ingest_cpu_s": round(first_cpu, 2),
        "embed_s": round(first.embed_seconds, 2),
        "estimate_s": first.estimate_seconds,
        "reingest_s": round(again_s, 2),
        "reembedded": again.chunks_embedded,
    }


# How `--runtimes` names a way of running the embedding model: RAG_EMBED_* settings.
RUNTIMES = {
    "torch": {"RAG_EMBED_RUNTIME": "torch"},
    "onnx": {"RAG_EMBED_RUNTIME": "onnx"},
    "onnx-int8": {"RAG_EMBED_RUNTIME": "onnx", "RAG_EMBED_PRECISION": "int8"},
}


def bench_ingest(size: str, runtime: str = "onnx") -> dict[str, Any]:
    home = home_for(size)
    shutil.rmtree(home, ignore_errors=True)
    paths = size_paths(size)
    cmd = [sys.executable, "-m", "evals.bench", "--child-ingest", str(home), *map(str, paths)]
    out, peak_kib = _run_measured(cmd, _env(home, **RUNTIMES[runtime]))
    row: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    row |= {
        "size": size,
        "runtime": runtime,
        "model": os.environ.get("RAG_EMBED_MODEL", "minilm"),
        "papers_per_s": round(row["papers"] / row["ingest_s"], 1),
        "ingest_over_floor": round(row["ingest_s"] / row["floor_s"], 3),
        "ingest_over_floor_cpu": round(row["ingest_cpu_s"] / row["floor_cpu_s"], 3),
        "reingest_over_ingest": round(row["reingest_s"] / row["ingest_s"], 4),
        "peak_rss_mb": round(peak_kib / 1024),
        "disk_mb": round(_du(home) / 2**20, 1),
    }
    return row


# ---------------------------------------------------------------------- retrieval


def bench_retrieval(size: str) -> dict[str, Any]:
    from evals.retrieval import DATA, MAIN, load_questions
    from rag.index import PaperIndex
    from rag.retrieve import Retriever

    home = home_for(size)
    if not home.exists():
        PaperIndex(Settings(home=home)).ingest(size_paths(size), progress=False)
    index = PaperIndex(Settings(home=home))
    # Warm as a running chat page is: the torch model loaded (a one-off command's numpy
    # question path is measured by the cold part).
    index.embed_model.get_text_embedding_batch(["warm up"])
    retriever = Retriever(index)
    retriever.load()
    retriever.retrieve("warm up the models", k=5)
    questions = load_questions(DATA, [MAIN])
    times: dict[str, list[float]] = {"dense": [], "bm25": [], "hybrid": [], "metadata": []}
    for q in questions:
        if q["type"] in ("author", "track"):
            t0 = time.perf_counter()
            retriever.retrieve(q["question"], k=5)
            times["metadata"].append((time.perf_counter() - t0) * 1000)
            continue
        for mode in ("dense", "bm25", "hybrid"):
            t0 = time.perf_counter()
            retriever.retrieve(q["question"], k=5, mode=mode)
            times[mode].append((time.perf_counter() - t0) * 1000)
    return {"size": size, "papers": len(retriever.papers)} | {
        mode: _pct(values) for mode, values in times.items()
    }


# ---------------------------------------------------------------------- answers


def _llama_server(model: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_http(f"http://127.0.0.1:{port}/v1/models", 120, proc)
    return proc


def _wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"server for {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} not ready after {timeout:.0f}s")


def _chroma_run(folder: Path, port: int) -> subprocess.Popen[bytes]:
    """`chroma run` on 127.0.0.1:port serving `folder`, once it answers its heartbeat."""
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("chroma")),
            "run",
            "--path",
            str(folder),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    _wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", 60, server)
    return server


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_answer() -> list[dict[str, Any]]:
    from rag.answer import Answerer
    from rag.index import PaperIndex
    from rag.models import ensure_model
    from rag.retrieve import Retriever

    home = home_for("60")
    if not home.exists():
        PaperIndex(Settings(home=home)).ingest(size_paths("60"), progress=False)
    rows = []
    setups = [
        ("extractive", {"backend": "extractive"}),
        ("local qwen2.5-coder-1.5b", {"backend": "local", "local_model": "qwen2.5-coder-1.5b"}),
        ("local qwen2.5-coder-0.5b", {"backend": "local", "local_model": "qwen2.5-coder-0.5b"}),
        ("openai (llama_cpp.server, 0.5b)", {"backend": "openai"}),
    ]
    for label, llm in setups:
        settings = Settings(home=home)
        server = None
        if llm["backend"] == "openai":
            port = _free_port()
            small = settings.llm.model_copy(update={"local_model": "qwen2.5-coder-0.5b"})
            server = _llama_server(ensure_model(small.local_model, small.cache), port)
            llm = llm | {"base_url": f"http://127.0.0.1:{port}/v1", "model": "local"}
        try:
            settings.llm = settings.llm.model_copy(update=llm)
            answerer = Answerer(Retriever(PaperIndex(settings)), settings)
            answerer.ask("warm up: what is FS-DFM?")  # loads the model, caches the system prompt
            first, total = [], []
            for q in ANSWER_QUESTIONS:
                a = answerer.ask(q)
                total.append(a.timings["total_ms"])
                if a.timings.get("first_token_ms") is not None:
                    first.append(a.timings["first_token_ms"])
            rows.append({"backend": label, "first_token_ms": _pct(first), "total_ms": _pct(total)})
        finally:
            if server is not None:
                server.terminate()
                server.wait(10)
    return rows


# ---------------------------------------------------------------------- cold start


def _ask_once(home: Path, cwd: Path = PROJECT_ROOT) -> tuple[float, float]:
    """One `python -m rag.ask` of the code in `cwd`: ms to its "found" line, and to its exit."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag.ask", "--llm", "extractive", COLD_QUESTION],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(home),
        cwd=cwd,
    )
    assert proc.stderr is not None
    found = math.nan
    for line in proc.stderr:
        if line.startswith(b"found "):
            found = (time.monotonic() - t0) * 1000
            break
    proc.stderr.read()
    if proc.wait(120) or math.isnan(found):
        raise SystemExit(f"rag.ask failed on {home} (code in {cwd})")
    return found, (time.monotonic() - t0) * 1000


def cold_ask(home: Path, runs: int = 3) -> dict[str, Any]:
    """Process start to the "found N papers" line of `python -m rag.ask`, several runs."""
    found, total = zip(*(_ask_once(home) for _ in range(runs)), strict=True)
    return {"to_first_paper_ms": _pct(found), "to_exit_ms": _pct(total)}


def cold_vs(rev: str, runs: int = 9) -> dict[str, Any]:
    """`rag.ask` to its first paper, this checkout against `rev`, runs alternating: a ratio
    measured in one sitting. `rev` is checked out beside (a git worktree) and runs in this
    virtualenv, on the seeds indexed by its own code into its own home."""
    tree = WORK / f"rev-{rev}"
    if not tree.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), rev], cwd=PROJECT_ROOT, check=True
        )
    homes = {"this": home_for("60"), rev: WORK / f"home-60-{rev}"}
    subprocess.run(
        [sys.executable, "-m", "rag.ingest", str(PROJECT_ROOT / "corpus")],
        env=_env(homes[rev]),
        cwd=tree,
        check=True,
        capture_output=True,
    )
    times: dict[str, list[float]] = {"this": [], rev: []}
    for _ in range(runs):
        times["this"].append(_ask_once(homes["this"])[0])
        times[rev].append(_ask_once(homes[rev], tree)[0])
    this, other = statistics.median(times["this"]), statistics.median(times[rev])
    return {
        "vs": rev,
        "this_ms": _pct(times["this"]),
        "vs_ms": _pct(times[rev]),
        "ratio": round(this / other, 3),
    }


def cold_page(home: Path, runs: int = 2) -> dict[str, Any]:
    """`python -m ui` from launch until the page and its config are served."""
    ready = []
    for _ in range(runs):
        port = _free_port()
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ui"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=_env(home, RAG_UI_PORT=str(port)),
            cwd=PROJECT_ROOT,
        )
        try:
            _wait_http(f"http://127.0.0.1:{port}/config", 120, proc)
            ready.append((time.monotonic() - t0) * 1000)
        finally:
            proc.terminate()
            proc.wait(20)
    return {"page_ready_ms": _pct(ready)}


def bench_cold(sizes: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        from rag.index import PaperIndex

        home = home_for(size)
        # Always: a home built by older code is brought in step, as `make ingest` would.
        PaperIndex(Settings(home=home)).ingest(size_paths(size), progress=False)
        rows.append({"size": size} | cold_ask(home) | cold_page(home))
    return rows


# ---------------------------------------------------------------------- many users


def bench_load(sessions: int = LOAD_SESSIONS) -> list[dict[str, Any]]:
    """The chat page under `sessions` users at once, per backend; a wrong answer stops it."""
    from evals.load import run_load, run_problems
    from rag.index import PaperIndex
    from rag.settings import LLMSettings, UISettings
    from ui.app import launch

    # The endpoint: a streaming OpenAI-compatible server on loopback at 20 tokens/s (the
    # tests' fake, since what is measured is the page's queueing, not a model).
    sys.path.insert(0, str(PROJECT_ROOT))
    from tests.fake_openai import FakeOpenAI

    home = home_for("60")
    PaperIndex(Settings(home=home)).ingest(size_paths("60"), progress=False)
    tracks = {p.display_name: p.track for p in PaperIndex(Settings(home=home)).papers()}
    rows = []
    for backend, concurrency in (("extractive", 4), ("openai", 8)):
        with FakeOpenAI("slow", token_delay=0.05) as fake:
            llm = LLMSettings(backend=backend, base_url=fake.url, retries=0)  # type: ignore[arg-type]
            ui = UISettings(port=_free_port(), concurrency=concurrency, max_queue=2 * sessions)
            settings = Settings(home=home, llm=llm, ui=ui)
            page = launch(settings, block=False)
            try:
                numbers, turns = run_load(f"http://127.0.0.1:{ui.port}/", backend, tracks, sessions)
            finally:
                page.close()
        problems = run_problems(turns, tracks)
        if problems:
            raise SystemExit(f"load ({backend}): {len(problems)} wrong answers: {problems[:3]}")
        rows.append(numbers | {"concurrency": concurrency})
    return rows


# ---------------------------------------------------------------------- one server, two homes


def bench_shared(sizes: Sequence[str]) -> list[dict[str, Any]]:
    """Home A ingests into a `chroma run` server; home B, which never ingests, follows it."""
    from rag.index import PaperIndex
    from rag.retrieve import Retriever
    from rag.settings import ChromaSettings
    from rag.store import ServerLock, store_name

    rows = []
    for size in sizes:
        root = WORK / f"shared-{size}"
        root.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        server = _chroma_run(root / "db", port)
        try:
            chroma = ChromaSettings(host="127.0.0.1", port=port)
            a = Settings(home=root / "a", chroma=chroma)
            b = Settings(home=root / "b", chroma=chroma)
            PaperIndex(a).ingest(size_paths(size), progress=False)  # unchanged on reruns
            PaperIndex(a).embed_model.get_text_embedding("warm")  # loaded before any timing
            Retriever(PaperIndex(a)).refresh()  # and the imports
            shutil.rmtree(b.home, ignore_errors=True)

            index_b = PaperIndex(b)
            checks = []
            for _ in range(200):
                t0 = time.perf_counter()
                index_b.store_version()
                checks.append((time.perf_counter() - t0) * 1000)

            def cold(settings: Settings) -> float:
                t0 = time.perf_counter()
                Retriever(PaperIndex(settings)).refresh()
                return round((time.perf_counter() - t0) * 1000, 1)

            from_server = cold(b)  # B has no copy yet: it reads the server and saves one
            from_copy = cold(b)
            follower = Retriever(PaperIndex(b))
            follower.refresh()
            papers = len(follower.papers)
            edit = root / "one-more.jsonl"
            abstract = f"A paper added at {time.time():.0f} to time how pages follow an ingest. "
            edit.write_text(json.dumps({"id": "bench-added", "abstract": abstract * 3}) + "\n")
            t0 = time.perf_counter()
            PaperIndex(a).ingest([edit], progress=False)
            one_paper_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            follower.refresh()
            follow_ms = (time.perf_counter() - t0) * 1000
            if not any(p.abstract.startswith(abstract) for p in follower.papers.values()):
                raise SystemExit("shared: the follower did not see the added paper")
            edit.write_text("")
            PaperIndex(a).ingest([edit], prune=True, progress=False)  # as it was

            index_a = PaperIndex(a)
            locks = []
            for _ in range(10):
                t0 = time.perf_counter()
                lock = ServerLock(index_a.client, index_a.name, 30, store_name(a))
                lock.acquire(timeout=5)
                lock.release()
                locks.append((time.perf_counter() - t0) * 1000)
            rows.append(
                {
                    "size": size,
                    "papers": papers,
                    "version_check_ms": _pct(checks),
                    "cold_from_server_ms": from_server,
                    "cold_from_saved_copy_ms": from_copy,
                    "one_paper_ingest_s": round(one_paper_s, 2),
                    "follow_ms": round(follow_ms, 1),
                    "lock_ms": _pct(locks),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            server.terminate()
            server.wait(20)
    return rows


# ---------------------------------------------------------------------- synthetic vectors


def child_synthetic(target: str, n: int, queries: int = 200) -> dict[str, Any]:
    """In its own process: fill a collection with n random unit vectors, then query it."""
    import chromadb
    import numpy as np
    from chromadb.config import Settings as ChromaConfig

    config = ChromaConfig(anonymized_telemetry=False)
    if target.startswith("http://"):
        host, port = target[len("http://") :].split(":")
        client = chromadb.HttpClient(host=host, port=int(port), settings=config)
    else:
        client = chromadb.PersistentClient(path=target, settings=config)
    col = client.get_or_create_collection(
        "synthetic", metadata={"hnsw:space": "cosine"}, embedding_function=None
    )
    rng = np.random.default_rng(0)
    batch = 5000
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        m = min(batch, n - start)
        vectors = rng.standard_normal((m, 384), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        col.add(
            ids=[f"v{start + i}" for i in range(m)],
            embeddings=vectors,
            metadatas=[
                {"paper_id": f"p{(start + i) // 2}", "chunk": (start + i) % 2} for i in range(m)
            ],
        )
    insert_s = time.perf_counter() - t0
    times = []
    for vector in rng.standard_normal((queries, 384), dtype=np.float32):
        t1 = time.perf_counter()
        col.query(query_embeddings=[vector], n_results=20, include=["metadatas", "distances"])
        times.append((time.perf_counter() - t1) * 1000)
    return {
        "vectors": n,
        "insert_s": round(insert_s, 1),
        "insert_per_s": round(n / insert_s),
        "query_ms": _pct(times),
    }


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def bench_synthetic(
    sizes: Sequence[int], stores: Sequence[str], on_row: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """Each row is handed to `on_row` as soon as it is measured (a 1M run takes a while)."""
    rows = []
    for n in sizes:
        for store in stores:
            folder = WORK / f"synthetic-{store}-{n}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            server = None
            target = str(folder)
            if store == "server":
                port = _free_port()
                server = _chroma_run(folder, port)
                target = f"http://127.0.0.1:{port}"
            try:
                cmd = [sys.executable, "-m", "evals.bench", "--child-synthetic", target, str(n)]
                out, peak_kib = _run_measured(cmd, dict(os.environ))
                row = json.loads(out.strip().splitlines()[-1])
                if server is not None:
                    row["server_peak_rss_mb"] = round(_vm_hwm_kib(server.pid) / 1024)
                    row["client_peak_rss_mb"] = round(peak_kib / 1024)
                else:
                    row["peak_rss_mb"] = round(peak_kib / 1024)
            finally:
                if server is not None:
                    server.terminate()
                    server.wait(30)
            row |= {"store": store, "disk_mb": round(_du(folder) / 2**20, 1)}
            rows.append(row)
            shutil.rmtree(folder, ignore_errors=True)
            print(json.dumps(row), file=sys.stderr)
            on_row(row)
    return rows


# ---------------------------------------------------------------------- report


def _machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def load_results() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(RESULTS.read_text())
        return data
    except (OSError, ValueError):
        return {}


def save_results(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    write_markdown(results)
    plot(results)


def _ingest_keyed(row: dict[str, Any]) -> dict[str, Any]:
    """Rows from before runtimes were compared were minilm on torch."""
    model, runtime = row.get("model", "minilm"), row.get("runtime", "torch")
    return row | {"model": model, "runtime": runtime, "key": f"{row['size']}-{model}-{runtime}"}


def _merge_rows(old: list[dict[str, Any]], new: list[dict[str, Any]], key: str) -> list[Any]:
    keep = {str(r[key]): r for r in old}
    keep.update({str(r[key]): r for r in new})
    return list(keep.values())


def _ms(d: dict[str, Any] | None) -> str:
    if not d:
        return "–"
    return f"{d['p50']:g} / {d['p95']:g}"


def write_markdown(r: dict[str, Any]) -> None:
    lines = [
        "# Benchmarks",
        "",
        "Written by `python -m evals.bench` from `evals/reports/bench.json`; each part's date "
        "and command are listed with it. Machine: " + r.get("machine", _machine()) + ".",
        "Ratios compare numbers measured in the same run; absolute times move with machine load.",
        "",
    ]
    if r.get("ingest"):
        lines += [
            f"## Ingest ({r['ingest_meta']})",
            "",
            "| papers | model, runtime | chunks | floor s | ingest s | estimated s | "
            "ingest CPU s | ingest / floor | same in CPU time | "
            "papers/s | unchanged re-ingest s | re-ingest / ingest | peak RSS MB | index MB |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in sorted(r["ingest"], key=lambda x: (x["papers"], x.get("key", ""))):
            runtime = f"{row.get('model', 'minilm')}, {row.get('runtime', 'torch')}"
            lines.append(
                f"| {row['papers']} | {runtime} | {row['chunks']} | {row['floor_s']} | "
                f"{row['ingest_s']} | {row.get('estimate_s') or '–'} | {row['ingest_cpu_s']} | "
                f"{row['ingest_over_floor']} | {row.get('ingest_over_floor_cpu', '–')} | "
                f"{row['papers_per_s']} | {row['reingest_s']} | "
                f"{row['reingest_over_ingest']} | {row['peak_rss_mb']} | {row['disk_mb']} |"
            )
        lines += [
            "",
            "Floor: the runtime's own encode of exactly the chunk texts ingest embeds, "
            "model loaded beforehand, same process. torch is sentence-transformers; onnx is "
            "ONNX Runtime at the model's own precision (fp32), onnx-int8 its int8 export. "
            "CPU time (user + system, all threads) is the steadier ratio when other work "
            "shares the cores. "
            "Peak RSS is that child process's. Estimated: what ingest announced before "
            "embedding, timed on a block of typical chunks.",
            "",
        ]
    if r.get("retrieval"):
        lines += [
            f"## Retrieval latency, warm, ms p50 / p95 ({r['retrieval_meta']})",
            "",
            "| papers | dense | BM25 | hybrid | metadata list |",
            "|---:|---:|---:|---:|---:|",
        ]
        for row in sorted(r["retrieval"], key=lambda x: x["papers"]):
            lines.append(
                f"| {row['papers']} | {_ms(row['dense'])} | {_ms(row['bm25'])} | "
                f"{_ms(row['hybrid'])} | {_ms(row['metadata'])} |"
            )
        lines += ["", "Over the eval questions (the main set of evals/data/questions.jsonl).", ""]
    if r.get("answer"):
        lines += [
            f"## Answer latency, 60 papers, ms p50 / p95 ({r['answer_meta']})",
            "",
            "| backend | first token | total |",
            "|---|---:|---:|",
        ]
        for row in r["answer"]:
            lines.append(
                f"| {row['backend']} | {_ms(row['first_token_ms'])} | {_ms(row['total_ms'])} |"
            )
        lines += [
            "",
            f"{len(ANSWER_QUESTIONS)} topical questions after one warm-up question per backend.",
            "",
        ]
    if r.get("cold"):
        lines += [
            f"## Cold start, ms p50 / p95 ({r['cold_meta']})",
            "",
            "| index | `rag.ask` to first paper | `rag.ask` to exit (extractive) | chat page "
            "ready |",
            "|---|---:|---:|---:|",
        ]
        for row in r["cold"]:
            lines.append(
                f"| {row['size']} | {_ms(row['to_first_paper_ms'])} | {_ms(row['to_exit_ms'])} "
                f"| {_ms(row['page_ready_ms'])} |"
            )
        lines += [
            "",
            "First paper: from process start to the `found N papers` line `rag.ask` prints "
            "before generating. Page ready: from `python -m ui` to its `/config` answering.",
            "",
        ]
        if vs := r.get("cold_vs"):
            lines += [
                f"Against {vs['vs']}, 60 papers, runs alternating: first paper p50 "
                f"{vs['this_ms']['p50']:g} ms against {vs['vs_ms']['p50']:g} ms, "
                f"**{vs['ratio']:g}x** ({vs['this_ms']['n']} runs each).",
                "",
            ]
    if r.get("synthetic"):
        lines += [
            f"## The vector store alone, synthetic vectors ({r['synthetic_meta']})",
            "",
            "| vectors | store | insert /s | query ms p50 / p95 | peak RSS MB | disk MB |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for row in sorted(r["synthetic"], key=lambda x: (x["vectors"], x["store"])):
            rss = (
                f"server {row['server_peak_rss_mb']}, client {row['client_peak_rss_mb']}"
                if "server_peak_rss_mb" in row
                else str(row["peak_rss_mb"])
            )
            lines.append(
                f"| {row['vectors']} | {row['store']} | {row['insert_per_s']} | "
                f"{_ms(row['query_ms'])} | {rss} | {row['disk_mb']} |"
            )
        lines += [
            "",
            "Random unit 384-d vectors (the worst case for HNSW), 2 chunks per 'paper' in the "
            "metadata, batches of 5,000, then 200 queries for the 20 nearest.",
            "",
        ]
    if r.get("load"):
        lines += [
            f"## Many users on the chat page ({r['load_meta']})",
            "",
            "| backend | sessions x questions | concurrency | all answers in | p50 | p95 | "
            "errors |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for row in r["load"]:
            backend = (
                "OpenAI-compatible endpoint streaming 20 tokens/s"
                if row["backend"] == "openai"
                else row["backend"]
            )
            lines.append(
                f"| {backend} | {row['sessions']} x 5 | {row['concurrency']} | "
                f"{row['total_s']:g} s | {row['p50_s']:g} s | {row['p95_s']:g} s | "
                f"{row['errors']} |"
            )
        lines += [
            "",
            "Seed index; answer times include the wait in the page's queue (max queue 2 per "
            "session). No answer cited another question's sources and no follow-up saw another "
            "session's history (the run stops otherwise).",
            "",
        ]
    if r.get("shared"):
        lines += [
            f"## Two homes on one Chroma server ({r['shared_meta']})",
            "",
            "| papers | version check p50 / p95 | cold tables from the server | from the saved "
            "copy | one-paper ingest | the other home follows in | lock take + release p50 |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in r["shared"]:
            lines.append(
                f"| {row['papers']} | {_ms(row['version_check_ms'])} ms | "
                f"{row['cold_from_server_ms']:g} ms | {row['cold_from_saved_copy_ms']:g} ms | "
                f"{row['one_paper_ingest_s']:g} s | {row['follow_ms']:g} ms | "
                f"{row['lock_ms']['p50']:g} ms |"
            )
        lines += [
            "",
            "Home A ingests into a `chroma run` server on 127.0.0.1; home B never ingests. "
            "Every question asks the collection's version first (the check); when an ingest "
            "moved it, the papers and BM25 are read again: from the store when this home has no "
            "copy of that version (B's first start; B saves what it read), else from the copy "
            "(B's next start). A running retriever on B follows A's one-paper ingest in the time "
            "shown (reading and saving); the embedding model is loaded before timing.",
            "",
        ]
    lines += ["![growth](reports/bench-growth.png)", ""]
    MARKDOWN.write_text("\n".join(lines))


def plot(r: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ingest = sorted(r.get("ingest", []), key=lambda x: x["papers"])
    retrieval = sorted(r.get("retrieval", []), key=lambda x: x["papers"])
    if not ingest and not retrieval:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    if ingest:
        x = [row["papers"] for row in ingest]
        axes[0].plot(x, [row["floor_s"] for row in ingest], "o--", label="floor (encode)")
        axes[0].plot(x, [row["ingest_s"] for row in ingest], "o-", label="ingest")
        axes[0].plot(x, [row["reingest_s"] for row in ingest], "o-", label="unchanged re-ingest")
        axes[0].set(xlabel="papers", ylabel="seconds", title="ingest")
        axes[0].legend()
        axes[1].plot(x, [row["peak_rss_mb"] for row in ingest], "o-", label="peak RSS")
        axes[1].plot(x, [row["disk_mb"] for row in ingest], "o-", label="index on disk")
        axes[1].set(xlabel="papers", ylabel="MB", title="memory and disk")
        axes[1].legend()
    if retrieval:
        x = [row["papers"] for row in retrieval]
        for mode in ("dense", "bm25", "hybrid", "metadata"):
            axes[2].plot(x, [row[mode]["p50"] for row in retrieval], "o-", label=mode)
        axes[2].set(xlabel="papers", ylabel="ms (p50)", title="retrieval latency")
        axes[2].legend()
    fig.tight_layout()
    fig.savefig(PLOT, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts")
    parser.add_argument(
        "--sizes", default="1000,5863,all", help="corpus sizes for ingest/retrieval"
    )
    parser.add_argument("--synthetic", default="100000,1000000", help="synthetic vector counts")
    parser.add_argument("--stores", default="embedded,server", help="embedded, server or both")
    parser.add_argument(
        "--runtimes",
        default="onnx",
        help=f"embedding runtimes for ingest and cold, side by side ({', '.join(RUNTIMES)})",
    )
    parser.add_argument(
        "--vs", metavar="REV", help="cold: also time rag.ask against this git revision, alternating"
    )
    parser.add_argument("--child-ingest", nargs="+", metavar="HOME PATH", help=argparse.SUPPRESS)
    parser.add_argument("--child-synthetic", nargs=2, metavar="TARGET N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_ingest:
        home, *paths = args.child_ingest
        print(json.dumps(child_ingest(Path(home), [Path(p) for p in paths])))
        return 0
    if args.child_synthetic:
        target, n = args.child_synthetic
        print(json.dumps(child_synthetic(target, int(n))))
        return 0

    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    sizes = [s for s in args.sizes.split(",") if s]
    for s in sizes:
        if s != "all" and not s.isdigit():
            parser.error(f"bad size {s!r}: a number of papers or 'all'")
    results = load_results()
    results["machine"] = _machine()
    stamp = time.strftime("%Y-%m-%d")

    def meta(cmd: str) -> str:
        return f"{stamp}, `python -m evals.bench {cmd}`"

    size_arg = f"--sizes {args.sizes}"
    runtimes = [r for r in args.runtimes.split(",") if r]
    if set(runtimes) - set(RUNTIMES):
        parser.error(f"unknown runtimes {runtimes}; choose from {', '.join(RUNTIMES)}")
    if "ingest" in parts:
        for size in sizes:
            for runtime in runtimes:
                print(f"ingest {size} ({runtime}) ...", file=sys.stderr, flush=True)
                row = bench_ingest(size, runtime)
                print(json.dumps(row), file=sys.stderr, flush=True)
                old = [_ingest_keyed(r) for r in results.get("ingest", [])]
                results["ingest"] = _merge_rows(old, [_ingest_keyed(row)], "key")
                results["ingest_meta"] = meta(
                    f"--parts ingest {size_arg} --runtimes {args.runtimes}"
                )
                save_results(results)
    if "retrieval" in parts:
        rows = [bench_retrieval(size) for size in ["60", *sizes]]
        results["retrieval"] = _merge_rows(results.get("retrieval", []), rows, "size")
        results["retrieval_meta"] = meta(f"--parts retrieval {size_arg}")
        save_results(results)
    if "answer" in parts:
        results["answer"] = bench_answer()
        results["answer_meta"] = meta("--parts answer")
        save_results(results)
    if "cold" in parts:
        results["cold"] = bench_cold(list(dict.fromkeys(["60", *sizes[-1:]])))
        vs_arg = f" --vs {args.vs}" if args.vs else ""
        results["cold_meta"] = meta(f"--parts cold {size_arg}{vs_arg}")
        results.pop("cold_vs", None)  # a ratio from an earlier run is not this run's
        if args.vs:
            results["cold_vs"] = cold_vs(args.vs)
        save_results(results)
    if "synthetic" in parts:
        counts = [int(n) for n in args.synthetic.split(",") if n]
        stores = [s for s in args.stores.split(",") if s]

        def keyed(row: dict[str, Any]) -> dict[str, Any]:
            return row | {"key": f"{row['vectors']}-{row['store']}"}

        def save_row(row: dict[str, Any]) -> None:
            old = [keyed(r) for r in results.get("synthetic", [])]
            results["synthetic"] = _merge_rows(old, [keyed(row)], "key")
            results["synthetic_meta"] = meta(
                f"--parts synthetic --synthetic {args.synthetic} --stores {args.stores}"
            )
            save_results(results)

        bench_synthetic(counts, stores, save_row)
    if "shared" in parts:
        results["shared"] = bench_shared(list(dict.fromkeys(["60", *sizes[-1:]])))
        results["shared_meta"] = meta(f"--parts shared {size_arg}")
        save_results(results)
    if "load" in parts:
        results["load"] = bench_load()
        results["load_meta"] = meta("--parts load")
        save_results(results)
    print(f"wrote {MARKDOWN.relative_to(PROJECT_ROOT)} and {RESULTS.relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
