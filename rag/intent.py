"""What a question asks for: a list of papers, a recommendation, a detail, a yes or no, a
comparison or an explanation. One fitted classifier (multinomial logistic regression on the
question's words and word pairs, tf-idf weighted), fitted by `python -m evals.calibrate` on
the development questions' hand-given intents and saved as data (rag/calibration/intent.json).
It does not depend on the embedding model.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from rag.text import WORD, fold, looks_coined

PATH = Path(__file__).with_name("calibration") / "intent.json"
FORMAT = 1


class Asks(StrEnum):
    """What a question wants back."""

    PAPERS = "papers"  # which papers ... / is there work on ... / papers by ...
    RECOMMEND = "recommend"  # what should I read, given what I work on
    DETAIL = "detail"  # a number, a name, a setting
    YESNO = "yesno"  # settled by yes or no
    COMPARE = "compare"  # how do A and B differ
    EXPLAIN = "explain"  # why, how does it work, what is it, summarise


NAME = "<name>"


def grams(question: str) -> list[str]:
    """The classifier's features: folded words and adjacent word pairs, a name (a coined
    shape, or capitalised inside the sentence) read as NAME: "Is SOTAlign a ...?" asks as
    "Is FooNet a ...?" does, whatever paper it names. The opening word and pair count apart
    too ("^does"): where a word stands says what it asks ("Does X ...?" against "How many
    ... does X use?")."""
    words = [
        NAME if looks_coined(w) or (n and w[:1].isupper()) else fold(w)
        for n, w in enumerate(WORD.findall(question))
    ]
    opening = [f"^{' '.join(words[:n])}" for n in (1, 2) if len(words) >= n]
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)] + opening


@dataclass
class IntentModel:
    """tf-idf (sublinear, l2-normalised) over `grams`, then one logistic regression."""

    classes: tuple[str, ...]
    vocab: dict[str, int]
    idf: np.ndarray
    coef: np.ndarray  # classes x vocabulary
    intercept: np.ndarray
    info: dict[str, Any]

    # A gram in fewer training questions than this is left out (it could only memorise).
    MIN_COUNT = 2
    C = 10.0  # LogisticRegression's inverse regularisation, chosen by cross-validation

    def _vector(self, question: str) -> np.ndarray:
        x = np.zeros(len(self.vocab))
        for gram, n in Counter(grams(question)).items():
            if (j := self.vocab.get(gram)) is not None:
                x[j] = (1.0 + math.log(n)) * self.idf[j]
        norm = np.linalg.norm(x)
        return x / norm if norm else x

    def proba(self, question: str) -> dict[str, float]:
        z = self.coef @ self._vector(question) + self.intercept
        e = np.exp(z - z.max())
        return dict(zip(self.classes, (e / e.sum()).tolist(), strict=True))

    def predict_label(self, question: str) -> str:
        p = self.proba(question)
        return max(p, key=lambda c: p[c])

    def predict(self, question: str) -> Asks:
        return Asks(self.predict_label(question))

    @classmethod
    def fit(
        cls, questions: Sequence[str], labels: Sequence[str], info: dict[str, Any] | None = None
    ) -> IntentModel:
        from sklearn.linear_model import LogisticRegression

        df = Counter(g for q in questions for g in set(grams(q)))
        kept = sorted(g for g, n in df.items() if n >= cls.MIN_COUNT)
        vocab = {g: j for j, g in enumerate(kept)}
        idf = np.array([math.log((1 + len(questions)) / (1 + df[g])) + 1.0 for g in kept])
        bare = cls((), vocab, idf, np.zeros((0, len(vocab))), np.zeros(0), {})
        x = np.array([bare._vector(q) for q in questions])
        model = LogisticRegression(C=cls.C, max_iter=5000).fit(x, list(labels))
        classes = tuple(str(c) for c in model.classes_)
        coef, intercept = model.coef_, model.intercept_
        if len(classes) == 2:  # one row for the second class: the first's logit is 0
            coef = np.vstack([np.zeros_like(coef[0]), coef[0]])
            intercept = np.array([0.0, intercept[0]])
        return cls(classes, vocab, idf, coef, intercept, info or {})

    def to_json(self) -> dict[str, Any]:
        grams_ = sorted(self.vocab, key=self.vocab.__getitem__)
        return {
            "format": FORMAT,
            "classes": list(self.classes),
            "grams": grams_,
            "idf": [round(float(v), 5) for v in self.idf],
            "coef": [[round(float(v), 5) for v in row] for row in self.coef],
            "intercept": [round(float(v), 5) for v in self.intercept],
            **self.info,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IntentModel:
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this version reads {FORMAT}")
        classes = tuple(data["classes"])
        if not set(classes) <= {a.value for a in Asks}:
            raise ValueError(f"classes {classes} are not among {[a.value for a in Asks]}")
        grams_ = data["grams"]
        coef = np.asarray(data["coef"], dtype=float)
        if coef.shape != (len(classes), len(grams_)):
            raise ValueError("coef is not classes x grams")
        known = {"format", "classes", "grams", "idf", "coef", "intercept"}
        return cls(
            classes,
            {g: j for j, g in enumerate(grams_)},
            np.asarray(data["idf"], dtype=float),
            coef,
            np.asarray(data["intercept"], dtype=float),
            {k: v for k, v in data.items() if k not in known},
        )

    def save(self, path: Path = PATH) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)


_LOADED: IntentModel | None = None


def model() -> IntentModel:
    """The shipped classifier, read once. A missing or broken file is an install error:
    every question needs an intent, so it is raised, not papered over."""
    global _LOADED
    if _LOADED is None:
        try:
            _LOADED = IntentModel.from_json(json.loads(PATH.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise RuntimeError(
                f"the intent classifier {PATH} is missing or unreadable ({err}); "
                "fit it with `python -m evals.calibrate`"
            ) from err
    return _LOADED
