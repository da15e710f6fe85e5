"""A Chroma server that goes away and comes back: a clear error, then answers again.

The server is a real `chroma run` serving a copy of the seed index's store, stopped and
started again on the same port with the same data while the same objects stay alive.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from evals.load import client, last_text
from rag.answer import Answerer
from rag.index import PaperIndex, StoreUnavailable
from rag.retrieve import Retriever
from rag.settings import ChromaSettings, LLMSettings, Settings, UISettings
from ui.app import launch

from .conftest import FAKE_EMBED, FAKE_ENV, ChromaServer, free_port, run_cli

pytestmark = pytest.mark.slow  # real `chroma run` servers

QUESTION = "Which papers use sparse autoencoders?"


@pytest.fixture
def server_settings(
    fake_seed_home: Path, tmp_path: Path
) -> Iterator[tuple[Settings, ChromaServer]]:
    """The seed index, its Chroma store served by a server this test may stop and start.

    What is under test is the server going away; the hashing embedder keeps it quick."""
    home = tmp_path / "home"
    shutil.copytree(fake_seed_home, home)
    server = ChromaServer(home / "chroma", free_port())
    server.start()
    settings = Settings(
        home=home,
        embed=FAKE_EMBED,
        chroma=ChromaSettings(host="127.0.0.1", port=server.port),
        llm=LLMSettings(backend="extractive"),
        ui=UISettings(port=free_port()),
    )
    try:
        yield settings, server
    finally:
        server.stop()


def test_lost_chroma_server_is_a_clear_error_and_recovery_needs_no_restart(
    server_settings: tuple[Settings, ChromaServer],
) -> None:
    settings, server = server_settings
    where = f"127.0.0.1:{server.port}"
    answerer = Answerer(Retriever(PaperIndex(settings)), settings)
    page = launch(settings, block=False)
    try:
        chat = client(f"http://127.0.0.1:{settings.ui.port}/")

        def ask_page() -> str:
            history, _, _ = chat.predict(
                QUESTION, [], "All tracks", "", "extractive", api_name="/ask"
            )
            return last_text(history)

        assert "TimeSAE" in answerer.ask(QUESTION).text
        assert "TimeSAE" in ask_page()

        server.stop()
        with pytest.raises(StoreUnavailable, match=f"Chroma server at {where}"):
            answerer.ask(QUESTION)
        shown = ask_page()
        assert "index is unavailable" in shown and where in shown
        assert "Traceback" not in shown
        done = run_cli("rag.ask", QUESTION, env=settings_env(settings))
        assert done.returncode == 3, done.stderr
        assert (
            done.stderr.startswith("error: cannot") and f"Chroma server at {where}" in done.stderr
        )
        assert "Traceback" not in done.stderr and done.stdout == ""

        server.start()  # same port, same data; nothing on this side is rebuilt
        assert "TimeSAE" in answerer.ask(QUESTION).text
        assert "TimeSAE" in ask_page()
    finally:
        page.close()


def test_store_down_before_first_question_is_a_clear_error(
    server_settings: tuple[Settings, ChromaServer],
) -> None:
    settings, server = server_settings
    index = PaperIndex(settings)
    assert index.count_chunks() > 0
    server.stop()
    retriever = Retriever(index)  # loads its tables on the first question
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{server.port}"):
        retriever.retrieve(QUESTION)
    server.start()
    assert retriever.retrieve(QUESTION).hits


def settings_env(settings: Settings) -> dict[str, str]:
    assert settings.chroma.host is not None
    return {
        **FAKE_ENV,
        "RAG_HOME": str(settings.home),
        "RAG_CHROMA_HOST": settings.chroma.host,
        "RAG_CHROMA_PORT": str(settings.chroma.port),
        "RAG_LLM": "extractive",
    }
