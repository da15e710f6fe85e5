"""An OpenAI-compatible endpoint that fails: bounded retries, then the extractive answer.

The endpoint is tests/fake_openai.py on loopback (a real endpoint cannot be told to fail on
cue); the client side is the real one: OpenAILike, the Answerer and `python -m rag.ask`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag.answer import Answerer
from rag.index import PaperIndex
from rag.llm import BackendError, make_backend
from rag.retrieve import Retriever
from rag.settings import LLMSettings, Settings

from .conftest import FAKE_EMBED, FAKE_ENV, call_cli
from .fake_openai import FakeOpenAI

QUESTION = "how much faster is FS-DFM?"
RETRIES = 2


@pytest.fixture(scope="module")
def retriever(fake_seed_home: Path) -> Retriever:
    """What fails here is the endpoint: the fast seed index is enough, and only read."""
    return Retriever(PaperIndex(Settings(home=fake_seed_home, embed=FAKE_EMBED)))


def answerer_for(
    retriever: Retriever, url: str, timeout: float = 2.0, cooldown: float = 30.0
) -> Answerer:
    llm = LLMSettings(
        backend="openai",
        base_url=url,
        model="fake",
        timeout=timeout,
        retries=RETRIES,
        cooldown=cooldown,
    )
    settings = retriever.index.settings.model_copy(update={"llm": llm})
    return Answerer(retriever, settings)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def test_a_healthy_endpoint_answers_in_one_request(retriever: Retriever, fake: FakeOpenAI) -> None:
    answer = answerer_for(retriever, fake.url).ask(QUESTION)
    assert fake.requests - fake.readings == 1 and not answer.failed and answer.backend == "openai"
    assert answer.sentences[0].supported and answer.text.endswith("[1].")
    assert answer.note == ""


@pytest.mark.parametrize(
    ("mode", "retry_after", "requests", "said"),
    [
        ("500", None, 1 + RETRIES, "InternalServerError"),
        ("429", None, 1 + RETRIES, "RateLimitError"),
        ("429", "1", 1 + RETRIES, "RateLimitError"),
        # Asked to wait longer than a person waits for an answer: no retry at all.
        ("429", "600", 1, "asks to wait 600s"),
    ],
)
@pytest.mark.timed
def test_failing_endpoint_is_retried_a_bounded_number_of_times(
    retriever: Retriever,
    fake: FakeOpenAI,
    mode: str,
    retry_after: str | None,
    requests: int,
    said: str,
) -> None:
    fake.mode, fake.retry_after = mode, retry_after
    started = time.monotonic()
    answer = answerer_for(retriever, fake.url).ask(QUESTION)
    took = time.monotonic() - started
    assert fake.requests == requests
    assert answer.failed and answer.backend == "extractive"
    assert said in answer.note and "Showing the most relevant sentences" in answer.note
    assert "128×" in answer.text and all(s.supported for s in answer.sentences)
    if retry_after == "1":
        assert took >= 2.0  # the endpoint's Retry-After was honoured, twice
    assert took < 15


def test_a_failed_endpoint_rests_before_it_is_asked_again(
    retriever: Retriever, fake: FakeOpenAI
) -> None:
    fake.mode = "500"
    resting = answerer_for(retriever, fake.url, cooldown=30)
    assert resting.ask(QUESTION).failed and fake.requests == 1 + RETRIES
    fake.mode = "ok"
    skipped = resting.ask(QUESTION)
    assert fake.requests == 1 + RETRIES  # every user does not wait out the retries again
    assert skipped.failed and "not asked again for" in skipped.note and "500" in skipped.note


def test_the_rest_ends_and_the_endpoint_is_asked_again(fake: FakeOpenAI) -> None:
    fake.mode = "500"
    backend = make_backend(
        LLMSettings(backend="openai", base_url=fake.url, timeout=2, retries=0, cooldown=0.5)
    )
    with pytest.raises(BackendError, match="500"):
        list(backend.stream("system", "user"))
    fake.mode = "ok"
    with pytest.raises(BackendError, match="not asked again"):
        list(backend.stream("system", "user"))
    time.sleep(0.6)
    assert "".join(backend.stream("system", "user")) == "NOT IN SOURCES"
    assert fake.requests == 2


@pytest.mark.parametrize("mode", ["cut", "reset"])
def test_a_cut_stream_is_not_shown_as_an_answer(
    retriever: Retriever, fake: FakeOpenAI, mode: str
) -> None:
    fake.mode = mode
    streamed: list[str] = []
    answer = answerer_for(retriever, fake.url).ask(QUESTION, on_token=streamed.append)
    partial = "".join(streamed).strip()
    assert partial and len(partial.split()) == fake.cut_after  # it did start answering
    # Not retried: the first part was already on screen (see rag.llm.AnswerCutOff).
    assert fake.requests - fake.readings == 1
    assert answer.failed and "cut off" in answer.note
    assert answer.backend == "extractive" and answer.text.startswith("FS-DFM: ")
    # Every sentence shown is quoted from the sources; none is what the model streamed.
    assert answer.sentences and not any(s.own_words for s in answer.sentences)


def test_a_slow_endpoint_is_waited_for(retriever: Retriever, fake: FakeOpenAI) -> None:
    fake.mode, fake.token_delay = "slow", 0.15  # each token well within the 2 s timeout
    answer = answerer_for(retriever, fake.url).ask(QUESTION)
    assert fake.requests - fake.readings == 1 and not answer.failed and answer.backend == "openai"


@pytest.mark.timed
def test_an_endpoint_that_stalls_mid_answer_is_cut_off(
    retriever: Retriever, fake: FakeOpenAI
) -> None:
    fake.mode = "stall"
    started = time.monotonic()
    answer = answerer_for(retriever, fake.url, timeout=1.0).ask(QUESTION)
    assert answer.failed and "cut off" in answer.note and "Timeout" in answer.note
    assert fake.requests - fake.readings == 1 and time.monotonic() - started < 10


def cli_env(home: Path, url: str, timeout: float = 2.0) -> dict[str, str]:
    return {
        **FAKE_ENV,
        "RAG_HOME": str(home),
        "RAG_LLM": "openai",
        "RAG_LLM_BASE_URL": url,
        "RAG_LLM_TIMEOUT": str(timeout),
        "RAG_LLM_RETRIES": str(RETRIES),
    }


@pytest.mark.timed
def test_cli_hung_endpoint_gives_up_in_bounded_time(retriever: Retriever, fake: FakeOpenAI) -> None:
    fake.mode = "hang"
    started = time.monotonic()
    env = cli_env(retriever.index.settings.home, fake.url, timeout=1.0)
    done = call_cli("rag.ask", QUESTION, env=env)
    assert time.monotonic() - started < 30
    assert done.returncode == 3, done.stderr
    assert fake.requests == 1 + RETRIES
    assert f"after {1 + RETRIES} attempts" in done.stderr and "Timeout" in done.stderr
    assert "128×" in done.stdout and "Traceback" not in done.stderr


def test_cli_cut_stream_exits_3_with_the_extractive_answer(
    retriever: Retriever, fake: FakeOpenAI
) -> None:
    fake.mode = "cut"
    env = cli_env(retriever.index.settings.home, fake.url)
    done = call_cli("rag.ask", QUESTION, "--json", env=env)
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["llm"]["backend"] == "extractive" and "cut off" in out["note"]
    assert "cut off" in done.stderr and "Traceback" not in done.stderr
    fake.mode = "ok"
    done = call_cli("rag.ask", QUESTION, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["llm"]["backend"] == "openai"


def test_retry_after_is_read_in_seconds_milliseconds_or_as_an_http_date() -> None:
    import email.utils

    from rag.llm import _retry_after

    assert _retry_after({"retry-after-ms": "250"}) == 0.25
    assert _retry_after({"retry-after": "3"}) == 3.0
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    wait = _retry_after({"retry-after": soon})
    assert wait is not None and 25 < wait <= 31
    assert _retry_after({"retry-after": "whenever"}) is None and _retry_after({}) is None


def test_a_model_path_that_is_not_a_model_is_a_clear_error(tmp_path: Path) -> None:
    from rag.llm import local_model_path

    missing = LLMSettings(backend="local", model_path=str(tmp_path / "nothing.gguf"))
    with pytest.raises(BackendError, match="is not a file"):
        local_model_path(missing)
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file" * 64)
    with pytest.raises(BackendError, match="cannot load"):
        make_backend(LLMSettings(backend="local", model_path=str(garbage)))
