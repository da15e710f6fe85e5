"""Fit the abstention model (rag.abstain) for the embedding model in use.

    python -m evals.calibrate [--scale seed|icml] [--questions evals/questions.jsonl]
                              [--out PATH] [--signals FILE]

Runs the development questions through retrieval with abstention recorded but not applied,
fits the model on the signals of the questions that reach the test (topical questions that
name no paper and have no author or track filter), picks the threshold that abstains on as
many no-answer questions as possible while wrongly abstaining on at most 2% of the answerable
ones, and writes the calibration file (default: RAG_HOME/calibration/<model key>.json, where
`rag.ask`, `rag.search` and the chat page look first). Leave-one-out cross-validation,
refitting everything but the held-out question's own signals each time, gives the
out-of-sample figures printed beside the in-sample ones.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from evals.retrieval import QUESTIONS, build, load_questions
from rag import abstain
from rag.abstain import Abstention, Calibration, Signals
from rag.embed import model_identity
from rag.retrieve import Retriever
from rag.settings import PROJECT_ROOT, Settings

# Written after the abstention rules were set, to measure them: fitting on them would make
# their figures in-sample.
HELD_OUT = ("questions_heldout.jsonl", "questions_fresh.jsonl")

Sample = tuple[Signals, bool]


def collect(retriever: Retriever, questions: list[dict[str, Any]]) -> list[tuple[str, Sample]]:
    """(question id, (signals, answerable)) of each question that reaches the test."""
    policy = Abstention(None, retriever.index.model_key, recording=True)
    retriever.abstention = policy
    out = []
    for q in questions:
        policy.recorded.clear()
        retriever.retrieve(q["question"], k=5)
        if policy.recorded:
            out.append((q["id"], (policy.recorded[-1], bool(q["answerable"]))))
    return out


def rates(p: np.ndarray, y: np.ndarray, threshold: float) -> dict[str, Any]:
    abstained = p < threshold
    return {
        "no_answer_abstained": int((abstained & (y == 0)).sum()),
        "answerable_wrongly_abstained": int((abstained & (y == 1)).sum()),
        "no_answer_tested": int((y == 0).sum()),
        "answerable_tested": int((y == 1).sum()),
    }


def probabilities(fitted: abstain.Fit, samples: list[Sample]) -> np.ndarray:
    x = np.array([s.features(fitted.near_topic) for s, _ in samples])
    z = x @ np.array(fitted.weights) + fitted.intercept
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -50, 50))))


def leave_one_out(samples: list[Sample]) -> dict[str, Any]:
    """Each question decided by the model fitted (cutoff, weights, threshold) without it."""
    y = np.array([float(ok) for _, ok in samples])
    abstained = np.zeros(len(samples), dtype=bool)
    for i in range(len(samples)):
        fitted = abstain.fit(samples[:i] + samples[i + 1 :])
        abstained[i] = probabilities(fitted, [samples[i]])[0] < fitted.threshold
    # As rates() reads it: an abstained question scores 0 against a threshold of 0.5.
    return rates(np.where(abstained, 0.0, 1.0), y, 0.5)


def share(counts: dict[str, Any], total_no: int, total_ans: int) -> str:
    na, wa = counts["no_answer_abstained"], counts["answerable_wrongly_abstained"]
    return (
        f"no-answer abstained {na}/{counts['no_answer_tested']} tested ({na / total_no:.3f} of "
        f"all {total_no}), answerable wrongly abstained {wa}/{counts['answerable_tested']} "
        f"tested ({wa / total_ans:.3f} of all {total_ans})"
    )


def calibrate(
    retriever: Retriever,
    questions_file: Path = QUESTIONS,
    scale: str = "seed",
    command: str = "python -m evals.calibrate",
    cross_validate: bool = True,
) -> tuple[Calibration, list[tuple[str, Sample]]]:
    """The calibration of the retriever's embedding model, fitted on `questions_file`, and
    the samples it was fitted on."""
    questions = load_questions(questions_file)
    collected = collect(retriever, questions)
    samples = [s for _, s in collected]
    y = np.array([float(ok) for _, ok in samples])
    if not (y == 0).any() or not (y == 1).any():
        raise SystemExit(
            "error: the questions need answerable and no-answer ones that reach the test"
        )
    fitted = abstain.fit(samples)
    metrics = {"in_sample": rates(probabilities(fitted, samples), y, fitted.threshold)}
    if cross_validate:
        metrics["leave_one_out"] = leave_one_out(samples)
    try:
        source = str(questions_file.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        source = str(questions_file)
    info = {
        "model": model_identity(retriever.index.settings.embed),
        "fitted_on": {
            "questions": source,
            "sha256": hashlib.sha256(questions_file.read_bytes()).hexdigest(),
            "scale": scale,
            "papers": len(retriever.papers),
            "questions_total": len(questions),
            "no_answer_total": sum(not q["answerable"] for q in questions),
            "answerable_tested": int((y == 1).sum()),
            "no_answer_tested": int((y == 0).sum()),
            "max_wrongly_abstained": abstain.MAX_WRONGLY_ABSTAINED,
            "l2": abstain.L2,
        },
        "metrics": metrics,
        "date": datetime.date.today().isoformat(),
        "command": command,
    }
    calibration = Calibration(
        retriever.index.model_key,
        fitted.weights,
        fitted.intercept,
        fitted.threshold,
        fitted.near_topic,
        info,
    )
    return calibration, collected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.calibrate",
        description="Fit the abstention model (rag.abstain) for the embedding model in use "
        "(RAG_EMBED_MODEL) and write its calibration file.",
    )
    parser.add_argument("--scale", choices=["seed", "icml"], default="seed")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument(
        "--out", type=Path, help="the file to write (default RAG_HOME/calibration/<model key>.json)"
    )
    parser.add_argument("--signals", type=Path, help="also write each question's signals here")
    args = parser.parse_args(argv)
    if args.questions.name in HELD_OUT:
        parser.error(f"{args.questions} is held out: fit on the development questions")
    retriever = build(args.scale, warn=False)  # it is being fitted
    command = " ".join(["python -m evals.calibrate", *(sys.argv[1:] if argv is None else argv)])
    calibration, collected = calibrate(retriever, args.questions, args.scale, command)
    out = args.out or Settings().home / "calibration" / f"{calibration.model_key}.json"
    calibration.save(out)

    fitted_on = calibration.info["fitted_on"]
    total_no = fitted_on["no_answer_total"]
    total_ans = fitted_on["questions_total"] - total_no
    print(
        f"model {calibration.info['model'].get('name')} ({calibration.model_key}), "
        f"{args.scale} scale, {fitted_on['papers']} papers; "
        f"{len(collected)} of {fitted_on['questions_total']} questions reach the test"
    )
    for name, w in zip(abstain.FEATURES, calibration.weights, strict=True):
        print(f"  weight {name:>8} {w:+.3f}")
    near = calibration.near_topic
    print(
        f"  intercept {calibration.intercept:+.3f}; abstain below P(answerable) "
        f"{calibration.threshold:.3f}; near topic from cosine "
        + (f"{near:.3f}" if math.isfinite(near) else "none (spelled-out topics only)")
    )
    metrics = calibration.info["metrics"]
    print(f"in-sample:     {share(metrics['in_sample'], total_no, total_ans)}")
    print(f"leave-one-out: {share(metrics['leave_one_out'], total_no, total_ans)}")
    print(f"wrote {out}")
    if args.signals:
        samples = [s for _, s in collected]
        fitted = abstain.Fit(
            calibration.weights, calibration.intercept, calibration.threshold, near
        )
        rows = [
            {"id": qid, "answerable": ok, "p": round(float(p), 4), **vars(s)}
            for (qid, (s, ok)), p in zip(collected, probabilities(fitted, samples), strict=True)
        ]
        args.signals.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
