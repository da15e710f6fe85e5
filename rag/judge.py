"""Yes/no readings of the sources by the answer's own model, as fitted decisions.

The model reads the same prompt it answers from and is asked one question about it; its
first-token log-odds of "Yes" over "No" is the one named feature, and a logistic fit on
labelled questions turns it into a probability. Three readings use it:

- `verdict`: does the evidence answer a yes/no question yes? (rag.prompts.VERDICT_ASK)
  Between `low` and `cut` the reading is too unsure to state: the answer says what the
  sources state without a verdict. The fit sets the band, the narrowest whose verdicts
  outside it are right at least ACCURACY of the time on the labelled questions.
- `claim`: does the source sentence an answer's sentence aligned to state it? (CLAIM_ASK)
  Read only for sentences the alignment verifier accepts; "no" under `cut`, set by the fit
  for the verifier's precision target (PRECISION) on its labelled pairs.
- `premise`: do the sources agree with what a question takes for granted? (PREMISE_ASK)
  Most questions' premises hold, so "no" needs P(yes) under `cut`, set by the fit so that
  few ordinary questions are told their premise fails (FALSE_ALARMS).

A fit belongs to one model (a model's log-odds mean nothing to another), is written by
`python -m evals.judge --fit` into rag/calibration/, and is said to be missing when absent:
the reading then falls back to the model's own choice (log-odds above 0).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag.relevance import PACKAGE_DIR as CALIBRATION

KINDS = ("verdict", "premise", "claim")
FEATURES = ("yes_log_odds",)
# The share of ordinary questions (premises that hold) a premise fit may answer "No" to: a
# wrong "No" opening a sound answer costs the reader more than a missed correction.
FALSE_ALARMS = 0.025
# The verifier's precision target (issue "answers that are right"): the claim fit's cut is
# the lowest that reaches it on the labelled pairs the alignment accepts.
PRECISION = 0.90
# The share of stated yes/no verdicts that must be right on the labelled questions: a wrong
# "No." opening an answer misleads more than an answer that gives the evidence without one.
ACCURACY = 0.85


def fit_path(kind: str, model: str, home: Path = CALIBRATION) -> Path:
    """Where `kind`'s fit for this model file (or endpoint model name) is kept."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
    return home / f"{kind}.{safe}.json"


@dataclass
class Reading:
    """P(yes) from the log-odds: sigmoid(coef * log_odds + intercept); "yes" at `cut` or
    above; "no" under `low` (`cut` when None), unsettled between."""

    kind: str
    model: str
    coef: float = 1.0
    intercept: float = 0.0
    fitted: bool = False
    cut: float = 0.5
    info: dict[str, Any] = field(default_factory=dict)
    features: tuple[str, ...] = FEATURES
    low: float | None = None

    def p_yes(self, log_odds: float) -> float:
        z = self.coef * log_odds + self.intercept
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def predict(self, log_odds: float) -> bool:
        return self.p_yes(log_odds) >= self.cut

    def decide(self, log_odds: float) -> str:
        """ "yes", "no", or "open" in the band where the reading is too unsure to state."""
        p = self.p_yes(log_odds)
        if p >= self.cut:
            return "yes"
        return "no" if p < (self.cut if self.low is None else self.low) else "open"

    @classmethod
    def fit(
        cls,
        kind: str,
        model: str,
        log_odds: list[float],
        yes: list[bool],
        ordinary: list[float] | None = None,
        precision: float | None = None,
        accuracy: float | None = None,
    ) -> Reading:
        """Logistic regression on the labelled log-odds; with `ordinary` (log-odds of
        questions whose answer is yes), `cut` is lowered until at most FALSE_ALARMS of
        them would be answered no; with `precision`, `cut` is the lowest at which the
        pairs read yes are that share yes-labelled (0.5 if none is); with `accuracy`, the
        band [low, cut) is the narrowest around 0.5 leaving the most questions outside it
        whose verdicts are that share right."""
        from sklearn.linear_model import LogisticRegression

        if len(set(yes)) < 2:
            raise ValueError(f"{kind}: a fit needs both yes and no labels")
        lr = LogisticRegression(C=1.0).fit([[x] for x in log_odds], yes)
        reading = cls(
            kind,
            model,
            float(lr.coef_[0][0]),
            float(lr.intercept_[0]),
            True,
            info={"n": len(yes), "yes": sum(yes)},
        )
        if ordinary:
            ps = sorted(reading.p_yes(x) for x in ordinary)
            allowed = int(FALSE_ALARMS * len(ps))  # this many may fall under the cut
            reading.cut = min(0.5, ps[allowed])
            reading.info["ordinary"] = len(ps)
        if precision is not None:
            pairs = sorted(zip((reading.p_yes(x) for x in log_odds), yes, strict=True))
            for i, (p, _) in enumerate(pairs):
                above = [y for _, y in pairs[i:]]
                if sum(above) >= precision * len(above):
                    reading.cut = p
                    break
        if accuracy is not None:
            reading.low, reading.cut = _band([reading.p_yes(x) for x in log_odds], yes, accuracy)
            reading.info["accuracy"] = accuracy
        return reading

    def save(self, home: Path = CALIBRATION) -> Path:
        path = fit_path(self.kind, self.model, home)
        data = asdict(self) | {"features": list(self.features)}
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, kind: str, model: str, home: Path = CALIBRATION) -> Reading:
        """The fit for this model, or the unfitted reading (the model's own choice)."""
        path = fit_path(kind, model, home)
        if not path.is_file():
            return cls(kind, model)
        data = json.loads(path.read_text(encoding="utf-8"))
        data["features"] = tuple(data.get("features", FEATURES))
        return cls(**data)


def _band(ps: list[float], yes: list[bool], accuracy: float) -> tuple[float, float]:
    """(low, cut): of the bands [low, cut) holding 0.5, between observed probabilities, the
    one leaving the most questions outside it with verdicts right at least `accuracy` of
    the time (narrowest on ties; [0.5, 0.5), no band, when that is right enough)."""
    from bisect import bisect_left
    from itertools import accumulate

    order = sorted(zip(ps, yes, strict=True))
    sorted_ps = [p for p, _ in order]
    nos = [0, *accumulate(not y for _, y in order)]  # "no" labels among the first k
    yeses = [0, *accumulate(y for _, y in order)]
    n = len(order)
    best: tuple[int, float, float, float] | None = None
    for low in sorted({p for p in ps if p < 0.5} | {0.5}):
        i = bisect_left(sorted_ps, low)  # read "no": the first i
        for cut in sorted({p for p in ps if p > 0.5} | {0.5}):
            j = bisect_left(sorted_ps, cut)  # read "yes": from j on
            said = i + n - j
            right = nos[i] + yeses[n] - yeses[j]
            if said and right >= accuracy * said:
                key = (said, -(cut - low), low, cut)
                if best is None or key[:2] > best[:2]:
                    best = key
    if best is None:  # no band is right enough: only the surest of each side is said
        return min(ps), max(ps)
    return best[2], best[3]
