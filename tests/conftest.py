from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag.settings import PROJECT_ROOT, Settings

CORPUS = PROJECT_ROOT / "corpus"
SHARED = PROJECT_ROOT.parent / "shared"
ICML = SHARED / "corpora" / "icml2026_main.jsonl"
ARTIFACTS = PROJECT_ROOT / "tests" / "artifacts"
# Most tests build indexes in fresh homes; each would embed the topic list again (~9 s).
# They share one cache for the run (child processes inherit it); tests of where ingest
# writes drop it to see the default (RAG_HOME/topics).
TOPICS_CACHE = Path(tempfile.mkdtemp(prefix="rag-test-topics-"))
os.environ.setdefault("RAG_SEARCH_TOPICS_CACHE", str(TOPICS_CACHE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(
    module: str, *args: str, env: Mapping[str, str | None] | None = None, timeout: float = 300
):
    """`python -m module args` in the project; `env` adds variables, or drops those set to None."""
    merged = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in merged.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=PROJECT_ROOT,
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


@pytest.fixture(scope="session")
def seed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the 60 seed papers, built once; tests copy it before changing anything."""
    from rag.index import PaperIndex

    home = tmp_path_factory.mktemp("seed") / "home"
    PaperIndex(Settings(home=home)).ingest([CORPUS], progress=False)
    return home


@pytest.fixture
def seed_settings(seed_home: Path, tmp_path: Path) -> Settings:
    home = tmp_path / "home"
    shutil.copytree(seed_home, home)
    return Settings(home=home)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real `chroma run` server on loopback."""
    exe = Path(sys.executable).with_name("chroma")
    port = free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    log = (data / "server.log").open("w")
    proc = subprocess.Popen(
        [str(exe), "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    deadline = time.monotonic() + 60
    url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except OSError as err:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log_text = (data / "server.log").read_text()
                raise RuntimeError(f"chroma run did not start: {log_text}") from err
            time.sleep(0.3)
    yield "127.0.0.1", port
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@dataclass
class LlamaServer:
    url: str
    model: str = "qwen-0.5b"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A real OpenAI-compatible server: llama-cpp-python's, on loopback, serving the 0.5B."""
    from rag.models import ensure_model
    from rag.settings import LLMSettings

    model = ensure_model("qwen2.5-coder-0.5b", LLMSettings().cache)
    port = free_port()
    log = (tmp_path_factory.mktemp("llama-server") / "server.log").open("w")
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
            "--model_alias",
            "qwen-0.5b",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("llama_cpp.server did not start") from None
            time.sleep(0.5)
    yield LlamaServer(f"http://127.0.0.1:{port}/v1")
    proc.terminate()
    proc.wait(timeout=20)


def gzip_bomb(path: Path, size: int, fill: bytes = b"\0") -> Path:
    """A .gz that expands to `size` bytes of `fill`: one 16 MB member, repeated (gzip readers
    join members), so a 2 GB bomb takes a fraction of a second to make and ~2 MB on disk."""
    block = 16 * 1024 * 1024
    member = gzip.compress(fill * (block // len(fill)), compresslevel=9)
    with path.open("wb") as f:
        for _ in range(max(size // block, 1)):
            f.write(member)
    return path
