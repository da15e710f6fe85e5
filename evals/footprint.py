"""How much of the question handling is rules: the counts issue 47 reports before and after.

    python -m evals.footprint [--json]

- regex call sites: `re.<function>(` in every .py below rag/, the input readers (corpus.py,
  sanitize.py) aside, whose patterns read file formats rather than questions;
- word-list entries: non-empty, non-comment lines of rag/words/*.txt (and, apart, the topic
  phrases of rag/topic*.txt);
- branches: `if` statements and conditional expressions in the question and answer modules;
- lines: of every .py below rag/, and of the question/retrieval modules;
- hand-set numbers: module-level UPPER_CASE constants that are numbers, in rag/.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

RAG = Path(__file__).resolve().parent.parent / "rag"
READERS = ("corpus.py", "sanitize.py")
# The modules that understand a question and decide what answers it (issue 47's five), and
# the answer writer, whose branches the issue counts with them.
QUESTION_MODULES = (
    "query.py",
    "retrieve.py",
    "text.py",
    "topics.py",
    "abstain.py",
    "relevance.py",
    "intent.py",
)
BRANCH_MODULES = (*QUESTION_MODULES, "answer.py")
_CALL = re.compile(r"\bre\.(?:compile|search|sub|subn|finditer|findall|match|fullmatch|split)\(")


def _sources() -> list[Path]:
    return sorted(RAG.rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _numbers(tree: ast.Module) -> int:
    out = 0
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id.isupper() for t in targets)
        if named and isinstance(value, ast.Constant) and type(value.value) in (int, float):
            out += 1
    return out


def count() -> dict[str, int]:
    sources = _sources()
    trees = {
        p.relative_to(RAG).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in sources
    }
    words = [
        line
        for f in sorted((RAG / "words").glob("*.txt"))
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return {
        "regex_call_sites": sum(
            len(_CALL.findall(p.read_text(encoding="utf-8")))
            for p in sources
            if p.relative_to(RAG).as_posix() not in READERS
        ),
        "word_list_entries": len(words),
        "topic_phrases": sum(
            1
            for f in sorted(RAG.glob("topic*.txt"))
            for line in f.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        ),
        "branches": sum(
            isinstance(n, ast.If | ast.IfExp)
            for name in BRANCH_MODULES
            if name in trees
            for n in ast.walk(trees[name])
        ),
        "hand_set_numbers": sum(_numbers(t) for t in trees.values()),
        "rag_lines": sum(_lines(p) for p in sources),
        "question_module_lines": sum(
            _lines(RAG / m) for m in QUESTION_MODULES if (RAG / m).exists()
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.footprint", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    counts = count()
    if args.json:
        print(json.dumps(counts))
    else:
        for key, value in counts.items():
            print(f"{key:>24} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
