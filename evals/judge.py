"""The model's yes/no readings (rag.judge): fitted on labelled questions, and measured.

    python -m evals.judge --fit [verdict premise claim] [--cache DIR]   # for the local model
    python -m evals.judge --measure evals/data/premises.jsonl   # whole answers, premise rows

`--fit` asks each labelled question as the answer path would, up to the model's reading,
and writes nothing but the reading: verdicts from the yes/no questions of
`evals/data/questions.jsonl` with a `label` (at 60 papers and at ICML scale), premises from
`evals/data/premises.jsonl` (false-premise questions and their true twins), claims from the
verifier's labelled pairs (`evals/data/verifier_calibration.jsonl`) that the alignment
verifier accepts. It prints each fit's cross-validated figures and writes the fits into
rag/calibration/. With `--cache DIR` the readings are kept in DIR/<kind>.json and reused
(a refit of the decision without reading again).

`--measure` answers every question of a premise file with the model and counts, for the
false-premise questions, those whose answer says the premise does not hold (a reading of
"premise", or a "no" verdict) and those answered as if it held with a supported claim; for
their true twins, those wrongly said not to hold. Figures carry Wilson 95% intervals.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evals.retrieval import DATA, ICML, MAIN, PROJECT_ROOT, build, load_questions
from rag.answer import Answer
from rag.engine import Engine
from rag.judge import ACCURACY, PRECISION, Reading
from rag.settings import Settings
from rag.writers import Draft, ExtractiveWriter, Writer, Written, make_writer

PREMISES = DATA.with_name("premises.jsonl")


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(centre - half, 3), round(centre + half, 3))


class ReadOnly:
    """A writer that gives the model's readings but writes nothing: the sources' sentences
    stand in for the answer, so a fit costs one reading per question, not a generation."""

    name = "read-only"

    def __init__(self, inner: Writer) -> None:
        self.inner = inner
        self.read: list[float] = []

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def loaded(self) -> bool:
        return self.inner.loaded

    def write(self, draft: Draft, on_token: Callable[[str], None] | None = None) -> Written:
        return ExtractiveWriter().write(draft, on_token)

    def rewrite(self, system: str, user: str) -> str | None:
        return None

    def reads(self, user: str) -> float | None:
        return self.inner.reads(user)

    def yes_log_odds(self, draft: Draft, ask: str) -> float | None:
        x = self.inner.yes_log_odds(draft, ask)
        if x is not None:
            self.read.append(x)
        return x


def engines(settings: Settings, writer: Writer, scales: set[str]) -> dict[str, Engine]:
    out = {}
    for scale in sorted(scales):
        retriever = build(scale)
        out[scale] = Engine(
            settings.model_copy(update={"home": retriever.index.settings.home}),
            retriever=retriever,
            writer=writer,
        )
    return out


def readings(
    rows: list[dict[str, Any]], kind: str, label: Callable[[dict[str, Any]], bool]
) -> tuple[list[float], list[bool], str]:
    settings = Settings()
    writer = ReadOnly(make_writer(settings.llm))
    scales = {r["scale"] for r in rows}
    if "icml" in scales and not ICML.exists():
        print(f"{ICML} is missing: ICML-scale questions left out", file=sys.stderr)
        rows, scales = [r for r in rows if r["scale"] != "icml"], scales - {"icml"}
    by_scale = engines(settings, writer, scales)
    xs: list[float] = []
    ys: list[bool] = []
    for r in rows:
        before = len(writer.read)
        answer = by_scale[r["scale"]].ask(r["question"])
        asked = "verdict_p_yes" if kind == "verdict" else "premise_p_yes"
        if len(writer.read) > before and asked in answer.signals:
            xs.append(writer.read[-1])
            ys.append(label(r))
    return xs, ys, writer.model


def held_out_fits(
    kind: str, model: str, xs: list[float], ys: list[bool], **fit: Any
) -> Iterator[tuple[int, Reading]]:
    """Leave-one-out: each question's index with the reading fitted without it."""
    for i in range(len(xs)):
        rest_x, rest_y = xs[:i] + xs[i + 1 :], ys[:i] + ys[i + 1 :]
        yield i, Reading.fit(kind, model, rest_x, rest_y, **fit)


def leave_one_out(
    kind: str, model: str, xs: list[float], ys: list[bool], ordinary: list[float] | None
) -> int:
    return sum(
        part.predict(xs[i]) == ys[i]
        for i, part in held_out_fits(kind, model, xs, ys, ordinary=ordinary)
    )


def cached(path: Path | None, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Readings ({"model", "rows"}) from `path` when it exists, else read and kept there."""
    if path is not None and path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    data = read()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data) + "\n")
    return data


def claim_readings() -> dict[str, Any]:
    """Every labelled pair of the verifier's set: its label, its kind and, for a pair the
    alignment verifier accepts (the only sentences the model is asked about), the model's
    claim reading as the answerer makes it (None for a pair alignment rejects)."""
    from evals.verifier import CALIBRATION, judge, load_pairs
    from rag.corpus import read_papers
    from rag.embed import load_embedding
    from rag.prompts import claim_prompt
    from rag.verify import AlignmentVerifier

    settings = Settings()
    writer = make_writer(settings.llm)
    papers = {p.id: p for p in read_papers([PROJECT_ROOT / "corpus"]).papers}
    verifier = AlignmentVerifier(load_embedding(settings.embed))
    rows: list[dict[str, Any]] = []
    for pair in load_pairs(CALIBRATION):
        x = None
        if judge(verifier, pair, papers)[0]:
            cited = [papers[i] for i in pair["cited"]]
            v = verifier.check(pair["sentence"], cited, pair["question"], pair["framing"])
            x = writer.reads(claim_prompt(cited[max(v.source, 0)], v.evidence, pair["sentence"]))
            if x is None:
                continue  # the backend gives no readings
        rows.append({"x": x, "supported": bool(pair["supported"]), "kind": str(pair["kind"])})
    return {"model": writer.model, "rows": rows}


def fit_claim(cache: Path | None) -> None:
    """The claim reading's fit, and the verifier's precision and recall with it on the
    labelled pairs, overall and by kind, by 10-fold cross-validation (each fold's pairs
    judged by a fit without them)."""
    started = time.perf_counter()
    data = cached(cache / "claim.json" if cache is not None else None, claim_readings)
    rows, model = data["rows"], data["model"]
    read = [r for r in rows if r["x"] is not None]
    xs = [r["x"] for r in read]
    ys = [r["supported"] for r in read]
    reading = Reading.fit("claim", model, xs, ys, precision=PRECISION)
    kept = [False] * len(xs)
    for fold in range(10):
        rest = [i for i in range(len(xs)) if i % 10 != fold]
        part = Reading.fit(
            "claim", model, [xs[i] for i in rest], [ys[i] for i in rest], precision=PRECISION
        )
        for i in range(fold, len(xs), 10):
            kept[i] = part.predict(xs[i])
    supported = sum(r["supported"] for r in rows)
    accepted = sum(kept)
    right = sum(k and y for k, y in zip(kept, ys, strict=True))
    print(
        f"claim: {len(xs)} of {len(rows)} pairs accepted by the alignment, read in "
        f"{time.perf_counter() - started:.0f}s; precision {right / max(accepted, 1):.3f} "
        f"(alignment alone {sum(ys) / len(xs):.3f}), recall {right / supported:.3f} "
        f"(alignment alone {sum(ys) / supported:.3f}) by 10-fold cross-validation; "
        f"yes from P {reading.cut:.3f} -> {reading.save().relative_to(PROJECT_ROOT)}"
    )
    # By kind, alignment and reading together: a pair alignment rejects stays rejected.
    accepts = iter(kept)
    by_kind: dict[str, list[bool]] = {}
    alone: dict[str, list[bool]] = {}
    for r in rows:
        said = r["x"] is not None and next(accepts)
        by_kind.setdefault(r["kind"], []).append(said == r["supported"])
        alone.setdefault(r["kind"], []).append((r["x"] is not None) == r["supported"])
    print(
        "  judged right by kind (alignment alone): "
        + ", ".join(
            f"{k} {sum(v) / len(v):.3f} ({sum(alone[k]) / len(v):.3f}, {len(v)})"
            for k, v in sorted(by_kind.items())
        )
    )


def cached_readings(
    cache: Path | None,
    name: str,
    rows: list[dict[str, Any]],
    kind: str,
    label: Callable[[dict[str, Any]], bool],
) -> tuple[list[float], list[bool], str]:
    """`readings`, kept in cache/name.json when a cache is given (and read from it)."""

    def read() -> dict[str, Any]:
        xs, ys, model = readings(rows, kind, label)
        return {"model": model, "rows": [{"x": x, "yes": y} for x, y in zip(xs, ys, strict=True)]}

    data = cached(cache / f"{name}.json" if cache is not None else None, read)
    return [r["x"] for r in data["rows"]], [r["yes"] for r in data["rows"]], data["model"]


def verdict_cross_validated(model: str, xs: list[float], ys: list[bool]) -> str:
    """Leave-one-out: each question's verdict (yes, no, or none in the band) by a fit
    without it; the share stated, the share of those right, and the agreement with the
    label over all (a verdict not stated counts as not agreeing)."""
    said = right = 0
    for i, part in held_out_fits("verdict", model, xs, ys, accuracy=ACCURACY):
        decision = part.decide(xs[i])
        if decision != "open":
            said += 1
            right += (decision == "yes") == ys[i]
    n = len(xs)
    return (
        f"stated {said / n:.3f} {wilson(said, n)}, right when stated {right / max(said, 1):.3f} "
        f"{wilson(right, said)}, agreeing with the label {right / n:.3f} {wilson(right, n)}"
    )


def fit(kinds: Sequence[str], cache: Path | None = None) -> int:
    if "claim" in kinds:
        fit_claim(cache)
        kinds = [k for k in kinds if k != "claim"]
    sources: dict[str, tuple[list[dict[str, Any]], Callable[[dict[str, Any]], bool]]] = {
        "verdict": (
            [q for q in load_questions(DATA) if q.get("label") in ("yes", "no")],
            lambda r: r["label"] == "yes",
        ),
        # "Yes" is "the sources agree with what the question assumes".
        "premise": (load_questions(PREMISES), lambda r: r["premise_true"]),
    }
    # Ordinary questions, whose premises hold: the answerable explain, detail and compare
    # questions of the main set at 60 papers.
    ordinary = [
        q
        for q in load_questions(DATA, [MAIN])
        if q["answerable"] and q["scale"] == "seed" and q["intent"] != "yesno"
    ]
    for kind in kinds:
        rows, label = sources[kind]
        started = time.perf_counter()
        xs, ys, model = cached_readings(cache, kind, rows, kind, label)
        more = None
        if kind == "premise":
            more = cached_readings(cache, "premise-ordinary", ordinary, kind, lambda r: True)[0]
        reading = Reading.fit(
            kind, model, xs, ys, more, accuracy=ACCURACY if kind == "verdict" else None
        )
        right = leave_one_out(kind, model, xs, ys, more)
        own = sum((x > 0) == y for x, y in zip(xs, ys, strict=True))
        path = reading.save()
        said_no = [not reading.predict(x) for x, y in zip(xs, ys, strict=True) if not y]
        print(
            f"{kind}: {len(xs)} of {len(rows)} questions read ({sum(ys)} yes) in "
            f"{time.perf_counter() - started:.0f}s; leave-one-out agreement "
            f"{right / len(xs):.3f} {wilson(right, len(xs))}, the model's own choice "
            f"{own / len(xs):.3f}; no-labelled answered no {sum(said_no)}/{len(said_no)}; "
            f"P(yes) = sigmoid({reading.coef:.3f} x + {reading.intercept:.3f}), "
            f"yes from {reading.cut:.3f} -> {path.relative_to(PROJECT_ROOT)}"
        )
        if kind == "verdict":
            print(
                f"  without the band: as above; with it (no verdict from P {reading.low:.3f} "
                f"to {reading.cut:.3f}): {verdict_cross_validated(model, xs, ys)}"
            )
        if more:
            flagged = sum(not reading.predict(x) for x in more)
            print(f"  ordinary questions answered no: {flagged}/{len(more)}")
    return 0


def premise_outcome(answer: Answer) -> str:
    """corrected | as-if-true (a supported claim, no correction) | abstained."""
    if answer.abstained:
        return "abstained"
    if answer.read == "premise" or answer.verdict == "no":
        return "corrected"
    return "as-if-true" if any(s.supported and s.kind == "claim" for s in answer.sentences) else ""


def measure(path: Path, out: Path | None) -> int:
    rows = load_questions(path)
    settings = Settings()
    engine = engines(settings, make_writer(settings.llm), {"seed"})["seed"]
    results = []
    for r in rows:
        answer = engine.ask(r["question"])
        results.append(
            {
                "id": r["id"],
                "premise_true": r["premise_true"],
                "outcome": premise_outcome(answer),
                "gold_cited": any(s.paper.id in r["gold"] for s in answer.citations),
                "answer": answer.text,
                "timings": answer.timings,
            }
        )
        print(json.dumps(results[-1], ensure_ascii=False), file=sys.stderr)
    false = [x for x in results if not x["premise_true"]]
    true = [x for x in results if x["premise_true"]]

    def share(group: list[dict[str, Any]], outcome: str) -> str:
        k = sum(x["outcome"] == outcome for x in group)
        return f"{k / len(group):.3f} {wilson(k, len(group))} ({k}/{len(group)})"

    print(f"{path.name}: {len(false)} false-premise questions, {len(true)} true twins")
    print(f"  false premise corrected:          {share(false, 'corrected')}")
    print(f"  false premise answered as if true: {share(false, 'as-if-true')}")
    print(f"  false premise declined:           {share(false, 'abstained')}")
    print(f"  true premise said not to hold:    {share(true, 'corrected')}")
    if out:
        out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in results))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.judge", description=__doc__)
    parser.add_argument("--fit", nargs="*", choices=("verdict", "premise", "claim"), default=None)
    parser.add_argument(
        "--cache", type=Path, help="keep the readings in this folder, and reuse them"
    )
    parser.add_argument("--measure", type=Path, help="a premise file to answer and count")
    parser.add_argument("--out", type=Path, help="with --measure: the answers, as JSON Lines")
    args = parser.parse_args(argv)
    if args.fit is None and args.measure is None:
        parser.error("give --fit and/or --measure")
    if args.fit is not None:
        fit(args.fit or ["verdict", "premise", "claim"], args.cache)
    if args.measure is not None:
        measure(args.measure, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
