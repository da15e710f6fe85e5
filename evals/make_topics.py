"""Write rag/topics.txt: research topics that ICLR 2026 authors named as keywords.

    python -m evals.make_topics [../shared/corpora/iclr2026.jsonl]

Every author keyword (split at "," and ";", lower-cased, spaces collapsed) used by at least
two papers. The list is a background of what machine-learning questions are about, for
`rag.topics`; it does not depend on which papers a user indexes.

Also rag/topic_names.txt: each listed topic that is the usual name of a shorter listed topic
it ends with ("machine unlearning" of "unlearning"), because most titles and abstracts of the
three corpora that write the shorter one write the longer one too.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from rag.settings import PROJECT_ROOT
from rag.text import tokens
from rag.topics import NAMES_FILE, TOPICS_FILE

CORPORA = PROJECT_ROOT.parent / "shared" / "corpora"
SOURCE = CORPORA / "iclr2026.jsonl"
MIN_PAPERS = 2
BACKGROUND = [SOURCE, CORPORA / "icml2026_main.jsonl", CORPORA / "icml2026_workshops.jsonl"]
# Papers that write the shorter topic, fewer of which say nothing of how it is usually named.
MIN_HEAD_PAPERS = 10


def usual_names(topics: list[str], sources: list[Path]) -> list[tuple[str, str, float]]:
    """(topic, shorter topic, share): topics that most papers writing the shorter one write."""
    texts = []
    for source in sources:
        with source.open(encoding="utf-8") as f:
            for line in f:
                x = json.loads(line)
                words = tokens(f"{x.get('title') or ''} . {x.get('abstract') or ''}")
                texts.append(f" {' '.join(words)} ")
    listed = set(topics)

    def writing(phrase: str, among: list[str]) -> list[str]:
        return [t for t in among if f" {phrase} " in t or f" {phrase}s " in t]

    out = []
    for topic in topics:
        words = topic.split()
        for cut in range(1, len(words)):
            head = " ".join(words[cut:])
            if head not in listed:
                continue
            with_head = writing(head, texts)
            if len(with_head) >= MIN_HEAD_PAPERS:
                share = len(writing(topic, with_head)) / len(with_head)
                if share > 0.5:  # most: the longer is how the shorter is usually named
                    out.append((topic, head, round(share, 2)))
    return out


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
    names = usual_names(topics, [p for p in BACKGROUND if p.exists()])
    NAMES_FILE.write_text(
        "# topic<TAB>the shorter topic it usually names<TAB>share of the shorter topic's papers "
        "writing it;\n# written by `python -m evals.make_topics`.\n"
        + "".join(f"{t}\t{h}\t{s}\n" for t, h, s in names),
        encoding="utf-8",
    )
    print(f"{len(names)} usual names -> {NAMES_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
