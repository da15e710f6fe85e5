"""Abstention: the fitted model, its threshold, calibration files and the fallback without one."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag import abstain
from rag.abstain import Calibration, Signals
from rag.index import PaperIndex
from rag.retrieve import Retriever
from rag.settings import EmbedSettings, Settings

from .conftest import FAKE_ENV, call_cli


def synthetic(n_answerable: int, n_none: int, seed: int = 0) -> list[tuple[Signals, bool]]:
    """Answerable questions close to a paper that stands out; the others far, and half of
    them naming a topic the papers lack (found from cosine 0.7 on)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_answerable):
        top = rng.uniform(0.55, 0.8)
        out.append((Signals(top, rng.uniform(0.05, 0.15), rng.uniform(3, 8)), True))
    for i in range(n_none):
        cutoff = 0.7 if i % 2 else None
        top = rng.uniform(0.3, 0.5)
        sig = Signals(top, rng.uniform(0.0, 0.04), rng.uniform(0, 3), topic_cutoff=cutoff)
        out.append((sig, False))
    return out


def test_fit_separates_separable_data() -> None:
    samples = synthetic(60, 20)
    fitted = abstain.fit(samples)
    cal = Calibration("k", fitted.weights, fitted.intercept, fitted.threshold, fitted.near_topic)
    for sig, answerable in samples:
        at_cutoff = Signals(
            sig.top,
            sig.margin,
            sig.bm25,
            topic="t" if sig.topic_cutoff and sig.topic_cutoff >= fitted.near_topic else None,
        )
        assert (cal.probability(at_cutoff) >= cal.threshold) == answerable
    top, margin, _bm25, topic, name = fitted.weights
    assert top > 0 and margin > 0 and topic < 0
    assert name == 0  # never seen: no weight
    # The cutoff lets the one observed topic cosine count (0.7), not more.
    assert fitted.near_topic <= 0.7


def test_logistic_fit_recovers_the_direction_of_noisy_data() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 2))
    y = (x @ np.array([2.0, -1.0]) + 0.5 + rng.normal(scale=0.5, size=400) > 0).astype(float)
    w, b = abstain.fit_logistic(x, y, l2=1.0)
    assert w[0] > 0 > w[1] and abs(w[0] / w[1] + 2) < 0.6 and b > 0


def test_threshold_wrongly_abstains_on_at_most_two_percent() -> None:
    answerable = [i / 100 for i in range(1, 101)]  # 100 questions: 2 may be turned away
    unanswerable = [0.005, 0.015, 0.025, 0.5]
    t = abstain.choose_threshold(answerable, unanswerable, 0.02)
    assert sum(p < t for p in answerable) <= 2
    assert sum(p < t for p in unanswerable) == 3  # 0.5 would cost 49 answerable ones
    # Midway between the last no-answer question caught and the next answerable one.
    assert t == pytest.approx((0.025 + 0.03) / 2)
    # Nothing separable: abstain on nothing seen.
    t = abstain.choose_threshold([0.5, 0.6], [0.9], 0.02)
    assert t <= 0.5


def test_sweep_finds_the_highest_cutoff_at_which_a_topic_is_lacking() -> None:
    def lacking(cutoff: float) -> str | None:
        return "federated learning" if cutoff <= 0.63 else None

    sig = abstain.measure([0.6, 0.5, 0.5], [4.0], lacking, 0.7, None, sweep=[0.8, 0.63, 0.5])
    assert sig.topic is None and sig.topic_cutoff == 0.63 and sig.margin == pytest.approx(0.1)
    assert sig.features(0.6)[3] == 1.0 and sig.features(0.7)[3] == 0.0
    spelled = abstain.measure([0.6], [], lambda c: "audio", math.inf, None, sweep=[0.8])
    assert spelled.topic == "audio" and spelled.topic_cutoff == math.inf


def calibration(key: str, threshold: float = 0.5) -> Calibration:
    return Calibration(key, (10.0, 5.0, 0.5, -4.0, -4.0), -6.0, threshold, 0.6, {"date": "x"})


def test_calibration_files_round_trip_home_first_then_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "package"
    monkeypatch.setattr(abstain, "PACKAGE_DIR", package)
    home = tmp_path / "home"
    key = "abc123"
    assert not abstain.load([home], key).calibrated

    calibration(key, 0.4).save(package / f"{key}.json")
    found = abstain.load([home], key)
    assert found.calibrated and found.source == package / f"{key}.json" and not found.warning
    assert found.calibration == calibration(key, 0.4)  # every number survives the file

    calibration(key, 0.7).save(home / "calibration" / f"{key}.json")
    found = abstain.load([home], key)
    assert found.source == home / "calibration" / f"{key}.json"
    assert found.calibration is not None and found.calibration.threshold == 0.7
    # Only spelled-out topics: near_topic is written as null and read back as inf.
    Calibration(key, (1.0,) * 5, 0.0, 0.5, math.inf).save(home / "calibration" / f"{key}.json")
    assert json.loads((home / "calibration" / f"{key}.json").read_text())["near_topic"] is None
    assert abstain.load([home], key).near_topic == math.inf


def test_without_a_calibration_the_tools_say_so_and_fall_back(
    fake_seed_copy: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(abstain, "PACKAGE_DIR", tmp_path / "none")
    shutil.rmtree(fake_seed_copy.home / "calibration")
    retriever = Retriever(PaperIndex(fake_seed_copy))
    policy = retriever.abstention
    assert not policy.calibrated and policy.near_topic == math.inf
    assert "no abstention calibration" in policy.warning and "evals.calibrate" in policy.warning
    assert "\n" not in policy.warning

    # Only evidence that reads no cosine: a name no paper contains, a topic spelled out, a
    # kind of data no close paper writes.
    far = retriever.retrieve("crop yield forecasting with deep learning")
    assert not far.abstained and far.signals["calibrated"] == 0.0
    assert "relevance" not in far.signals
    weather = retriever.retrieve("weather forecasting with deep learning")
    assert weather.abstained and weather.data == "weather"
    named = retriever.retrieve("How does AlphaFold predict protein structures?")
    assert named.abstained and "'AlphaFold'" in named.reason
    spelled = retriever.retrieve("Which papers study trajectory prediction for autonomous driving?")
    assert spelled.abstained and "autonomous driving" in spelled.reason

    env = {"RAG_HOME": str(fake_seed_copy.home), **FAKE_ENV}
    done = call_cli("rag.search", "crop yield forecasting with deep learning", env=env)
    assert done.returncode == 0 and done.stdout.startswith("[1]")
    assert done.stderr.startswith("warning: no abstention calibration for the embedding model")
    assert done.stderr.count("\n") == 1

    # The chat page says it under the model in use.
    from ui.app import ChatService

    service = ChatService(fake_seed_copy)
    try:
        assert "no abstention calibration" in service.backend_status("extractive")
    finally:
        service.close()


def test_a_calibrated_model_decides_by_its_probability(fake_seed: Settings) -> None:
    retriever = Retriever(PaperIndex(fake_seed))  # conftest fitted the hashing embedder's
    policy = retriever.abstention
    assert policy.calibrated and not policy.warning
    r = retriever.retrieve("Which papers use sparse autoencoders?")
    assert not r.abstained and r.signals["relevance"] >= r.signals["abstain_below"]
    assert r.signals["calibrated"] == 1.0
    done = call_cli(
        "rag.search", "sparse autoencoders", env={"RAG_HOME": str(fake_seed.home), **FAKE_ENV}
    )
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize(
    "content, why",
    [
        ("{not json", "unreadable"),
        ("[1, 2]", "not a JSON object"),
        ('{"format": 1, "model_key": "other"}', "fitted for model 'other'"),
        ("wrong features", "features"),
        ("nan weight", "finite"),
    ],
)
def test_a_bad_calibration_file_is_skipped_with_a_warning(
    fake_seed_copy: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str,
    why: str,
) -> None:
    monkeypatch.setattr(abstain, "PACKAGE_DIR", tmp_path / "none")
    (path,) = (fake_seed_copy.home / "calibration").glob("*.json")
    good = json.loads(path.read_text())
    if content == "wrong features":
        content = json.dumps(good | {"features": ["top", "bm25"]})
    elif content == "nan weight":
        content = json.dumps(good | {"weights": [float("nan")] * 5})
    path.write_text(content)
    policy = Retriever(PaperIndex(fake_seed_copy)).abstention
    assert not policy.calibrated and f"ignoring the calibration {path}" in policy.warning
    assert why in policy.warning
    env = {"RAG_HOME": str(fake_seed_copy.home), **FAKE_ENV}
    done = call_cli("rag.search", "sparse autoencoders", env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"warning: ignoring the calibration {path}")


def test_the_shipped_calibration_is_the_default_models(tmp_path: Path) -> None:
    # Reads the bundled model folder's configs only: no model is loaded.
    key = PaperIndex(Settings(home=tmp_path, embed=EmbedSettings())).model_key
    path = abstain.PACKAGE_DIR / f"{key}.json"
    assert path.exists(), f"no shipped calibration for the default model {key}"
    calibration = abstain.read_calibration(path, key)
    assert calibration.info["fitted_on"]["questions"] == "evals/questions.jsonl"
    assert 0 < calibration.threshold < 1 and math.isfinite(calibration.near_topic)
