"""Whether a topical question is about anything indexed: one fitted model, per embedding model.

The signals of a question (`Signals`: how close the closest paper is, how far it stands out,
the best BM25 score, a known topic it names that the closest papers lack, a name no paper
contains) go into one logistic regression, fitted by `python -m evals.calibrate` on the
development questions. Cosines mean different things for different embedding models, so its
numbers (weights, threshold, and the cosine from which a question is near a known topic) live
in a calibration file per model, `<model key>.json`: first RAG_HOME/calibration/, then the
one shipped in this package (rag/calibration/, for the default model).

Without a calibration for the model in use, the tools say so and abstain only on evidence
that reads no cosine: a name no paper contains, or a topic a question asking for papers
spells out that the closest papers lack.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rag.topics import Topics

FORMAT = 1
PACKAGE_DIR = Path(__file__).with_name("calibration")
# The model's inputs, in the order of a calibration file's weights.
FEATURES = ("top", "margin", "log_bm25", "topic", "name")
# The margin is over the papers a default result list shows after the first.
MARGIN_OVER = 5
# Answerable questions the threshold may turn away, as a share of those that reach the test.
MAX_WRONGLY_ABSTAINED = 0.02
# L2 strength on standardised weights: a unit Gaussian prior, since 19 no-answer questions
# cannot support large weights.
L2 = 1.0


class CalibrationError(ValueError):
    """A calibration file that cannot be used (unreadable, malformed, of another model)."""


@dataclass(frozen=True)
class Signals:
    """What a topical question's retrieval says about whether the collection answers it.

    `topic` and `name` are the evidence found (or None). `topic_cutoff` is kept only while
    calibrating: the highest near-topic cosine at which `topic` would be found (inf: found
    with no cosine, spelled out word for word).
    """

    top: float  # best dense cosine
    margin: float  # its lead over the mean of the next MARGIN_OVER papers
    bm25: float  # best BM25 score
    topic: str | None = None
    name: str | None = None
    topic_cutoff: float | None = None

    def features(self, near_topic: float | None = None) -> np.ndarray:
        """The model's inputs; with `near_topic`, `topic` as it would be at that cutoff."""
        if near_topic is None:
            topic = self.topic is not None
        else:
            topic = self.topic_cutoff is not None and self.topic_cutoff >= near_topic
        # BM25 evidence grows with each rarer shared word but with diminishing weight.
        return np.array(
            [self.top, self.margin, math.log1p(max(self.bm25, 0.0)), topic, self.name is not None],
            dtype=float,
        )


def measure(
    dense_scores: Sequence[float],
    bm25_scores: Sequence[float],
    lacking: Callable[[float], str | None] | None,
    near_topic: float,
    unknown_name: Callable[[], str | None] | None,
    sweep: Sequence[float] = (),
) -> Signals:
    """Signals from the two legs' scores (best first) and the topic and name checks.

    `lacking(cutoff)` is the topic the question names that the closest papers lack, counting
    topics from that cosine on; `sweep` are cutoffs to try, highest first (calibration only).
    """
    top = dense_scores[0] if dense_scores else 0.0
    rest = list(dense_scores[1 : 1 + MARGIN_OVER])
    margin = top - sum(rest) / len(rest) if rest else 0.0
    bm25 = bm25_scores[0] if bm25_scores else 0.0
    # An empty string is no evidence either.
    topic = (lacking(near_topic) or None) if lacking else None
    cutoff = None
    if lacking and sweep:
        # Fewer topics count at a higher cutoff, so the first one found is the highest.
        cutoff = next((c for c in (math.inf, *sweep) if lacking(c)), None)
    name = (unknown_name() or None) if unknown_name else None
    return Signals(top, margin, bm25, topic, name, cutoff)


def topics_at(topics: Topics, cutoff: float) -> Topics:
    """The same topics, near a question from another cosine on."""
    at = copy.copy(topics)
    at.near_cutoff = cutoff
    return at


def near_cutoffs(topics: Topics, vector: Any) -> list[float]:
    """The cosines of the topics nearest a question, highest first: the cutoffs to sweep."""
    return [sim for _phrase, sim in topics.near(vector, limit=10, cutoff=-math.inf)]


@dataclass(frozen=True)
class Calibration:
    """A fitted abstention model for one embedding model (one calibration file)."""

    model_key: str
    weights: tuple[float, ...]
    intercept: float
    threshold: float  # abstain below this probability that the collection answers
    near_topic: float  # cosine from which a question is near a known topic (rag.topics)
    info: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, metrics

    def probability(self, signals: Signals) -> float:
        """The model's probability that the collection answers the question."""
        z = float(np.dot(self.weights, signals.features())) + self.intercept
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model_key": self.model_key,
            "features": list(FEATURES),
            "weights": [round(w, 6) for w in self.weights],
            "intercept": round(self.intercept, 6),
            "threshold": round(self.threshold, 6),
            # null: no cosine makes a topic near, only spelling it out does
            "near_topic": round(self.near_topic, 6) if math.isfinite(self.near_topic) else None,
            **self.info,
        }

    @classmethod
    def from_json(cls, data: Any, model_key: str) -> Calibration:
        if not isinstance(data, dict):
            raise CalibrationError("not a JSON object")
        if data.get("format") != FORMAT:
            raise CalibrationError(f"format {data.get('format')!r}, this version reads {FORMAT}")
        if data.get("model_key") != model_key:
            raise CalibrationError(f"fitted for model {data.get('model_key')!r}, not {model_key}")
        if data.get("features") != list(FEATURES):
            raise CalibrationError(f"features {data.get('features')!r}, expected {FEATURES}")
        try:
            weights = tuple(float(w) for w in data["weights"])
            numbers = [float(data[k]) for k in ("intercept", "threshold")]
            near = data["near_topic"]
            numbers.append(math.inf if near is None else float(near))
        except (KeyError, TypeError, ValueError) as err:
            raise CalibrationError(f"missing or non-numeric field ({err})") from err
        if len(weights) != len(FEATURES) or not all(map(math.isfinite, (*weights, *numbers[:2]))):
            raise CalibrationError("weights, intercept and threshold must be finite numbers")
        if math.isnan(numbers[2]):
            raise CalibrationError("near_topic must be a number or null")
        if not 0.0 < numbers[1] < 1.0:
            raise CalibrationError(f"threshold {numbers[1]} is not a probability")
        known = {"format", "model_key", "features", "weights", "intercept", "threshold"}
        info = {k: v for k, v in data.items() if k not in known | {"near_topic"}}
        return cls(model_key, weights, numbers[0], numbers[1], numbers[2], info)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")
        tmp.replace(path)


def read_calibration(path: Path, model_key: str) -> Calibration:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CalibrationError(f"unreadable ({err})") from err
    return Calibration.from_json(data, model_key)


def calibration_paths(homes: Sequence[Path], model_key: str) -> list[Path]:
    """Where the calibration of a model is looked for, in order."""
    return [h / "calibration" / f"{model_key}.json" for h in homes] + [
        PACKAGE_DIR / f"{model_key}.json"
    ]


@dataclass(frozen=True)
class Decision:
    abstain: bool
    reason: str
    signals: dict[str, float]


@dataclass
class Abstention:
    """The abstention policy in force: a calibration, or the fallback without one.

    `warning` is set when the fallback is in force or a calibration file was skipped; the
    command-line tools print it and the chat page can show it. `recording` policies (for
    calibration) never abstain and keep every question's signals in `recorded`.
    """

    calibration: Calibration | None
    model_key: str = ""
    source: Path | None = None
    warning: str = ""
    recording: bool = False
    recorded: list[Signals] = field(default_factory=list)

    @property
    def calibrated(self) -> bool:
        return self.calibration is not None

    @property
    def near_topic(self) -> float:
        """Cosine from which a question is near a known topic; without a calibration no
        cosine is trusted, so only topics spelled out word for word count."""
        return self.calibration.near_topic if self.calibration else math.inf

    def decide(self, signals: Signals) -> Decision:
        values = {
            "top_dense": round(signals.top, 4),
            "margin": round(signals.margin, 4),
            "bm25": round(signals.bm25, 4),
            "unmentioned_topic": float(signals.topic is not None),
            "unknown_name": float(signals.name is not None),
            "calibrated": float(self.calibrated),
        }
        if self.recording:
            self.recorded.append(signals)
            return Decision(False, "", values)
        evidence = ""
        if signals.topic is not None:
            evidence = f"the question is about {signals.topic!r}; none of the closest papers "
            evidence += "mention it"
        elif signals.name is not None:
            evidence = f"no indexed paper mentions {signals.name!r}"
        if self.calibration is None:
            return Decision(bool(evidence), evidence, values)
        p = self.calibration.probability(signals)
        values["relevance"] = round(p, 4)
        values["abstain_below"] = round(self.calibration.threshold, 4)
        threshold = self.calibration.threshold
        if p >= threshold:
            return Decision(False, "", values)
        # The reason names what decided: the evidence alone, when the question would pass
        # without it; else how far it is, and the evidence too.
        plain = replace(signals, topic=None, name=None)
        if evidence and self.calibration.probability(plain) >= threshold:
            return Decision(True, evidence, values)
        far = f"nothing indexed is about this question (relevance {p:.2f} < {threshold:.2f})"
        return Decision(True, f"{far}; {evidence}" if evidence else far, values)


def load(homes: Sequence[Path], model_key: str, model_name: str = "") -> Abstention:
    """The policy for a model: its calibration from the first place that has a usable one,
    else the fallback with a warning saying why."""
    skipped = []
    for path in calibration_paths(homes, model_key):
        if not path.exists():
            continue
        try:
            found = read_calibration(path, model_key)
        except CalibrationError as err:
            skipped.append(f"ignoring the calibration {path}: {err}")
            continue
        return Abstention(found, model_key, path, "; ".join(skipped))
    name = f"{model_name} " if model_name else ""
    warning = "; ".join(
        [
            *skipped,
            f"no abstention calibration for the embedding model {name}({model_key}): "
            "questions are declined only for a name no paper contains or a topic they spell "
            "out that the closest papers lack; fit one with `python -m evals.calibrate`",
        ]
    )
    return Abstention(None, model_key, None, warning)


# ---------------------------------------------------------------------- fitting


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Logistic regression by Newton's method, L2 on standardised weights (not the
    intercept); returns weights and intercept in the units of `x`."""
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std == 0] = 1.0  # a feature that never varies gets no weight
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    penalty = np.diag([l2] * x.shape[1] + [0.0])
    beta = np.zeros(z.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -50, 50)))
        grad = z.T @ (p - y) + penalty @ beta
        hess = (z * (p * (1 - p))[:, None]).T @ z + penalty + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    weights = beta[:-1] / std
    return weights, float(beta[-1] - weights @ mean)


def choose_threshold(
    answerable: Sequence[float], unanswerable: Sequence[float], max_false: float
) -> float:
    """The probability below which to abstain: abstains on as many no-answer questions as
    possible while abstaining on at most `max_false` of the answerable ones; midway between
    the scores it separates (the widest margin)."""
    ans = sorted(answerable)
    allowed = int(max_false * len(ans) + 1e-9)
    ceiling = ans[allowed] if allowed < len(ans) else 1.0  # abstaining below it is allowed
    caught = [p for p in unanswerable if p < ceiling]
    if not caught:
        return min(ans[0] / 2, 0.5) if ans else 0.5  # abstain on nothing seen
    low = max(caught)
    high = min(p for p in [*ans, 1.0] if p > low)
    return (low + high) / 2


@dataclass(frozen=True)
class Fit:
    weights: tuple[float, ...]
    intercept: float
    threshold: float
    near_topic: float


def fit(
    samples: Sequence[tuple[Signals, bool]],
    max_false: float = MAX_WRONGLY_ABSTAINED,
    l2: float = L2,
) -> Fit:
    """The near-topic cutoff, weights and threshold from (signals, answerable) pairs.

    Each cutoff between two observed `topic_cutoff` values is tried; the one whose model
    abstains on the most no-answer questions within the limit wins (then fewer answerable
    ones abstained, then the better log-likelihood).
    """
    y = np.array([float(ok) for _, ok in samples])
    seen = sorted({s.topic_cutoff for s, _ in samples if s.topic_cutoff is not None} - {math.inf})
    # Midway between neighbouring observed values; inf: only spelled-out topics count.
    candidates = [math.inf, *[(a + b) / 2 for a, b in itertools.pairwise(seen)]]
    if seen:
        candidates += [seen[0], seen[-1]]
    best: tuple[tuple[float, ...], Fit] | None = None
    for cutoff in sorted(set(candidates), reverse=True):
        x = np.array([s.features(cutoff) for s, _ in samples])
        w, b = fit_logistic(x, y, l2)
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w + b, -50, 50)))
        threshold = choose_threshold(p[y == 1], p[y == 0], max_false)
        caught = int(((p < threshold) & (y == 0)).sum())
        wrong = int(((p < threshold) & (y == 1)).sum())
        loglik = float(np.sum(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
        key = (caught, -wrong, loglik)
        if best is None or key > best[0]:
            best = (key, Fit(tuple(map(float, w)), float(b), float(threshold), cutoff))
    assert best is not None
    return best[1]
