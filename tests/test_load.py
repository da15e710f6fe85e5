"""Many users at once on the real chat page, driven through gradio_client.

20 sessions ask 5 questions each at the same time, once answered extractively and once by
an OpenAI-compatible endpoint that answers slowly. The endpoint is tests/fake_openai.py in
`slow` mode: what is under test is the page's queueing and the separation of sessions, not
a model, and a real one on this CPU would take minutes per round.

Every session asks about its own paper, and its follow-ups only make sense with its own
history ("How does it work?", "and which of those ..."), so an answer that drew on another
session's history, or cited another question's sources, is caught.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rag.settings import LLMSettings, Settings, UISettings
from ui.app import launch

from .conftest import ARTIFACTS, free_port
from .fake_openai import FakeOpenAI
from .test_ui import client, last_text

SESSIONS = 20
# Papers whose coined name identifies them, each with a track for the listing question.
PAPERS = [
    "AAD",
    "ArbNN",
    "B-NRDEs",
    "CGR",
    "DRAGON",
    "Directo",
    "DistRL",
    "DistSeal",
    "ERK-Guid",
    "FS-DFM",
    "HARC",
    "KECode",
    "LEON",
    "M-CBEs",
    "MemoryLLM",
    "Motion-R1",
    "NAtS-L",
    "PGCMs",
    "SOTAlign",
    "UniAR",
]
_CARD = re.compile(r"<summary>\[(\d+)\] (.*?)</summary>")
_CITE = re.compile(r"\[\[(\d+)\]\]\(#src-\d+\)")
_SEARCHED = re.compile(r"^\*\(searched: (.*?)\)\*")


@dataclass
class Turn:
    question: str
    seconds: float = 0.0
    text: str = ""
    sources: list[str] = field(default_factory=list)  # display names, in [n] order
    cited: list[str] = field(default_factory=list)
    searched: str = ""
    error: str = ""


def questions(name: str, track: str) -> list[str]:
    subarea = track.split(" · ")[-1]
    return [
        f"What is {name}?",
        "How does it work?",
        "What are its main results?",
        f"Which papers are in the {subarea} track?",
        f"and which of those are about {name}?",
    ]


def parse(turn: Turn, history: list[dict[str, Any]], sources_html: str) -> None:
    turn.text = last_text(history)
    cards = {int(n): html.unescape(name) for n, name in _CARD.findall(sources_html)}
    turn.sources = [cards[n] for n in sorted(cards)]
    turn.cited = [cards.get(int(n), f"missing [{n}]") for n in _CITE.findall(turn.text)]
    searched = _SEARCHED.search(turn.text)
    turn.searched = searched.group(1).replace("\\", "") if searched else ""


def run_session(url: str, script: list[str], backend: str, out: list[Turn]) -> None:
    try:
        chat = client(url)
    except Exception as err:  # counted as the session's errors, not a crash of the test
        out.extend(Turn(q, error=f"connect: {err}") for q in script)
        return
    for q in script:
        turn = Turn(q)
        started = time.monotonic()
        try:
            history, sources, _ = chat.predict(q, [], "All tracks", "", backend, api_name="/ask")
            parse(turn, history, sources)
        except Exception as err:
            turn.error = f"{type(err).__name__}: {err}"
        turn.seconds = time.monotonic() - started
        out.append(turn)


@pytest.fixture(scope="module")
def load_home(seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("load") / "home"
    shutil.copytree(seed_home, home)
    return home


@pytest.fixture(scope="module")
def tracks(load_home: Path) -> dict[str, str]:
    from rag.index import PaperIndex

    return {p.display_name: p.track for p in PaperIndex(Settings(home=load_home)).papers()}


def page_settings(home: Path, backend: str, **ui: Any) -> Settings:
    llm = LLMSettings(backend=backend)  # type: ignore[arg-type]
    return Settings(home=home, llm=llm, ui=UISettings(port=free_port(), **ui))


def run_load(url: str, backend: str, tracks: dict[str, str]) -> dict[str, Any]:
    """All sessions at once; every answer checked; the numbers returned."""
    results: list[list[Turn]] = [[] for _ in PAPERS[:SESSIONS]]
    threads = [
        threading.Thread(
            target=run_session, args=(url, questions(name, tracks[name]), backend, out)
        )
        for name, out in zip(PAPERS, results, strict=True)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    total = time.monotonic() - started
    turns = [t for session in results for t in session]
    errors = [f"{t.question}: {t.error}" for t in turns if t.error]
    seconds = sorted(t.seconds for t in turns)
    numbers = {
        "backend": backend,
        "sessions": SESSIONS,
        "questions": len(turns),
        "errors": len(errors),
        "total_s": round(total, 1),
        "p50_s": round(statistics.median(seconds), 2),
        "p95_s": round(seconds[int(0.95 * (len(seconds) - 1))], 2),
        "max_s": round(seconds[-1], 2),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"load-{backend}.json").write_text(json.dumps(numbers, indent=1) + "\n")
    print(numbers)
    assert not errors, errors[:5]
    assert len(turns) == SESSIONS * 5
    for name, session in zip(PAPERS, results, strict=True):
        check_session(name, session, tracks, backend)
    return numbers


def words(text: str) -> str:
    """Track names without the punctuation they differ in ("Transparency, and" / "and")."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def check_session(name: str, turns: list[Turn], tracks: dict[str, str], backend: str) -> None:
    """Each answer cites its own sources, and follow-ups used this session's history."""
    others = [n for n in PAPERS if n != name]
    what, how, results, listing, of_those = turns
    for turn in turns:
        assert turn.sources, (name, turn)
        assert set(turn.cited) <= set(turn.sources), (name, turn)  # no foreign citation
        assert not any(re.search(rf"\b{re.escape(o)}\b", turn.searched) for o in others), (
            name,
            turn.searched,
        )
    assert what.sources[0] == name and name in what.cited, what
    for follow_up in (how, results):
        # Rewritten with this session's own previous answer, and answered about its paper.
        assert name in follow_up.searched and follow_up.sources[0] == name, (name, follow_up)
    subarea = words(tracks[name].split(" · ")[-1])
    assert name in listing.sources, listing
    assert all(subarea in words(tracks[s]) for s in listing.sources), listing
    # Searched within this session's own listing, not another session's.
    assert of_those.searched and set(of_those.sources) <= set(listing.sources), of_those
    assert of_those.sources[0] == name, of_those
    for turn in turns:  # the endpoint was slow, never failed: no answer fell back for it
        assert "The LLM failed" not in turn.text and "cut off" not in turn.text, turn.text


@pytest.mark.slow
def test_20_sessions_extractive(load_home: Path, tracks: dict[str, str]) -> None:
    settings = page_settings(load_home, "extractive", concurrency=4, max_queue=2 * SESSIONS)
    page = launch(settings, block=False)
    try:
        numbers = run_load(f"http://127.0.0.1:{settings.ui.port}/", "extractive", tracks)
    finally:
        page.close()
    assert numbers["errors"] == 0 and numbers["total_s"] < 180


@pytest.mark.slow
def test_20_sessions_on_a_slow_endpoint(load_home: Path, tracks: dict[str, str]) -> None:
    with FakeOpenAI("slow", token_delay=0.05) as fake:
        settings = page_settings(load_home, "openai", concurrency=8, max_queue=2 * SESSIONS)
        settings.llm = settings.llm.model_copy(update={"base_url": fake.url, "retries": 0})
        page = launch(settings, block=False)
        try:
            numbers = run_load(f"http://127.0.0.1:{settings.ui.port}/", "openai", tracks)
        finally:
            page.close()
        # Every answer and every history rewrite went to the endpoint; none were retried.
        assert fake.requests >= SESSIONS * 3
    assert numbers["errors"] == 0 and numbers["total_s"] < 180


@pytest.mark.slow
def test_a_full_queue_says_busy_and_the_page_recovers(load_home: Path) -> None:
    from gradio_client.utils import QueueError

    # One answer at a time, one waiting: the rest of a burst must be turned away.
    with FakeOpenAI("slow", token_delay=0.15) as fake:
        settings = page_settings(load_home, "openai", concurrency=1, max_queue=1)
        settings.llm = settings.llm.model_copy(update={"base_url": fake.url, "retries": 0})
        page = launch(settings, block=False)
        url = f"http://127.0.0.1:{settings.ui.port}/"
        try:
            clients = [client(url) for _ in range(6)]
            jobs = [
                c.submit("What is FS-DFM?", [], "All tracks", "", "openai", api_name="/ask")
                for c in clients
            ]
            answered, busy = 0, []
            for job in jobs:
                try:
                    _, sources, _ = job.result(timeout=120)
                    assert "[1] FS-DFM" in sources
                    answered += 1
                except QueueError as err:
                    busy.append(str(err))
            # gradio_client raises QueueError when joining the queue gets HTTP 503, which is
            # what a full queue answers; the page shows it as gradio's "This application is
            # currently busy. Please try again." Nothing else failed.
            assert answered >= 1 and len(busy) >= 1, (answered, busy)
            assert all("Queue is full" in b and "try again" in b for b in busy), busy
            # Drained, the same page answers again.
            _, sources, _ = clients[2].predict(
                "What is SOTAlign?", [], "All tracks", "", "openai", api_name="/ask"
            )
            assert "[1] SOTAlign" in sources
        finally:
            page.close()
