"""Write rag/topics.txt: research topics that ICLR 2026 authors named as keywords.

    python -m evals.make_topics [../shared/corpora/iclr2026.jsonl]

Every author keyword (split at "," and ";", lower-cased, spaces collapsed) used by at least
two papers. The list is a background of what machine-learning questions are about, for
`rag.topics`; it does not depend on which papers a user indexes.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from rag.settings import PROJECT_ROOT
from rag.topics import TOPICS_FILE

SOURCE = PROJECT_ROOT.parent / "shared" / "corpora" / "iclr2026.jsonl"
MIN_PAPERS = 2


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    source = Path(args[0]) if args else SOURCE
    counts: Counter[str] = Counter()
    with source.open(encoding="utf-8") as f:
        for line in f:
            keywords = json.loads(line).get("keywords") or ""
            if isinstance(keywords, list):
                keywords = ",".join(str(k) for k in keywords)
            found = {" ".join(k.lower().split()) for k in re.split(r"[,;]", keywords)}
            counts.update(k for k in found if 2 < len(k) <= 80)
    topics = sorted(k for k, n in counts.items() if n >= MIN_PAPERS)
    header = (
        f"# {len(topics)} author keywords used by at least {MIN_PAPERS} papers of "
        f"{source.name}; written by `python -m evals.make_topics`.\n"
    )
    TOPICS_FILE.write_text(header + "\n".join(topics) + "\n", encoding="utf-8")
    print(f"{len(topics)} topics -> {TOPICS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
