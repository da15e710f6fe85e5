"""The two-server deployment, end to end: a real `chroma run`, a real llama_cpp.server, and
the commands and chat page of a machine that holds neither the vectors nor the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.settings import ChromaSettings, LLMSettings, Settings, UISettings
from ui.app import launch

from .conftest import CORPUS, LlamaServer, call_cli, free_port, run_cli

pytestmark = pytest.mark.slow


def test_chroma_server_and_llm_server_end_to_end(
    chroma_server: tuple[str, int], llama_server: LlamaServer, tmp_path: Path
) -> None:
    host, port = chroma_server
    store = {
        "RAG_CHROMA_HOST": host,
        "RAG_CHROMA_PORT": str(port),
        "RAG_CHROMA_COLLECTION_PREFIX": "deploy",
    }
    llm = {"RAG_LLM": "openai", "RAG_LLM_BASE_URL": llama_server.url, "RAG_LLM_MODEL": "qwen-0.5b"}

    # The ingesting machine fills the server's collection (in this process, whose model is
    # loaded already; the answering machine below is a real `python -m rag.ask`).
    ingester = tmp_path / "ingester"
    done = call_cli("rag.ingest", str(CORPUS), "--json", env={"RAG_HOME": str(ingester), **store})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total_papers"] == 60

    # The answering machine starts with an empty RAG_HOME: the vectors come from the Chroma
    # server, BM25 is rebuilt from it in memory, the answer comes from the LLM server.
    page_home = tmp_path / "page"
    env = {"RAG_HOME": str(page_home), **store, **llm}
    done = run_cli("rag.ask", "How much faster is FS-DFM?", "--json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["llm"]["backend"] == "openai" and not out["abstained"]
    assert out["sources"][0]["display_name"] == "FS-DFM"
    assert out["citations"] and {c["n"] for c in out["citations"]} <= {
        s["n"] for s in out["sources"]
    }
    assert not (page_home / "chroma").exists()  # nothing of the store is kept locally
    found = run_cli("rag.search", "sparse autoencoders explain time series", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["display_name"] == "TimeSAE"

    ui_port = free_port()
    settings = Settings(
        home=page_home,
        chroma=ChromaSettings(host=host, port=port, collection_prefix="deploy"),
        llm=LLMSettings(backend="openai", base_url=llama_server.url, model="qwen-0.5b"),
        ui=UISettings(port=ui_port),
    )
    app = launch(settings, block=False)
    try:
        from gradio_client import Client

        client = Client(f"http://127.0.0.1:{ui_port}/", verbose=False)
        history, sources, _ = client.predict(
            "Which papers use sparse autoencoders?",
            [],
            "All tracks",
            "",
            "openai",
            api_name="/ask",
        )
        content = history[-1]["content"]
        text = content if isinstance(content, str) else str(content)
        # A cited answer; what the 0.5B model writes is checked (and flagged) by the verifier.
        assert "](#src-" in text
        assert "TimeSAE" in sources or "SAEmnesia" in sources
    finally:
        app.close()
