"""Fit which short forms are the field's rather than one paper's name (rag/shortforms.py).

    python -m evals.shortforms [--source FILE ...] [--out rag/calibration/shortforms.json]

Reads the conference listings (by default the three files of ../shared/corpora, about
12,700 distinct papers), and for each abstract the name-shaped forms it writes and those it
coins, with no form held common. A form fewer than a fifth of whose writers coin it is common:
"LLM" is coined by 3% of the 3,499 abstracts that write it, "TACO" by a third of its 6.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from evals.bench import ALL
from rag.corpus import _TOKEN, Paper, abstract_key, coined_names, name_shaped, read_file
from rag.shortforms import PATH, ShortForms

# A paper coining a form is the exception when fewer than one in five of its writers do.
BELOW = 0.2
_NONE = ShortForms(common=frozenset(), below=0.0, papers=0)


def papers(sources: list[Path]) -> Iterator[Paper]:
    """Each paper once, however many listings carry it (a workshop version, a resubmission)."""
    seen: set[str] = set()
    for path in sources:
        read, problems = read_file(path)
        if not read:
            raise SystemExit(f"{path}: no papers read ({'; '.join(map(str, problems[:3]))})")
        for paper in read:
            k = abstract_key(paper.title or paper.abstract)
            if k not in seen:
                seen.add(k)
                yield paper


def observations(sources: list[Path]) -> Iterator[tuple[set[str], list[str]]]:
    for paper in papers(sources):
        written = {t for t in _TOKEN.findall(paper.abstract) if name_shaped(t)}
        yield written, coined_names(paper.abstract, _NONE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.shortforms", description=__doc__)
    parser.add_argument("--source", type=Path, action="append", default=None)
    parser.add_argument("--out", type=Path, default=PATH)
    args = parser.parse_args(argv)
    sources = args.source or ALL
    missing = [p for p in sources if not p.is_file()]
    if missing:
        raise SystemExit(f"missing {missing[0]}: the fit reads conference listings")
    fit = ShortForms.fit(observations(sources), below=BELOW)
    args.out.write_text(json.dumps(fit.to_json(), indent=0) + "\n", encoding="utf-8")
    print(f"{len(fit.common):,} common forms of {fit.papers:,} papers -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
