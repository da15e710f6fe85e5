from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rag.settings import PROJECT_ROOT, EmbedSettings, Settings

from . import fake_embed

CORPUS = PROJECT_ROOT / "corpus"
SHARED = PROJECT_ROOT.parent / "shared"
ICML = SHARED / "corpora" / "icml2026_main.jsonl"
ARTIFACTS = PROJECT_ROOT / "tests" / "artifacts"
fake_embed.register()

# The slow tier is every test that touches a real part: these fixtures hold the real
# embedding model's index, a real server or the chat page. A test using one is marked `slow`
# here, so `pytest -m "not slow"` (make check) cannot pick up a real-model test by mistake.
REAL_FIXTURES = {
    "seed_home",
    "seed_settings",
    "seed_readonly",
    "chroma_server",
    "llama_server",
}


# Under pytest-xdist (`--dist loadgroup`) the tests that run a llama.cpp model share one worker
# (each model is loaded once) and each has the machine first (`cpu_turn`, `_outranking`).
# Tests sharing the Chroma server fixture share a worker too, so it starts once per run
# rather than once per worker.
LLM_FIXTURES = {"llama_server"}
SERVER_FIXTURES = {"chroma_server"}


# As each test is collected: xdist reads the groups in its pytest_collection_modifyitems, so
# they are in place whatever the order of the hooks.
def pytest_itemcollected(item: pytest.Item) -> None:
    used = set(getattr(item, "fixturenames", ()))
    if REAL_FIXTURES & used:
        item.add_marker(pytest.mark.slow)
    if LLM_FIXTURES & used or item.get_closest_marker("llm") is not None:
        item.add_marker(pytest.mark.llm)
        item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group("llm"))
    elif SERVER_FIXTURES & used:
        item.add_marker(pytest.mark.xdist_group("servers"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    # xdist groups a test by a suffix its worker adds to the test's id; a pytest that drops
    # it (9.2) would spread the models' tests over both workers without a word.
    grouped = item.get_closest_marker("xdist_group") is not None
    if grouped and getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid:
        pytest.fail("pytest-xdist's --dist loadgroup lost this test's group: see pytest's pin")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # A model's test takes the machine from its call (its fixtures build indexes and start
    # servers beside the others) and keeps it while the worker's next test is a model's too:
    # one hand-over instead of one per test. Where the machine allows (`_OUTRANK`), other
    # tests run beside it on the cores it leaves idle, and a test that times itself (marker
    # `timed`; mostly waiting, a stalled worker would cost minutes) at the model's priority.
    # Elsewhere they wait for it.
    if not _uses_llm(item):
        if not _OUTRANK:
            turn = cpu_turn(_run_dir(item), exclusive=False)
        elif item.get_closest_marker("timed") is not None:
            turn = _outranking()
        else:
            turn = contextlib.nullcontext()
        with turn:
            yield
        return
    yield
    if _ALONE and (nextitem is None or not _uses_llm(nextitem)):
        _ALONE.pop().close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if _uses_llm(item) and not _ALONE:
        hold = contextlib.ExitStack()
        hold.enter_context(cpu_turn(_run_dir(item), exclusive=True))
        if _OUTRANK:
            hold.enter_context(_outranking())
        _ALONE.append(hold)
    yield


_ALONE: list[contextlib.ExitStack] = []  # this worker's hold on the whole machine, if it has it


def _uses_llm(item: pytest.Item) -> bool:
    return item.get_closest_marker("llm") is not None


def _run_dir(item: pytest.Item) -> Path | None:
    # xdist gives each worker a basetemp inside the run's own: the locks live beside them.
    basetemp = item.config.option.basetemp
    return Path(basetemp).parent if basetemp and os.environ.get("PYTEST_XDIST_WORKER") else None


@contextlib.contextmanager
def cpu_turn(run: Path | None, exclusive: bool) -> Iterator[None]:
    """Under pytest-xdist, a test running a llama.cpp model has the machine to itself against
    the tests that take this lock. llama.cpp's threads wait on each other, so beside any busy
    process of equal priority its model slows 3-4x (the 0.5B evals gate: 91 s alone, 357 s
    beside the other worker). A fair readers-writer lock between the workers: a turnstile,
    then the lock."""
    if run is None:
        yield
        return
    with open(run / "cpu-turn.lock", "a") as turn, open(run / "cpu.lock", "a") as cpu:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(cpu, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(cpu, fcntl.LOCK_UN)


# While a model runs, its worker and every process under it outrank the rest of the run
# (CFS weight 88,761 at nice -20 against 1,024 at 0): the other worker's tests get only the
# cores the model leaves idle (its Python between generations) instead of waiting for it.
# Measured: the 0.5B beside a busy loop took 2.6x as long at equal priority, 1.0x at -20.
OUTRANK_NICE = -20


_BASE_NICE = os.getpriority(os.PRIO_PROCESS, 0)


def _can_outrank() -> bool:
    """Raising priority needs CAP_SYS_NICE; without it the model's tests take the machine."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, 0, OUTRANK_NICE)
        os.setpriority(os.PRIO_PROCESS, 0, _BASE_NICE)
    except OSError:
        return False
    return True


_OUTRANK = _can_outrank()


def _renice_tree(nice: int) -> None:
    """Every thread of this process and of each process under it (servers, browsers, CLI
    children): Linux keeps the nice value per thread, and new ones inherit their creator's."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):  # a thread or process that just ended
                os.setpriority(os.PRIO_PROCESS, tid, nice)


@contextlib.contextmanager
def _outranking() -> Iterator[None]:
    _renice_tree(OUTRANK_NICE)
    try:
        yield
    finally:
        _renice_tree(_BASE_NICE)


CHROMIUM = Path("/usr/bin/chromium")


def chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, with the project's flags, through Playwright."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        args=[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
        ],
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(
    module: str, *args: str, env: Mapping[str, str | None] | None = None, timeout: float = 300
):
    """`python -m module args` in the project; `env` adds variables, or drops those set to None.

    With the hashing embedder selected, the child runs the same entry through tests.fake_cli,
    which registers that embedder first.
    """
    merged = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in merged.items() if v is not None}
    fake = full_env.get("RAG_EMBED_MODEL") == fake_embed.NAME
    command = ["tests.fake_cli", module] if fake else [module]
    return subprocess.run(
        [sys.executable, "-m", *command, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=PROJECT_ROOT,
    )


def call_cli(
    module: str, *args: str, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`run_cli` in this process: the entry function itself, with `env` set around the call.

    For argument parsing, exit codes and output; a couple of tests keep real subprocesses to
    prove the `python -m` entry points end to end.
    """
    from evals import suite
    from rag import cli

    main = {
        "rag.ingest": cli.ingest_main,
        "rag.search": cli.search_main,
        "rag.ask": cli.ask_main,
        "evals": suite.main,
    }
    saved = {k: os.environ.get(k) for k in env or {}}
    out, err = io.StringIO(), io.StringIO()
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: int | str | None = main[module](list(args))
            except SystemExit as exit_:
                code = exit_.code
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
    if isinstance(code, str):  # sys.exit("message")
        err.write(code + "\n")
        code = 1
    return subprocess.CompletedProcess([module, *args], code or 0, out.getvalue(), err.getvalue())


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """An empty home on the real embedding model."""
    return Settings(home=tmp_path / "home")


FAKE_EMBED = EmbedSettings(model=fake_embed.NAME)
FAKE_ENV = {"RAG_EMBED_MODEL": fake_embed.NAME}


@pytest.fixture
def fake_settings(tmp_path: Path) -> Settings:
    """An empty home on the hashing embedder (fast tier)."""
    return Settings(home=tmp_path / "home", embed=FAKE_EMBED)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, embed: EmbedSettings) -> Path:
    """The seed index for `embed`, built once per test run and copied into this process.

    Under pytest-xdist every worker has its own session: the first to get here builds the
    index in the run's shared temporary folder, the others wait for it. Each process then
    works on its own copy, since an embedded Chroma store is not shared between processes.
    """
    from filelock import FileLock

    from rag.index import PaperIndex

    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # the run's folder, above each worker's own
    shared = run / f"built-{name}"
    with FileLock(f"{shared}.lock"):
        if not (shared / "done").exists():
            shutil.rmtree(shared, ignore_errors=True)
            settings = Settings(home=shared / "home", embed=embed)
            PaperIndex(settings).ingest([CORPUS], progress=False)
            (shared / "done").touch()
    home = tmp_path_factory.mktemp(name) / "home"
    shutil.copytree(shared / "home", home)
    return home


@pytest.fixture(scope="session")
def fake_seed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 60 seed papers indexed with the hashing embedder: about a second."""
    return built_once(tmp_path_factory, "fake-seed", FAKE_EMBED)


@pytest.fixture
def fake_seed(fake_seed_home: Path) -> Settings:
    """The shared fast seed index, for tests that only read it."""
    return Settings(home=fake_seed_home, embed=FAKE_EMBED)


@pytest.fixture
def fake_seed_copy(fake_seed_home: Path, tmp_path: Path) -> Settings:
    """A copy of the fast seed index, for tests that change it."""
    home = tmp_path / "home"
    shutil.copytree(fake_seed_home, home)
    return Settings(home=home, embed=FAKE_EMBED)


@pytest.fixture(scope="session")
def seed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the 60 seed papers, built once; tests copy it before changing anything."""
    return built_once(tmp_path_factory, "seed", EmbedSettings())


@pytest.fixture
def seed_readonly(seed_home: Path) -> Settings:
    """The shared real seed index, for tests that only read it."""
    return Settings(home=seed_home)


@pytest.fixture
def seed_settings(seed_home: Path, tmp_path: Path) -> Settings:
    """A copy of the real seed index, for tests that change it."""
    home = tmp_path / "home"
    shutil.copytree(seed_home, home)
    return Settings(home=home)


class ChromaServer:
    """`chroma run` on a fixed port and data folder, that can be stopped and started."""

    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = path.parent / "chroma-server.log"

    def start(self) -> None:
        exe = Path(sys.executable).with_name("chroma")
        args = ["run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [str(exe), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
                urllib.request.urlopen(url, timeout=1).read()
                return
            except OSError as err:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"chroma run did not start: {self.log.read_text()}") from err
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class SilentServer:
    """Accepts connections on 127.0.0.1 and never sends a byte back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port = port
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
        self._thread.join(timeout=5)


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
