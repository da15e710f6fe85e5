"""The verifier's accuracy on the hand-labelled calibration set.

    python -m evals.verifier [--sweep]

Each line of evals/verifier_calibration.jsonl is (sentence, paper_id, supported?, kind).
Precision and recall are for the label "supported": precision is how often a sentence the
verifier accepts really is supported; recall, how many supported sentences it accepts.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rag.corpus import read_papers
from rag.embed import load_embedding
from rag.settings import PROJECT_ROOT, Settings
from rag.verify import AlignmentVerifier

CALIBRATION = Path(__file__).with_name("verifier_calibration.jsonl")


def load_pairs(path: Path = CALIBRATION) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def evaluate(verifier: AlignmentVerifier, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    papers = {p.id: p for p in read_papers([PROJECT_ROOT / "corpus"]).papers}
    tp = fp = fn = tn = 0
    kinds: dict[str, list[bool]] = defaultdict(list)
    mistakes = []
    for pair in pairs:
        verdict = verifier.check(pair["sentence"], [papers[pair["paper_id"]]])
        gold = bool(pair["supported"])
        tp += verdict.supported and gold
        fp += verdict.supported and not gold
        fn += (not verdict.supported) and gold
        tn += (not verdict.supported) and not gold
        kinds[pair["kind"]].append(verdict.supported == gold)
        if verdict.supported != gold:
            mistakes.append(
                {
                    "id": pair["id"],
                    "kind": pair["kind"],
                    "score": verdict.score,
                    "reason": verdict.reason,
                }
            )
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "pairs": len(pairs),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "accuracy": round((tp + tn) / len(pairs), 4),
        "unsupported_caught": round(tn / (tn + fp), 4) if tn + fp else 0.0,
        "by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(kinds.items())},
        "mistakes": mistakes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.verifier")
    parser.add_argument("--sweep", action="store_true", help="try thresholds 0.40-0.75")
    parser.add_argument("--mistakes", action="store_true", help="list misjudged pairs")
    args = parser.parse_args()
    pairs = load_pairs()
    model = load_embedding(Settings().embed)
    thresholds = [round(0.40 + 0.025 * i, 3) for i in range(15)] if args.sweep else [None]
    for t in thresholds:
        verifier = AlignmentVerifier(model) if t is None else AlignmentVerifier(model, t)
        result = evaluate(verifier, pairs)
        if not args.mistakes:
            result.pop("mistakes")
        print(json.dumps({"threshold": verifier.threshold} | result))


if __name__ == "__main__":
    main()
