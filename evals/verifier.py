"""The verifier's accuracy on the hand-labelled calibration set.

    python -m evals.verifier [--sweep] [--mistakes] [--json PATH]

Each line of evals/data/verifier_calibration.jsonl is a (sentence, paper_id, supported?, kind)
pair, with optional fields: "cited" (the papers the sentence cites; default [paper_id]),
"sources" (every source the answer had, the cited ones included; default the cited),
"question" (what the sentence answers; default ""), "framing" (default true; false for a
"which papers are on X" question, see rag.verify.Verifier.check) and "relevant" (whether the
sentence bears on the question; "supported" is about support only).

A pair is judged unsupported when it names a source paper it does not cite and its citations
never name (rag.verify.misattributed), else by AlignmentVerifier.check on the cited papers.
Precision and recall are for the label "supported": precision is how often a sentence the
verifier accepts really is supported; recall, how many supported sentences it accepts. Per
kind, the figure is the share judged right: for a kind of unsupported pairs the share caught,
for a kind of supported pairs the share accepted.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rag.corpus import Paper, read_papers
from rag.embed import load_embedding
from rag.settings import PROJECT_ROOT, Settings
from rag.verify import NUMBER_MARGIN, SUPPORT_THRESHOLD, AlignmentVerifier, misattributed

CALIBRATION = Path(__file__).with_name("data") / "verifier_calibration.jsonl"


def load_pairs(path: Path = CALIBRATION) -> list[dict[str, Any]]:
    """The labelled pairs, with the optional fields filled in with their defaults."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        pair = json.loads(line)
        pair.setdefault("cited", [pair["paper_id"]])
        pair.setdefault("sources", list(pair["cited"]))
        pair.setdefault("question", "")
        pair.setdefault("framing", True)
        pairs.append(pair)
    return pairs


def judge(
    verifier: AlignmentVerifier, pair: dict[str, Any], papers: dict[str, Paper]
) -> tuple[bool, float, str]:
    """(supported?, score, reason) for one pair, as the answerer would judge it."""
    cited = [papers[i] for i in pair.get("cited") or [pair["paper_id"]]]
    sources = [papers[i] for i in pair.get("sources") or [p.id for p in cited]]
    wrong = misattributed(pair["sentence"], cited, sources)
    if wrong:
        names = ", ".join(p.display_name for p in wrong)
        return False, 0.0, f"misattributed: names {names}"
    verdict = verifier.check(
        pair["sentence"], cited, pair.get("question", ""), pair.get("framing", True)
    )
    return verdict.supported, verdict.score, verdict.reason


def evaluate(verifier: AlignmentVerifier, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    papers = {p.id: p for p in read_papers([PROJECT_ROOT / "corpus"]).papers}
    tp = fp = fn = tn = 0
    kinds: dict[str, list[bool]] = defaultdict(list)
    gold_of: dict[str, set[bool]] = defaultdict(set)
    mistakes = []
    for pair in pairs:
        supported, score, reason = judge(verifier, pair, papers)
        gold = bool(pair["supported"])
        tp += supported and gold
        fp += supported and not gold
        fn += (not supported) and gold
        tn += (not supported) and not gold
        kinds[pair["kind"]].append(supported == gold)
        gold_of[pair["kind"]].add(gold)
        if supported != gold:
            mistakes.append(
                {"id": pair["id"], "kind": pair["kind"], "score": score, "reason": reason}
            )
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    by_kind = {
        k: {
            "label": "supported" if gold_of[k] == {True} else "unsupported",
            "pairs": len(v),
            # share accepted (supported kinds) or caught (unsupported kinds)
            "right": round(sum(v) / len(v), 3),
        }
        for k, v in sorted(kinds.items())
    }
    return {
        "pairs": len(pairs),
        "supported": tp + fn,
        "unsupported": fp + tn,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "accuracy": round((tp + tn) / len(pairs), 4) if pairs else 0.0,
        "unsupported_caught": round(tn / (tn + fp), 4) if tn + fp else 0.0,
        "by_kind": by_kind,
        "mistakes": mistakes,
    }


def table(threshold: float, result: dict[str, Any]) -> str:
    lines = [
        f"threshold {threshold:.3f}: {result['pairs']} pairs "
        f"({result['supported']} supported, {result['unsupported']} unsupported)",
        f"  precision {result['precision']:.3f}  recall {result['recall']:.3f}  "
        f"accuracy {result['accuracy']:.3f}  unsupported caught {result['unsupported_caught']:.3f}",
        f"  {'kind':<22} {'label':<12} {'pairs':>5}  {'right':>6}  measure",
    ]
    for kind, row in result["by_kind"].items():
        measure = "accepted" if row["label"] == "supported" else "caught"
        lines.append(
            f"  {kind:<22} {row['label']:<12} {row['pairs']:>5}  {row['right']:>6.3f}  {measure}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.verifier")
    parser.add_argument("--sweep", action="store_true", help="try thresholds 0.40-0.75")
    parser.add_argument("--mistakes", action="store_true", help="list misjudged pairs")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures here")
    args = parser.parse_args()
    pairs = load_pairs()
    model = load_embedding(Settings().embed)
    thresholds = [round(0.40 + 0.025 * i, 3) for i in range(15)] if args.sweep else [None]
    margins = [0.0, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 1.0] if args.sweep else [None]
    results = []
    verifier = AlignmentVerifier(model)  # one sentence-vector cache for every setting
    for t, m in itertools.product(thresholds, margins):
        verifier.threshold = SUPPORT_THRESHOLD if t is None else t
        verifier.number_margin = NUMBER_MARGIN if m is None else m
        result = evaluate(verifier, pairs)
        print(f"number margin {verifier.number_margin:.3f}, " + table(verifier.threshold, result))
        if args.mistakes:
            for m in result["mistakes"]:
                print(f"    {m['id']} {m['kind']:<22} {m['score']:.3f}  {m['reason']}")
        else:
            result.pop("mistakes")
        results.append(
            {"threshold": verifier.threshold, "number_margin": verifier.number_margin} | result
        )
    if args.json:
        figures = results[0] if len(results) == 1 else results
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
