"""Which papers answer a question, and whether any does: fitted models that every decision reads.

For each question, retrieval gathers `Evidence`: the candidate papers of hybrid search (and
the papers the question names), each with what the index holds about it against the
question: the cosine to its closest passage and where that stands in the collection's
distribution, its BM25 score and both ranks, which of the question's terms and adjacent
term pairs its title and abstract write, and whether the question names it. Two fitted
models read it (`RelevanceModel`, one per embedding model, fitted by
`python -m evals.calibrate` and saved as data):

- the candidate model: the probability that a paper is what the question asks about. It
  ranks the papers, picks a list answer's papers and the papers the writer reads;
- the answerability model: the probability that the collection answers the question at all,
  from the best candidates' features, the question's words and the words the closest paper
  lacks (a detail, a kind of data, a name the abstract never writes). Below its threshold
  the question is declined.

A question term's weight is how often that term is written by the paper a question is
about (`TermWeights`, fitted on the development questions): framing words ("anyone",
"recommend", "papers") weigh little, a topic's words much. Every feature is scale-free
(shares, z-scores, gaps to the best candidate), so one fit serves 60 papers and 6,000.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 2
PACKAGE_DIR = Path(__file__).with_name("calibration")
INTENTS = ("papers", "recommend", "detail", "yesno", "compare", "explain")
CANDIDATE_FEATURES = (
    "cos",
    "cos_z",
    "cos_gap",
    "cos_lead",
    "bm25_rel",
    "dense_rank",
    "bm25_rank",
    "cover",
    "cover_gap",
    "cover_exact",
    "miss",
    "miss_exact",
    "unseen",
    "phrase",
    "title",
    "named",
    "named_other",
    "terms",
    *(f"asks_{i}" for i in INTENTS),
)
# The answerability model reads the closest candidate's features, the best-covering one's,
# the collection's size and the intent, then the question's words (one fitted logit).
_TOP = (
    "cos",
    "cos_z",
    "cos_lead",
    "bm25_rel",
    "cover",
    "cover_exact",
    "miss",
    "miss_exact",
    "unseen",
    "phrase",
    "title",
)
QUESTION_FEATURES = (
    *(f"top_{f}" for f in _TOP),
    "named",
    "terms",
    "best_cover",
    "best_miss",
    "best_cos_z",
    "best_phrase",
    "log_papers",
    "asks_papers",
    "asks_recommend",
    "asks_detail",
    "words",
)


class CalibrationError(ValueError):
    """A relevance file that cannot be used (unreadable, malformed, of another model)."""


@dataclass(frozen=True)
class Candidate:
    """One candidate paper, as the index sees it against the question."""

    id: str
    cos: float  # cosine of the question to the paper's closest passage
    dense_rank: int  # 0: the collection's closest paper
    bm25: float
    bm25_rank: int
    has: tuple[bool, ...]  # per question term: its title or abstract writes it
    exact: tuple[bool, ...]  # ... as the question writes it, plurals aside (text.light)
    in_title: tuple[bool, ...]
    pairs: tuple[bool, ...]  # per adjacent pair of question terms: written side by side
    named: bool  # the question names it (its coined name, title, a quoted phrase)


@dataclass(frozen=True)
class Evidence:
    """What the index holds about a question and its candidates: the models' only input."""

    question: str
    intent: str
    terms: tuple[str, ...]  # the question's terms as BM25 reads them (stems), in order
    words: tuple[str, ...]  # each term as the question writes it
    df: tuple[int, ...]  # passages that hold each term
    passages: int
    papers: int
    cos_mean: float  # over every paper of the collection (or of the filter)
    cos_std: float
    bm25_max: float
    candidates: tuple[Candidate, ...]

    @property
    def names_papers(self) -> bool:
        return any(c.named for c in self.candidates)

    def unique(self) -> list[int]:
        """The index of each distinct term's first occurrence."""
        first: dict[str, int] = {}
        for i, t in enumerate(self.terms):
            first.setdefault(t, i)
        return list(first.values())


# ---------------------------------------------------------------------- term weights


@dataclass
class TermWeights:
    """How likely a question term is written by the paper the question is about: framing
    words score low, topic words high. Fitted on answerable development questions."""

    rates: dict[str, float] = field(default_factory=dict)
    default: float = 0.5

    # Pseudo-observations of the overall rate that each term's own rate starts from.
    PRIOR = 2.0

    def __call__(self, term: str) -> float:
        return self.rates.get(term, self.default)

    def weigh(self, term: str, df: int, passages: int) -> float:
        """The term's weight times its rarity in the collection: how much it says."""
        return self(term) * rarity(df, passages)

    def heaviest(self, terms: Sequence[str], df: Sequence[int], passages: int) -> float:
        """The weight of a question's heaviest term (0 without terms): whether it names a
        topic (`RelevanceModel.topic_from`)."""
        return max(
            (self.weigh(t, d, passages) for t, d in zip(terms, df, strict=True)), default=0.0
        )

    @classmethod
    def fit(cls, observed: Iterable[tuple[Sequence[str], Sequence[bool]]]) -> TermWeights:
        """From each question's distinct terms and whether its gold papers write each one
        (`observations` below)."""
        written: dict[str, float] = defaultdict(float)
        asked: dict[str, float] = defaultdict(float)
        for said, wrote in observed:
            for term, w in zip(said, wrote, strict=True):
                asked[term] += 1
                written[term] += w
        total = sum(asked.values())
        default = sum(written.values()) / total if total else 0.5
        rates = {
            t: round((written[t] + cls.PRIOR * default) / (n + cls.PRIOR), 4)
            for t, n in asked.items()
        }
        return cls(rates, round(default, 4))


def observations(
    samples: Iterable[Sample], topics: Iterable[TopicSample] = ()
) -> Iterator[tuple[tuple[str, ...], tuple[bool, ...]]]:
    """What term weights are fitted on: each answerable question's distinct terms and
    whether its gold papers write them, author's and track's lists included (their words
    besides the names, "what did Smith publish?", are asked of papers that do not write
    them)."""
    for s in samples:
        golds = [c for c in s.evidence.candidates if c.id in s.gold] if s.answerable else []
        if not golds:
            continue
        ev, idx = s.evidence, s.evidence.unique()
        yield tuple(ev.terms[i] for i in idx), tuple(any(c.has[i] for c in golds) for i in idx)
    for t in topics:
        if t.written:
            yield t.terms, t.written


# ---------------------------------------------------------------------- features


# A term in one passage of this many is as rare as a term can be.
RARE = 1000


def rarity(df: int, passages: int) -> float:
    """A term's rarity by the share of passages that hold it, 0 (all) to 1 (one in RARE or
    fewer): the same share, the same rarity, at 60 papers or 6,000."""
    return min(1.0, math.log((passages + 1) / (df + 0.5)) / math.log(RARE))


def _idf(ev: Evidence, i: int) -> float:
    return rarity(ev.df[i], ev.passages)


@dataclass(frozen=True)
class _Weighed:
    idx: list[int]  # distinct terms
    weight: np.ndarray  # term weight x rarity, per distinct term
    total: float
    unseen: float  # the heaviest term no passage of the collection writes


def _weigh(ev: Evidence, weights: TermWeights) -> _Weighed:
    idx = ev.unique()
    w = np.array([weights(ev.terms[i]) * _idf(ev, i) for i in idx])
    unseen = max((weights(ev.terms[i]) for i in idx if ev.df[i] == 0), default=0.0)
    return _Weighed(idx, w, float(w.sum()) or 1.0, unseen)


def _pair_weights(ev: Evidence, weights: TermWeights) -> np.ndarray:
    """A pair of adjacent terms weighs as its lighter term: "conformal prediction" much,
    "which papers" little."""
    w = [weights(t) * _idf(ev, i) for i, t in enumerate(ev.terms)]
    return np.array([min(a, b) for a, b in itertools.pairwise(w)])


def candidate_features(ev: Evidence, weights: TermWeights) -> np.ndarray:
    """One row of CANDIDATE_FEATURES per candidate."""
    if not ev.candidates:
        return np.zeros((0, len(CANDIDATE_FEATURES)))
    wd = _weigh(ev, weights)
    pw = _pair_weights(ev, weights)
    pair_total = float(pw.sum()) or 1.0
    has = np.array([[c.has[i] for i in wd.idx] for c in ev.candidates], dtype=bool)
    title = np.array([[c.in_title[i] for i in wd.idx] for c in ev.candidates], dtype=bool)
    cover = (has * wd.weight).sum(axis=1) / wd.total if wd.idx else np.zeros(len(has))
    missing = np.where(has, 0.0, wd.weight) if wd.idx else np.zeros((len(has), 1))
    miss = missing.max(axis=1) if missing.size else np.zeros(len(has))
    exact = np.array([[c.exact[i] for i in wd.idx] for c in ev.candidates], dtype=bool)
    cover_exact = (exact * wd.weight).sum(axis=1) / wd.total if wd.idx else np.zeros(len(has))
    inexact = np.where(exact, 0.0, wd.weight) if wd.idx else np.zeros((len(has), 1))
    miss_exact = inexact.max(axis=1) if inexact.size else np.zeros(len(has))
    pairs = np.array([[*c.pairs] for c in ev.candidates], dtype=float).reshape(len(has), -1)
    phrase = (pairs * pw).sum(axis=1) / pair_total if pw.size else np.zeros(len(has))
    cos = np.array([c.cos for c in ev.candidates])
    order = np.sort(cos)[::-1]
    # How far each stands out: the best's lead over the second, the others' (negative) gap.
    lead = cos - np.where(cos >= order[0], order[1] if len(order) > 1 else order[0], order[0])
    named_any = ev.names_papers
    rows = []
    for n, c in enumerate(ev.candidates):
        rows.append(
            [
                c.cos,
                (c.cos - ev.cos_mean) / (ev.cos_std or 1.0),
                c.cos - order[0],
                lead[n],
                c.bm25 / ev.bm25_max if ev.bm25_max > 0 else 0.0,
                math.log1p(c.dense_rank),
                math.log1p(c.bm25_rank),
                cover[n],
                cover[n] - cover.max(),
                cover_exact[n],
                miss[n],
                miss_exact[n],
                wd.unseen,
                phrase[n],
                (title[n] * wd.weight).sum() / wd.total if wd.idx else 0.0,
                float(c.named),
                float(named_any and not c.named),
                math.log1p(len(wd.idx)),
                *(float(ev.intent == i) for i in INTENTS),
            ]
        )
    return np.array(rows, dtype=float)


def question_keys(ev: Evidence) -> list[str]:
    """The sparse features of the answerability model's word part: the question's terms and
    term pairs, its first words, its intent, and the terms its closest paper lacks."""
    keys = [f"w:{t}" for t in ev.terms]
    keys += [f"b:{a}_{b}" for a, b in zip(ev.terms, ev.terms[1:], strict=False)]
    keys += [f"s:{t}" for t in ev.terms[:3]]
    keys.append(f"i:{ev.intent}")
    if ev.candidates:
        top = max(ev.candidates, key=lambda c: c.cos)
        keys += [f"m:{t}" for t, h in zip(ev.terms, top.has, strict=True) if not h]
    return keys


def question_features(
    ev: Evidence, weights: TermWeights, words_logit: float, f: np.ndarray | None = None
) -> np.ndarray:
    """QUESTION_FEATURES: the closest candidate's, the best-covering one's, the rest (`f`:
    the candidates' features, when already computed)."""
    f = candidate_features(ev, weights) if f is None else f
    if not len(f):
        return np.zeros(len(QUESTION_FEATURES))
    col = {name: n for n, name in enumerate(CANDIDATE_FEATURES)}
    top = f[int(np.argmax(f[:, col["cos"]]))]
    best = f[int(np.lexsort((f[:, col["cos"]], f[:, col["cover"]]))[-1])]
    return np.array(
        [
            *(top[col[k]] for k in _TOP),
            float(ev.names_papers),
            top[col["terms"]],
            best[col["cover"]],
            best[col["miss"]],
            best[col["cos_z"]],
            best[col["phrase"]],
            math.log(max(ev.papers, 1)),
            float(ev.intent == "papers"),
            float(ev.intent == "recommend"),
            float(ev.intent == "detail"),
            words_logit,
        ]
    )


# ---------------------------------------------------------------------- linear models


@dataclass
class Linear:
    """Logistic regression on standardised features; prediction needs numpy only."""

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.coef + self.intercept

    def proba(self, x: np.ndarray) -> np.ndarray:
        return _sigmoid(self.logit(x))

    @classmethod
    def fit(cls, names: Sequence[str], x: np.ndarray, y: np.ndarray, c: float = 1.0) -> Linear:
        from sklearn.linear_model import LogisticRegression

        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale < 1e-6] = 1.0  # a feature that (almost) never varies gets no weight
        model = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / scale, y)
        return cls(tuple(names), mean, scale, model.coef_[0], float(model.intercept_[0]))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.names),
            "mean": _rounded(self.mean),
            "scale": _rounded(self.scale),
            "coef": _rounded(self.coef),
            "intercept": round(self.intercept, 6),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], names: Sequence[str]) -> Linear:
        if data.get("features") != list(names):
            raise CalibrationError(f"features {data.get('features')!r}, expected {list(names)}")
        mean, scale, coef = (np.asarray(data[k], dtype=float) for k in ("mean", "scale", "coef"))
        if any(a.shape != (len(names),) or not np.isfinite(a).all() for a in (mean, scale, coef)):
            raise CalibrationError("mean, scale and coef need one finite number per feature")
        if (scale <= 0).any():
            raise CalibrationError("every scale must be positive")
        return cls(tuple(names), mean, scale, coef, float(data["intercept"]))


@dataclass
class SparseLinear:
    """Logistic regression on present-or-absent keys (words, missing terms)."""

    weights: dict[str, float]
    intercept: float

    # Keys seen in fewer training questions than this get no weight of their own.
    MIN_COUNT = 2

    def logit(self, keys: Iterable[str]) -> float:
        return self.intercept + sum(self.weights.get(k, 0.0) for k in set(keys))

    @classmethod
    def fit(cls, keys: Sequence[list[str]], y: np.ndarray, c: float = 1.0) -> SparseLinear:
        from scipy.sparse import csr_matrix
        from sklearn.linear_model import LogisticRegression

        counts = Counter(k for ks in keys for k in set(ks))
        vocab = {
            k: n for n, k in enumerate(sorted(k for k, m in counts.items() if m >= cls.MIN_COUNT))
        }
        rows, cols = [], []
        for n, ks in enumerate(keys):
            for k in set(ks) & vocab.keys():
                rows.append(n)
                cols.append(vocab[k])
        x = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(keys), len(vocab)))
        model = LogisticRegression(C=c, max_iter=5000).fit(x, y)
        weights = {k: round(float(model.coef_[0][n]), 5) for k, n in vocab.items()}
        return cls({k: w for k, w in weights.items() if w}, float(model.intercept_[0]))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def _rounded(a: np.ndarray) -> list[float]:
    return [float(f"{v:.8g}") for v in a]


# ---------------------------------------------------------------------- the model


@dataclass(frozen=True)
class TopicSample:
    """An author's or track's development question: its words besides the names, and
    whether it asks about a topic among their papers or for the whole list."""

    terms: tuple[str, ...]
    df: tuple[int, ...]
    passages: int
    topical: bool
    group: str = ""
    # For a list: whether the listed papers write each term (distinct terms).
    written: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Sample:
    """A development question's evidence, with its gold papers; `group` is its question set.
    `complete`: the gold is every relevant paper (a 60-paper set's hand gold, a topic's
    papers by its words), so what else an answer holds is not relevant."""

    evidence: Evidence
    gold: frozenset[str]
    answerable: bool
    group: str
    complete: bool = True


@dataclass
class RelevanceModel:
    """The fitted relevance and answerability models of one embedding model."""

    model_key: str
    terms: TermWeights
    candidates: Linear
    words: SparseLinear
    answerable: Linear
    abstain_below: float  # decline when P(answerable) is below this
    # Per intent, the P(relevant) from which an answer holds a candidate: a list answer
    # (papers) all of them, other answers their most relevant few.
    keep_from: dict[str, float]
    topic_from: float  # a word weighing this much (weight x rarity) names a topic
    info: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None

    # Answerable development questions the threshold may turn away (3%, the bar).
    MAX_WRONGLY_ABSTAINED = 0.03
    # What an answer holds is relevant with at least this precision (mean share over the
    # development questions of its intent), with as many relevant papers as that allows.
    PRECISION = 0.85

    def relevance(self, ev: Evidence) -> np.ndarray:
        """P(relevant) of each candidate."""
        return self.candidates.proba(candidate_features(ev, self.terms))

    def answerability(self, ev: Evidence, f: np.ndarray | None = None) -> float:
        """P(the collection answers the question)."""
        x = question_features(ev, self.terms, self.words.logit(question_keys(ev)), f)
        return float(self.answerable.proba(x[None, :])[0])

    def judge(self, ev: Evidence) -> tuple[np.ndarray, float]:
        """Both at once, the candidates' features computed once: what retrieval reads."""
        f = candidate_features(ev, self.terms)
        return self.candidates.proba(f), self.answerability(ev, f)

    # ------------------------------------------------------------------ fitting

    @classmethod
    def fit(
        cls,
        model_key: str,
        samples: Sequence[Sample],
        topics: Sequence[TopicSample],
        info: dict[str, Any] | None = None,
        oof: Predictions | None = None,
        cross_validate: bool = True,
    ) -> RelevanceModel:
        """Fit every part on the samples; thresholds from predictions each sample's own
        question set took no part in (`out_of_fold`, computed here unless given), so that
        they hold on questions not yet seen. Without `cross_validate` (a quick fit for
        tests), from the fit's own predictions."""
        parts = _fit_parts(samples, topics)
        if oof is None:
            oof = out_of_fold(samples, topics) if cross_validate else _predict(parts, samples)
        abstain_below = choose_abstain(samples, oof.answerable, cls.MAX_WRONGLY_ABSTAINED)
        keep_from = {
            asks: choose_cut(
                samples,
                oof.relevance,
                [s.evidence.intent == asks for s in samples],
                cls.PRECISION,
                limit=None if asks == "papers" else cls.READ,
            )
            for asks in INTENTS
        }
        topic_from = choose_topic(parts[0], topics)
        return cls(model_key, *parts, abstain_below, keep_from, topic_from, info or {})

    # Answers other than lists read at most this many papers.
    READ = 5

    def keeps(self, intent: str) -> float:
        return self.keep_from.get(intent, max(self.keep_from.values(), default=0.5))

    @property
    def smallest_collection(self) -> int:
        """The fewest papers of the collections it was fitted on (0: not recorded)."""
        sizes = self.info.get("fitted_on", {}).get("papers", {})
        return min((int(n) for n in sizes.values()), default=0)

    # ------------------------------------------------------------------ files

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model_key": self.model_key,
            "abstain_below": round(self.abstain_below, 6),
            "keep_from": self.keep_from,
            "topic_from": round(self.topic_from, 6),
            "term_weights": {"default": self.terms.default, "rates": self.terms.rates},
            "candidates": self.candidates.to_json(),
            "answerable": self.answerable.to_json(),
            "words": {"intercept": round(self.words.intercept, 6), "weights": self.words.weights},
            **self.info,
        }

    @classmethod
    def from_json(cls, data: Any, model_key: str) -> RelevanceModel:
        if not isinstance(data, dict):
            raise CalibrationError("not a JSON object")
        if data.get("format") != FORMAT:
            raise CalibrationError(f"format {data.get('format')!r}, this version reads {FORMAT}")
        if data.get("model_key") != model_key:
            raise CalibrationError(f"fitted for model {data.get('model_key')!r}, not {model_key}")
        try:
            terms = TermWeights(
                {str(k): float(v) for k, v in data["term_weights"]["rates"].items()},
                float(data["term_weights"]["default"]),
            )
            words = SparseLinear(
                {str(k): float(v) for k, v in data["words"]["weights"].items()},
                float(data["words"]["intercept"]),
            )
            candidates = Linear.from_json(data["candidates"], CANDIDATE_FEATURES)
            answerable = Linear.from_json(data["answerable"], QUESTION_FEATURES)
            abstain_below = float(data["abstain_below"])
            keep_from = {str(k): float(v) for k, v in data["keep_from"].items()}
            topic_from = float(data["topic_from"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            if isinstance(err, CalibrationError):
                raise
            raise CalibrationError(f"missing or malformed field ({err})") from err
        if not all(0.0 < t < 1.0 for t in (abstain_below, *keep_from.values())):
            raise CalibrationError("abstain_below and keep_from must be probabilities")
        if not math.isfinite(topic_from) or topic_from < 0:
            raise CalibrationError(f"topic_from {topic_from} is not a weight")
        known = {"format", "model_key", "abstain_below", "keep_from", "topic_from"}
        known |= {"term_weights", "candidates", "answerable", "words"}
        info = {k: v for k, v in data.items() if k not in known}
        return cls(
            model_key,
            terms,
            candidates,
            words,
            answerable,
            abstain_below,
            keep_from,
            topic_from,
            info,
        )

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)


def relevance_paths(homes: Sequence[Path], model_key: str) -> list[Path]:
    """Where a model's relevance file is looked for, in order: each home's, then the shipped."""
    name = f"{model_key}.relevance.json"
    return [h / "calibration" / name for h in homes] + [PACKAGE_DIR / name]


def load(homes: Sequence[Path], model_key: str) -> tuple[RelevanceModel | None, str]:
    """The first usable relevance model for an embedding model, and a warning: what was
    skipped, or that there is none (then nothing can be judged: say it, don't guess)."""
    skipped = []
    for path in relevance_paths(homes, model_key):
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            model = RelevanceModel.from_json(data, model_key)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, CalibrationError) as err:
            skipped.append(f"ignoring {path}: {err}")
            continue
        model.source = path
        return model, "; ".join(skipped)
    missing = (
        f"no relevance model for the embedding model {model_key}: papers are ranked by "
        "search alone and no question is declined; fit one with `python -m evals.calibrate`"
    )
    return None, "; ".join([*skipped, missing])


# ---------------------------------------------------------------------- fitting helpers


def _fit_parts(
    samples: Sequence[Sample], topics: Sequence[TopicSample] = ()
) -> tuple[TermWeights, Linear, SparseLinear, Linear]:
    terms = TermWeights.fit(observations(samples, topics))
    candidates = _fit_candidates(samples, terms)
    words_oof = _words_out_of_fold(samples)
    words = SparseLinear.fit([question_keys(s.evidence) for s in samples], _answerable(samples))
    x = np.array(
        [question_features(s.evidence, terms, words_oof[n]) for n, s in enumerate(samples)]
    )
    answerable = Linear.fit(QUESTION_FEATURES, x, _answerable(samples))
    return terms, candidates, words, answerable


def _answerable(samples: Sequence[Sample]) -> np.ndarray:
    return np.array([float(s.answerable) for s in samples])


def _fit_candidates(samples: Sequence[Sample], terms: TermWeights) -> Linear:
    xs, ys = [], []
    for s in samples:
        if s.answerable and s.evidence.candidates:
            xs.append(candidate_features(s.evidence, terms))
            ys += [float(c.id in s.gold) for c in s.evidence.candidates]
    return Linear.fit(CANDIDATE_FEATURES, np.vstack(xs), np.array(ys))


def _words_out_of_fold(samples: Sequence[Sample]) -> list[float]:
    """Each sample's word logit from a fit without its question set: the answerability
    model then learns how far to trust the words on questions they were not fitted on."""
    keys = [question_keys(s.evidence) for s in samples]
    y = _answerable(samples)
    out = [0.0] * len(samples)
    for group in sorted({s.group for s in samples}):
        inside = [n for n, s in enumerate(samples) if s.group != group]
        held = [n for n, s in enumerate(samples) if s.group == group]
        if not held or len(set(y[inside])) < 2:
            continue
        fitted = SparseLinear.fit([keys[n] for n in inside], y[inside])
        for n in held:
            out[n] = fitted.logit(keys[n])
    return out


@dataclass
class Predictions:
    relevance: list[np.ndarray]  # per sample, P(relevant) of each candidate
    answerable: np.ndarray  # per sample


def out_of_fold(samples: Sequence[Sample], topics: Sequence[TopicSample] = ()) -> Predictions:
    """Every sample predicted by models fitted without its question set (leave one set out)."""
    relevance: list[np.ndarray] = [np.zeros(0)] * len(samples)
    answerable = np.zeros(len(samples))
    for group in sorted({s.group for s in samples}):
        inside = [s for s in samples if s.group != group]
        held = [n for n, s in enumerate(samples) if s.group == group]
        others = [t for t in topics if t.group != group]
        got = _predict(_fit_parts(inside, others), [samples[n] for n in held])
        for k, n in enumerate(held):
            relevance[n], answerable[n] = got.relevance[k], got.answerable[k]
    return Predictions(relevance, answerable)


def _predict(
    parts: tuple[TermWeights, Linear, SparseLinear, Linear], samples: Sequence[Sample]
) -> Predictions:
    terms, candidates, words, model = parts
    relevance, answerable = [], []
    for s in samples:
        ev = s.evidence
        relevance.append(candidates.proba(candidate_features(ev, terms)))
        x = question_features(ev, terms, words.logit(question_keys(ev)))
        answerable.append(float(model.proba(x[None, :])[0]))
    return Predictions(relevance, np.array(answerable))


def choose_abstain(samples: Sequence[Sample], p: np.ndarray, max_wrong: float) -> float:
    """The P(answerable) below which to decline: the highest that turns away at most
    `max_wrong` of the answerable samples, midway to the next answerable one."""
    answerable = np.sort(p[_answerable(samples) == 1])
    if not len(answerable):
        return 0.5
    k = int(max_wrong * len(answerable))
    low = answerable[k - 1] if k > 0 else 0.0
    return float((low + answerable[k]) / 2)


def choose_topic(weights: TermWeights, samples: Sequence[TopicSample]) -> float:
    """The weight from which a word names a topic: the cut between the author's and track's
    questions that ask for the whole list and those that ask about a topic, by their
    heaviest word, that gets most of them right (midway between the two it separates)."""
    heaviest = [(weights.heaviest(s.terms, s.df, s.passages), s.topical) for s in samples]
    values = sorted({h for h, _ in heaviest})
    cuts = [(a + b) / 2 for a, b in itertools.pairwise(values)] or [weights.default / 2]
    return float(max(cuts, key=lambda cut: sum((h >= cut) == topical for h, topical in heaviest)))


def choose_cut(
    samples: Sequence[Sample],
    relevance: Sequence[np.ndarray],
    chosen: Sequence[bool],
    precision: float,
    limit: int | None = None,
) -> float:
    """The lowest P(relevant) from which the papers an answer holds (at most `limit`; the
    most relevant one whatever its P) keep `precision`, the mean share of them that is gold
    over the `chosen` answerable samples: as many relevant papers as that allows."""
    rows = [
        (s, r)
        for s, r, c in zip(samples, relevance, chosen, strict=True)
        if c and s.answerable and s.gold and s.complete and len(r)
    ]
    best = 0.95
    for cut in np.arange(0.95, 0.04, -0.01):
        shares = []
        for s, r in rows:
            order = np.argsort(-r, kind="stable")
            held = [s.evidence.candidates[i].id for i in order if r[i] >= cut][:limit]
            held = held or [s.evidence.candidates[order[0]].id]
            shares.append(len(set(held) & s.gold) / len(held))
        if shares and float(np.mean(shares)) >= precision:
            best = float(cut)
    return round(best, 2)
