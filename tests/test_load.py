"""Several users at once on the real chat page, driven through gradio_client.

Sessions ask 5 questions each at the same time, once answered extractively and once by an
OpenAI-compatible endpoint that answers slowly (tests/fake_openai.py in `slow` mode: what is
under test is the page's queueing and the separation of sessions, not a model). Every
session asks about its own paper and its follow-ups only make sense with its own history,
so an answer that drew on another session's history, or cited another question's sources,
is caught (evals/load.py). Six sessions with four answered at once interleave every kind of
turn; the 20-session figure of evals/BENCHMARKS.md is measured by
`python -m evals.bench --parts load`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evals.load import client, run_load, run_problems
from rag.settings import LLMSettings, Settings, UISettings
from ui.app import launch

from .conftest import ARTIFACTS, FAKE_EMBED, free_port
from .fake_openai import FakeOpenAI

# A real Gradio server under concurrent sessions, whose queue is timed.
pytestmark = [pytest.mark.slow, pytest.mark.timed]
SESSIONS = 6


@pytest.fixture(scope="module")
def load_home(fake_seed_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("load") / "home"
    shutil.copytree(fake_seed_home, home)
    return home


@pytest.fixture(scope="module")
def tracks(load_home: Path) -> dict[str, str]:
    from rag.index import PaperIndex

    index = PaperIndex(Settings(home=load_home, embed=FAKE_EMBED))
    return {p.display_name: p.track for p in index.papers()}


def page_settings(home: Path, backend: str, **ui: Any) -> Settings:
    llm = LLMSettings(backend=backend)  # type: ignore[arg-type]
    return Settings(home=home, embed=FAKE_EMBED, llm=llm, ui=UISettings(port=free_port(), **ui))


def check_load(url: str, backend: str, tracks: dict[str, str]) -> dict[str, Any]:
    numbers, sessions = run_load(url, backend, tracks, SESSIONS)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"load-{backend}.json").write_text(json.dumps(numbers, indent=1) + "\n")
    print(numbers)
    assert numbers["errors"] == 0 and numbers["questions"] == SESSIONS * 5, numbers
    problems = run_problems(sessions, tracks)
    assert not problems, problems[:5]
    return numbers


def test_sessions_at_once_extractive(load_home: Path, tracks: dict[str, str]) -> None:
    settings = page_settings(load_home, "extractive", concurrency=4, max_queue=2 * SESSIONS)
    page = launch(settings, block=False)
    try:
        check_load(f"http://127.0.0.1:{settings.ui.port}/", "extractive", tracks)
    finally:
        page.close()


def test_sessions_at_once_on_a_slow_endpoint(load_home: Path, tracks: dict[str, str]) -> None:
    with FakeOpenAI("slow", token_delay=0.05) as fake:
        settings = page_settings(load_home, "openai", concurrency=4, max_queue=2 * SESSIONS)
        settings.llm = settings.llm.model_copy(update={"base_url": fake.url, "retries": 0})
        page = launch(settings, block=False)
        try:
            check_load(f"http://127.0.0.1:{settings.ui.port}/", "openai", tracks)
        finally:
            page.close()
        # Every answer and every history rewrite went to the endpoint; none were retried.
        assert fake.requests >= SESSIONS * 3


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
