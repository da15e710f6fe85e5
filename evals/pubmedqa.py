"""A corpus from another field: PubMedQA's 1,000 expert-labelled biomedical abstracts.

    git clone https://github.com/pubmedqa/pubmedqa  # MIT licence; data/ori_pqal.json
    python -m evals.pubmedqa --source pubmedqa/data/ori_pqal.json --out .rag/pubmedqa
    python -m evals --corpus .rag/pubmedqa/corpus.jsonl \\
        --questions .rag/pubmedqa/questions.jsonl --llm local --no-baseline

Each labelled item becomes one paper in the JSON Lines format `rag.corpus` reads: no title,
no authors (as in PubMed exports without them), the abstract (its context sections and its
conclusion, as published), and a track from its MeSH subject headings. Its question becomes a
yes/no question whose gold is that paper and whose label is PubMedQA's expert answer
("maybe" items are left out: the issue's yes/no agreement needs a yes or a no). Neither file
is committed: they are PubMedQA's data, made again from it by this command.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def track_of(meshes: Sequence[str], counts: Counter[str], papers: int) -> str:
    """The paper's broadest subject heading that still tells papers apart: the most shared of
    its headings, leaving out those on more than a tenth of all papers ("Humans", "Adult",
    "Female"), which every clinical abstract carries."""
    shared = [m for m in meshes if counts[m] <= papers // 10]
    return max(shared, key=lambda m: (counts[m], m)) if shared else ""


def build(
    items: dict[str, dict[str, Any]], questions: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    counts = Counter(m for item in items.values() for m in set(item.get("MESHES", [])))
    corpus: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []
    for pmid in sorted(items):
        item = items[pmid]
        abstract = " ".join([*item["CONTEXTS"], item.get("LONG_ANSWER", "")]).strip()
        corpus.append(
            {
                "id": f"pmid-{pmid}",
                "title": "",
                "authors": [],
                "track": track_of(item.get("MESHES", []), counts, len(items)),
                "abstract": abstract,
                "year": item.get("YEAR"),
            }
        )
    labelled = [p for p in sorted(items) if items[p]["final_decision"] in ("yes", "no")]
    step = max(1, len(labelled) // questions)
    for i, pmid in enumerate(labelled[::step][:questions], start=1):
        item = items[pmid]
        asked.append(
            {
                "id": f"pq{i:03d}",
                "question": item["QUESTION"],
                "type": "yesno",
                "gold": [f"pmid-{pmid}"],
                "answerable": True,
                "expected": [],
                "label": item["final_decision"],
            }
        )
    return corpus, asked


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.pubmedqa", description=__doc__)
    parser.add_argument("--source", type=Path, required=True, help="PubMedQA's ori_pqal.json")
    parser.add_argument("--out", type=Path, default=Path(".rag/pubmedqa"))
    parser.add_argument("--questions", type=int, default=60, help="yes/no questions to write")
    args = parser.parse_args(argv)
    items = json.loads(args.source.read_text(encoding="utf-8"))
    corpus, asked = build(items, args.questions)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("questions.jsonl", asked)):
        with (args.out / name).open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    labels = Counter(q["label"] for q in asked)
    print(
        f"wrote {len(corpus)} papers and {len(asked)} questions "
        f"({labels['yes']} yes, {labels['no']} no) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
