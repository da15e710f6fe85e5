"""Which sentence leads a detail question's excerpt: the one with the figure asked for?

    python -m evals.excerpts [--questions FILE]

For every answerable detail question about one seed paper with `expected` strings, the
excerpter (rag/excerpts.py) picks that paper's sentences; the question counts when the
sentence it puts first holds one of the expected strings, the sentence a small model writes
its figure from. No LLM runs: a minute, against the half hour of the answer suite.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evals.retrieval import DATA, load_questions
from rag.corpus import read_papers
from rag.embed import load_embedding
from rag.excerpts import Excerpter
from rag.query import Asks
from rag.settings import PROJECT_ROOT, Settings


def leads(questions: list[dict[str, Any]], excerpter: Excerpter) -> dict[str, bool]:
    """For each question it applies to, whether its first sentence holds an expected string."""
    papers = {p.id: p for p in read_papers([PROJECT_ROOT / "corpus"]).papers}
    out: dict[str, bool] = {}
    for q in questions:
        gold: list[str] = q.get("gold") or []
        expected: list[str] = q.get("expected") or []
        asked = q.get("answerable") and q.get("intent") == "detail" and q.get("scale") == "seed"
        if not (asked and expected and len(gold) == 1):
            continue
        [excerpt] = excerpter.pick(q["question"], [papers[gold[0]]], 3, Asks.DETAIL)
        first = excerpt.sentences[0] if excerpt.sentences else ""
        out[q["id"]] = any(e in first for e in expected)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.excerpts", description=__doc__)
    parser.add_argument("--questions", type=Path, default=DATA)
    args = parser.parse_args(argv)
    questions = load_questions(args.questions)
    split = {str(q["id"]): str(q["split"]) for q in questions}
    hits = leads(questions, Excerpter(load_embedding(Settings().embed)))
    for name, keep in (("main", lambda s: s == "main"), ("development", lambda s: s != "main")):
        got = [hit for qid, hit in hits.items() if keep(split[qid])]
        print(f"{name}: the expected figure's sentence first {sum(got)} of {len(got)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
