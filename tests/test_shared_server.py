"""Several homes on one Chroma server: every ingest advances the collection's version and other
pages follow it; ingests from two homes take turns through a lock on the server; a server
that never answers is reported within RAG_CHROMA_TIMEOUT; the Papers and Add papers tabs
say what is wrong and an upload made during an outage is kept.

Real `chroma run` servers on 127.0.0.1, real pages (over HTTP and in headless Chromium) and
real `rag.*` processes; the fake server that accepts connections and never replies is a
plain socket.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from evals.load import client, last_text
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import (
    PROJECT_ROOT,
    ChromaSettings,
    IngestSettings,
    LLMSettings,
    Settings,
    UISettings,
)
from rag.store import IndexBusy, ServerLock, store_name
from ui.app import launch

from .conftest import (
    ARTIFACTS,
    CORPUS,
    FAKE_EMBED,
    ChromaServer,
    SilentServer,
    call_cli,
    chromium,
    free_port,
    run_cli,
)

pytestmark = pytest.mark.slow  # real `chroma run` servers and pages

TIMEOUT = 1.5  # RAG_CHROMA_TIMEOUT in these tests


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ChromaServer]:
    chroma = ChromaServer(tmp_path / "server-db", free_port())
    chroma.start()
    try:
        yield chroma
    finally:
        chroma.stop()


@pytest.fixture
def served_seed(fake_seed_home: Path, tmp_path: Path) -> Iterator[tuple[Path, ChromaServer]]:
    """A copy of the fast seed index whose store a `chroma run` serves; the test may stop
    and start the server."""
    home = tmp_path / "home"
    shutil.copytree(fake_seed_home, home)
    chroma = ChromaServer(home / "chroma", free_port())
    chroma.start()
    try:
        yield home, chroma
    finally:
        chroma.stop()


def on_server(home: Path, server: ChromaServer, **sections: Any) -> Settings:
    return Settings(
        home=home,
        chroma=ChromaSettings(host="127.0.0.1", port=server.port, timeout=TIMEOUT, lock_ttl=3),
        llm=LLMSettings(backend="extractive"),
        **sections,
    )


def env_of(settings: Settings) -> dict[str, str]:
    return {
        "RAG_HOME": str(settings.home),
        "RAG_EMBED_MODEL": settings.embed.model,
        "RAG_CHROMA_HOST": str(settings.chroma.host),
        "RAG_CHROMA_PORT": str(settings.chroma.port),
        "RAG_CHROMA_TIMEOUT": str(settings.chroma.timeout),
        "RAG_CHROMA_LOCK_TTL": str(settings.chroma.lock_ttl),
        "RAG_INGEST_LOCK_TIMEOUT": str(settings.ingest.lock_timeout),
        "RAG_LLM_BACKEND": "extractive",
    }


# ---------------------------------------------------------------------------- two homes


def listing(edited: bool) -> list[dict[str, Any]]:
    """Five short papers (one chunk each); the edit changes one abstract, drops one paper
    and adds one."""
    glacier = (
        "We forecast glacier melt with a graph network over weather stations. "
        + (
            "On Himalayan glaciers it reduces the forecast error by 42 percent."
            if edited
            else "On Antarctic glaciers it reduces the forecast error by 17 percent."
        )
        + " The stations share information along river basins."
    )
    rows = [
        (
            "p1",
            "Sparse Autoencoders for Vision",
            "We train sparse autoencoders on the "
            "activations of vision transformers and find interpretable features.",
        ),
        ("p2", "Graph Forecasting of Glacier Melt", glacier),
        (
            "p3",
            "Diffusion for Protein Folding",
            "A diffusion model folds proteins from their "
            "sequence and matches crystal structures within two angstroms.",
        ),
        (
            "p4",
            "Tabular Learning with Trees",
            "Gradient boosted trees still beat deep "
            "networks on medium-sized tabular benchmarks, we show across forty datasets.",
        ),
    ]
    if edited:
        rows = [r for r in rows if r[0] != "p3"]
        rows.append(
            (
                "p6",
                "Transformers for Bird Song",
                "We classify bird song recordings "
                "with an audio transformer and reach 91 percent accuracy on forest data.",
            )
        )
    return [
        {"id": pid, "title": title, "authors": ["Ada Lovelace"], "abstract": abstract}
        for pid, title, abstract in rows
    ]


def write_listing(path: Path, edited: bool) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in listing(edited)), encoding="utf-8")
    return path


GLACIER_Q = "By how much does the glacier melt forecasting model reduce the forecast error?"


def test_a_change_made_from_one_home_reaches_another_within_one_question(
    server: ChromaServer, tmp_path: Path
) -> None:
    home_a = on_server(tmp_path / "a", server)
    home_b = on_server(tmp_path / "b", server, ui=UISettings(port=free_port(), refresh=0))
    source = write_listing(tmp_path / "lab.jsonl", edited=False)
    PaperIndex(home_a).ingest([source], progress=False)

    # Home B never ingests: a page (no background check, so each question must check on
    # its own) and a retriever, both loaded before the change.
    page = launch(home_b, block=False)
    try:
        chat = client(f"http://127.0.0.1:{home_b.ui.port}/")
        retriever = Retriever(PaperIndex(home_b))

        def ask() -> tuple[str, str]:
            history, sources, _ = chat.predict(
                GLACIER_Q, [], "All tracks", "", "extractive", api_name="/ask"
            )
            return last_text(history), sources

        def papers_tab(words: str) -> list[str]:
            rows, status = chat.predict(words, "All tracks", api_name="/browse")
            assert status == ""
            return [r[0] for r in rows["data"]]

        text, sources = ask()
        assert "17 percent" in text and "Antarctic" in sources
        assert retriever.retrieve("Antarctic glaciers", mode="bm25").hits[0].paper.id == "p2"
        assert sorted(papers_tab("")) == ["p1", "p2", "p3", "p4"]
        before = retriever.version

        write_listing(source, edited=True)
        summary = PaperIndex(home_a).ingest([source], prune=True, progress=False)
        assert (summary.changed, summary.removed, summary.new) == (1, 1, 1)
        assert summary.total_chunks == 4  # the edit kept p2 at one chunk

        text, sources = ask()  # the first question after the change
        assert "42 percent" in text and "Himalayan" in sources
        assert "17 percent" not in text + sources and "Antarctic" not in text + sources
        bm25 = retriever.retrieve("Antarctic glaciers forecast error", mode="bm25")
        assert retriever.version != before
        assert [h.paper.id for h in bm25.hits][:1] == ["p2"]
        assert all("Antarctic" not in h.passage + h.paper.abstract for h in bm25.hits)
        assert "p3" not in {h.paper.id for h in retriever.retrieve("protein folding").hits}
        song = retriever.retrieve("bird song recordings", mode="bm25").hits
        assert song and song[0].paper.id == "p6"
        dense = retriever.retrieve(GLACIER_Q, mode="dense").hits
        assert dense[0].paper.id == "p2" and "Himalayan" in dense[0].paper.abstract
        assert sorted(papers_tab("")) == ["p1", "p2", "p4", "p6"]
        assert papers_tab("Himalayan") == ["p2"] and papers_tab("Antarctic") == []

        # Home B saved what it read, for its next cold start; a fresh process uses it.
        index_b = PaperIndex(home_b)
        version = index_b.store_version()
        assert index_b._saved_state(version) is not None
        done = run_cli("rag.ask", GLACIER_Q, "--json", env=env_of(home_b))
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert "42 percent" in answer["answer"] and "17 percent" not in done.stdout
    finally:
        page.close()


def test_a_page_follows_the_store_in_the_background(server: ChromaServer, tmp_path: Path) -> None:
    from ui.app import ChatService

    home_a = on_server(tmp_path / "a", server)
    home_b = on_server(tmp_path / "b", server, ui=UISettings(refresh=0.3))
    source = write_listing(tmp_path / "lab.jsonl", edited=False)
    PaperIndex(home_a).ingest([source], progress=False)
    service = ChatService(home_b)
    try:
        assert service.paper_count() == 4
        write_listing(source, edited=True)
        PaperIndex(home_a).ingest([source], prune=True, progress=False)
        deadline = time.monotonic() + 10
        while "p6" not in service.retriever.papers and time.monotonic() < deadline:
            time.sleep(0.1)  # no question is asked: the page's own check reads the change
        assert set(service.retriever.papers) == {"p1", "p2", "p4", "p6"}
        assert service.retriever.version == PaperIndex(home_b).store_version()
    finally:
        service.close()


# ---------------------------------------------------------------------------- the lock


def test_ingests_from_two_homes_take_turns_and_give_the_union(
    server: ChromaServer, fake_seed: Settings, tmp_path: Path
) -> None:
    files = sorted(CORPUS.glob("*.txt"))
    assert len(files) == 3
    homes = [
        on_server(
            tmp_path / name, server, embed=FAKE_EMBED, ingest=IngestSettings(lock_timeout=120)
        )
        for name in ("a", "b")
    ]
    parts = [files[:2], files[2:]]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.fake_cli", "rag.ingest", "--json", *map(str, part)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env_of(home)},
            cwd=PROJECT_ROOT,
        )
        for home, part in zip(homes, parts, strict=True)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err
    # The same papers and chunks as one home ingesting all three files: nothing twice.
    alone = PaperIndex(fake_seed)
    shared = PaperIndex(homes[0])
    assert sorted(p.id for p in shared.papers()) == sorted(p.id for p in alone.papers())
    assert shared.count_chunks() == alone.count_chunks()
    # Home B prunes: only papers from its own files may go, and none of those left them.
    done = call_cli("rag.ingest", "--prune", "--json", *map(str, parts[1]), env=env_of(homes[1]))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == 0
    assert shared.count_chunks() == alone.count_chunks()
    assert _lock_collections(shared) == []


def _lock_collections(index: PaperIndex) -> list[str]:
    return sorted(c.name for c in index.client.list_collections() if "-ingest-lock" in c.name)


@pytest.mark.timed
def test_a_held_lock_makes_an_ingest_wait_then_say_who_holds_it(
    server: ChromaServer, tmp_path: Path
) -> None:
    settings = on_server(tmp_path / "a", server, embed=FAKE_EMBED)
    index = PaperIndex(settings)
    held = ServerLock(index.client, index.name, ttl=2, where=store_name(settings))
    held.acquire(timeout=1)
    try:
        time.sleep(3)  # past its first expiry: a live holder renews its lock
        busy = ServerLock(index.client, index.name, ttl=2, where=store_name(settings))
        started = time.monotonic()
        with pytest.raises(IndexBusy, match=f"pid {os.getpid()}"):
            busy.acquire(timeout=1)
        assert 1 <= time.monotonic() - started < 5
        env = env_of(settings) | {"RAG_INGEST_LOCK_TIMEOUT": "1"}
        done = call_cli("rag.ingest", str(CORPUS), env=env)
        assert done.returncode == 3
        assert f"another ingest is writing to the Chroma server at 127.0.0.1:{server.port}" in (
            done.stderr
        )
    finally:
        held.release()
    assert _lock_collections(index) == []
    done = call_cli("rag.ingest", str(CORPUS), "--json", env=env_of(settings))
    assert done.returncode == 0, done.stderr


def test_waiters_on_an_expired_lock_hold_it_one_at_a_time(
    server: ChromaServer, tmp_path: Path
) -> None:
    settings = on_server(tmp_path / "a", server, embed=FAKE_EMBED)
    index = PaperIndex(settings)
    where = store_name(settings)
    dead = ServerLock(index.client, index.name, ttl=1, where=where)
    dead.acquire(timeout=1)
    dead._stop.set()  # its ingest died: never renewed, never released
    held: list[tuple[float, float]] = []

    def ingest() -> None:
        lock = ServerLock(PaperIndex(settings).client, index.name, ttl=5, where=where)
        lock.acquire(timeout=60)
        start = time.monotonic()
        time.sleep(0.5)
        held.append((start, time.monotonic()))
        lock.release()

    waiters = [threading.Thread(target=ingest) for _ in range(4)]
    for t in waiters:
        t.start()
    for t in waiters:
        t.join(timeout=120)
    assert len(held) == 4
    held.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(held))  # never two
    assert _lock_collections(index) == []


@pytest.mark.timed
def test_a_killed_ingests_lock_expires_and_the_next_ingest_proceeds(
    server: ChromaServer, fake_seed: Settings, tmp_path: Path
) -> None:
    a = on_server(tmp_path / "a", server, embed=FAKE_EMBED, ingest=IngestSettings(lock_timeout=60))
    b = on_server(tmp_path / "b", server, embed=FAKE_EMBED, ingest=IngestSettings(lock_timeout=60))
    killed = run_cli("rag.ingest", str(CORPUS), env=env_of(a) | {"RAG_FAULT_POINT": "store.added"})
    assert killed.returncode == -9, killed.stderr
    index = PaperIndex(b)
    assert _lock_collections(index) == [f"{index.name}-ingest-lock"]  # left by the dead one
    started = time.monotonic()
    done = call_cli("rag.ingest", str(CORPUS), "--json", env=env_of(b))
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    assert _lock_collections(index) == []  # taken over, released, no marker left behind
    alone = PaperIndex(fake_seed)
    assert sorted(p.id for p in index.papers()) == sorted(p.id for p in alone.papers())
    assert index.count_chunks() == alone.count_chunks()


# ---------------------------------------------------------------------------- no reply


@pytest.mark.timed
def test_a_server_that_never_answers_is_an_error_within_the_timeout(tmp_path: Path) -> None:
    silent = SilentServer(free_port())
    try:
        settings = Settings(
            home=tmp_path / "home",
            embed=FAKE_EMBED,
            chroma=ChromaSettings(host="127.0.0.1", port=silent.port, timeout=TIMEOUT),
        )
        env = env_of(settings)
        for module, args in (
            ("rag.ask", ["Which papers use sparse autoencoders?"]),
            ("rag.search", ["sparse autoencoders"]),
            ("rag.ingest", [str(CORPUS)]),
        ):
            started = time.monotonic()
            done = call_cli(module, *args, env=env)
            took = time.monotonic() - started
            assert done.returncode == 3, (module, done.stderr)
            assert (
                f"cannot reach the Chroma server at 127.0.0.1:{silent.port}: no reply within "
                f"{TIMEOUT:g} s (RAG_CHROMA_TIMEOUT)" in done.stderr
            ), done.stderr
            assert took < TIMEOUT + 2, (module, took)
        # And as a user runs it: a real process, the same message and exit code.
        done = run_cli("rag.ask", "Which papers use sparse autoencoders?", env=env)
        assert done.returncode == 3 and "no reply within" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    finally:
        silent.close()


@pytest.mark.timed
def test_the_page_during_a_silent_server_then_after_it(
    served_seed: tuple[Path, ChromaServer],
) -> None:
    home, server = served_seed
    # The page checks the store often in the background, as it would during a long outage.
    ui = UISettings(port=free_port(), refresh=0.2)
    settings = on_server(home, server, embed=FAKE_EMBED, ui=ui)
    page = launch(settings, block=False)
    silent: SilentServer | None = None
    url = f"http://127.0.0.1:{settings.ui.port}/"
    question = "Which papers use sparse autoencoders?"

    def ask(_: int = 0) -> tuple[str, float]:
        started = time.monotonic()
        history, _, _ = client(url).predict(
            question, [], "All tracks", "", "extractive", api_name="/ask"
        )
        return last_text(history), time.monotonic() - started

    try:
        assert "TimeSAE" in ask()[0]
        server.stop()
        silent = SilentServer(server.port)
        with ThreadPoolExecutor(5) as pool:
            replies = list(pool.map(ask, range(5)))
        for text, took in replies:
            assert "index is unavailable" in text and "no reply within" in text, text
            assert f"127.0.0.1:{server.port}" in text
            assert took < 2 * TIMEOUT + 5, took  # none waits on the silent server for long
        silent.close()
        silent = None
        server.start()
        # The same page, nothing restarted, at once: a background check that timed out while
        # the server was starting does not turn questions away.
        assert "TimeSAE" in ask()[0]
    finally:
        page.close()
        if silent is not None:
            silent.close()


# ---------------------------------------------------------------------------- in the browser


def test_papers_and_upload_tabs_during_an_outage_in_a_browser(
    served_seed: tuple[Path, ChromaServer], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    home, server = served_seed
    settings = on_server(home, server, embed=FAKE_EMBED, ui=UISettings(port=free_port()))
    page_app = launch(settings, block=False)
    url = f"http://127.0.0.1:{settings.ui.port}/"
    where = f"Chroma server at 127.0.0.1:{server.port}"
    upload = write_listing(tmp_path / "lab-papers.jsonl", edited=True)
    silent: SilentServer | None = None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        server.stop()
        silent = SilentServer(server.port)
        with sync_playwright() as p:
            browser = chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url, wait_until="load")
            page.get_by_role("tab", name="Papers", exact=True).click()
            status = page.locator("#papers-status")
            page.wait_for_function(
                "document.querySelector('#papers-status').innerText.includes('Chroma server')",
                timeout=30_000,
            )
            assert where in status.inner_text() and "no reply within" in status.inner_text()
            page.screenshot(path=str(ARTIFACTS / "papers-outage.png"), full_page=True)

            page.get_by_role("tab", name="Add papers").click()
            page.get_by_role("button", name="Index these files").wait_for(timeout=30_000)
            page.locator("input[type=file][multiple]").set_input_files(str(upload))
            # Gradio can show the uploaded name's stem and extension as separate lines (seen
            # under load), which a text locator for the whole name never matches.
            page.wait_for_function(
                "document.querySelector('#upload-files').textContent.replace(/\\s/g, '')"
                ".includes('lab-papers.jsonl')",
                timeout=30_000,
            )
            page.get_by_role("button", name="Index these files").click()
            page.get_by_text("Kept for later").wait_for(timeout=30_000)
            report = page.locator("body").inner_text()
            assert "Not indexed" in report and where in report and "lab-papers.jsonl" in report
            page.screenshot(path=str(ARTIFACTS / "upload-outage.png"), full_page=True)
            kept = [f for f in (home / "uploads").iterdir() if f.name.endswith("lab-papers.jsonl")]
            assert len(kept) == 1 and kept[0].read_bytes() == upload.read_bytes()

            silent.close()
            silent = None
            server.start()
            time.sleep(TIMEOUT)
            # Later, in a new visit: nothing is chosen, the kept file is indexed.
            page.goto(url, wait_until="load")
            page.get_by_role("tab", name="Add papers").click()
            page.get_by_role("button", name="Index these files").click()
            page.get_by_text("kept from an earlier try").wait_for(timeout=60_000)
            assert "Indexed: 4 new" in page.locator("body").inner_text()
            page.get_by_role("tab", name="Papers", exact=True).click()
            page.get_by_label("Filter", exact=False).first.fill("Himalayan")
            page.wait_for_function(
                "document.querySelector('#papers').innerText.includes('Glacier Melt')",
                timeout=30_000,
            )
            page.screenshot(path=str(ARTIFACTS / "papers-after-outage.png"), full_page=True)
            assert "Chroma server" not in status.inner_text()
            browser.close()
        assert json.loads((home / "uploads" / "pending.json").read_text()) == []
    finally:
        page_app.close()
        if silent is not None:
            silent.close()
