"""Which short forms ("LLM", "GRPO", "PINN") are the field's, and so name no one paper.

A paper that coins a name says so ("we propose TACO, an end-to-end ..."); a form that most
papers write without coining it is common property. The split is fitted from a conference's
abstracts (`python -m evals.shortforms`) and shipped as data, `rag/calibration/shortforms.json`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("calibration") / "shortforms.json"


def key(token: str) -> str:
    """A form as counted: folded, an acronym's plural as its singular ("LLMs" -> "llm"), while
    a form that ends in a capital S keeps it ("APS" is not "AP")."""
    if len(token) > 2 and token.endswith("s") and token[-2].isupper():
        token = token[:-1]
    return token.casefold()


@dataclass(frozen=True)
class ShortForms:
    """The forms fewer than `below` of whose writers coin them (one coining in two papers
    added to every form, so a form seen twice and never coined is not yet common)."""

    common: frozenset[str]
    below: float
    papers: int

    @classmethod
    def fit(cls, papers: Iterable[tuple[Iterable[str], Iterable[str]]], below: float) -> ShortForms:
        """`papers`: for each abstract, the name-shaped forms it writes and the ones it coins."""
        written: Counter[str] = Counter()
        coined: Counter[str] = Counter()
        n = 0
        for used, own in papers:
            n += 1
            written.update({key(t) for t in used})
            coined.update({key(t) for t in own})
        common = frozenset(f for f, w in written.items() if (coined[f] + 1) / (w + 2) < below)
        return cls(common=common, below=below, papers=n)

    def is_common(self, token: str) -> bool:
        return key(token) in self.common

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "below": self.below,
            "papers": self.papers,
            "common": sorted(self.common),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShortForms:
        if data.get("format") != 1:
            raise ValueError(f"unknown format {data.get('format')!r}")
        return cls(
            common=frozenset(data["common"]), below=float(data["below"]), papers=int(data["papers"])
        )


@lru_cache(maxsize=1)
def shipped() -> ShortForms:
    """The shipped fit, read once. Missing, it is an install error, raised: without it every
    "LLM" an abstract writes would be taken for the paper's own name."""
    try:
        return ShortForms.from_json(json.loads(PATH.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RuntimeError(
            f"the short-form fit {PATH} is missing or unreadable ({err}); "
            "fit it with `python -m evals.shortforms`"
        ) from err
