"""Many users at once on the real chat page, driven through gradio_client.

Every session asks about its own paper, and its follow-ups only make sense with its own
history ("How does it work?", "and which of those ..."), so an answer that drew on another
session's history, or cited another question's sources, is caught. `tests/test_load.py`
asserts this at a size that proves it; `python -m evals.bench --parts load` measures the
20 sessions x 5 questions figure of evals/BENCHMARKS.md.
"""

from __future__ import annotations

import html
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

# Papers whose coined name identifies them, each with a track for the listing question.
PAPERS = [
    "AAD",
    "ArbNN",
    "B-NRDEs",
    "CGR",
    "DRAGON",
    "Directo",
    "DistRL",
    "DistSeal",
    "ERK-Guid",
    "FS-DFM",
    "HARC",
    "KECode",
    "LEON",
    "M-CBEs",
    "MemoryLLM",
    "Motion-R1",
    "NAtS-L",
    "PGCMs",
    "SOTAlign",
    "UniAR",
]
_CARD = re.compile(r"<summary>\[(\d+)\] (.*?)</summary>")
_CITE = re.compile(r"\[\[(\d+)\]\]\(#src-\d+\)")
_SEARCHED = re.compile(r"^\*\(searched: (.*?)\)\*")


def client(url: str) -> Any:
    from gradio_client import Client

    return Client(url, verbose=False)


def last_text(history: list[dict[str, Any]]) -> str:
    content = history[-1]["content"]
    return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)


@dataclass
class Turn:
    question: str
    seconds: float = 0.0
    text: str = ""
    sources: list[str] = field(default_factory=list)  # display names, in [n] order
    cited: list[str] = field(default_factory=list)
    searched: str = ""
    error: str = ""


def questions(name: str, track: str) -> list[str]:
    subarea = track.split(" · ")[-1]
    return [
        f"What is {name}?",
        "How does it work?",
        "What are its main results?",
        f"Which papers are in the {subarea} track?",
        f"and which of those are about {name}?",
    ]


def parse(turn: Turn, history: list[dict[str, Any]], sources_html: str) -> None:
    turn.text = last_text(history)
    cards = {int(n): html.unescape(name) for n, name in _CARD.findall(sources_html)}
    turn.sources = [cards[n] for n in sorted(cards)]
    turn.cited = [cards.get(int(n), f"missing [{n}]") for n in _CITE.findall(turn.text)]
    searched = _SEARCHED.search(turn.text)
    turn.searched = searched.group(1).replace("\\", "") if searched else ""


def run_session(url: str, script: list[str], backend: str, out: list[Turn]) -> None:
    try:
        chat = client(url)
    except Exception as err:  # counted as the session's errors, not a crash of the run
        out.extend(Turn(q, error=f"connect: {err}") for q in script)
        return
    for q in script:
        turn = Turn(q)
        started = time.monotonic()
        try:
            history, sources, _ = chat.predict(q, [], "All tracks", "", backend, api_name="/ask")
            parse(turn, history, sources)
        except Exception as err:
            turn.error = f"{type(err).__name__}: {err}"
        turn.seconds = time.monotonic() - started
        out.append(turn)


def run_load(
    url: str, backend: str, tracks: dict[str, str], sessions: int
) -> tuple[dict[str, Any], list[list[Turn]]]:
    """`sessions` sessions at once, each on its own paper; the numbers and every turn."""
    names = PAPERS[:sessions]
    results: list[list[Turn]] = [[] for _ in names]
    threads = [
        threading.Thread(
            target=run_session, args=(url, questions(name, tracks[name]), backend, out)
        )
        for name, out in zip(names, results, strict=True)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    total = time.monotonic() - started
    turns = [t for session in results for t in session]
    seconds = sorted(t.seconds for t in turns) or [0.0]
    numbers = {
        "backend": backend,
        "sessions": sessions,
        "questions": len(turns),
        "errors": sum(1 for t in turns if t.error),
        "total_s": round(total, 1),
        "p50_s": round(statistics.median(seconds), 2),
        "p95_s": round(seconds[int(0.95 * (len(seconds) - 1))], 2),
        "max_s": round(seconds[-1], 2),
    }
    return numbers, results


def words(text: str) -> str:
    """Track names without the punctuation they differ in ("Transparency, and" / "and")."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def session_problems(name: str, turns: list[Turn], tracks: dict[str, str]) -> list[str]:
    """What is wrong with one session's answers: a foreign citation, another session's
    history, a follow-up not searched within its own listing, a fallback for the endpoint."""
    problems: list[str] = []
    others = [n for n in PAPERS if n != name]
    if len(turns) != 5:
        return [f"{name}: {len(turns)} answers, not 5"]
    what, how, results, listing, of_those = turns
    for turn in turns:
        if turn.error:
            problems.append(f"{name}: {turn.question}: {turn.error}")
            continue
        if not turn.sources:
            problems.append(f"{name}: {turn.question}: no sources")
        if not set(turn.cited) <= set(turn.sources):
            problems.append(f"{name}: {turn.question}: cites {turn.cited} not in {turn.sources}")
        if any(re.search(rf"\b{re.escape(o)}\b", turn.searched) for o in others):
            problems.append(f"{name}: {turn.question}: searched another's {turn.searched!r}")
        if "The LLM failed" in turn.text or "cut off" in turn.text:
            problems.append(f"{name}: {turn.question}: fell back: {turn.text[:80]}")
    if problems:
        return problems
    if not (what.sources[:1] == [name] and name in what.cited):
        problems.append(f"{name}: first answer is about {what.sources[:1]}, cites {what.cited}")
    for follow_up in (how, results):
        # Rewritten with this session's own previous answer, and answered about its paper.
        if name not in follow_up.searched or follow_up.sources[:1] != [name]:
            problems.append(
                f"{name}: {follow_up.question!r} searched {follow_up.searched!r}, "
                f"found {follow_up.sources[:1]}"
            )
    subarea = words(tracks[name].split(" · ")[-1])
    if name not in listing.sources or not all(subarea in words(tracks[s]) for s in listing.sources):
        problems.append(f"{name}: the track listing is {listing.sources}")
    # Searched within this session's own listing, not another session's.
    if not (
        of_those.searched
        and set(of_those.sources) <= set(listing.sources)
        and of_those.sources[:1] == [name]
    ):
        problems.append(f"{name}: 'of those' searched {of_those.searched!r}: {of_those.sources}")
    return problems


def run_problems(turns: list[list[Turn]], tracks: dict[str, str]) -> list[str]:
    """`session_problems` of every session of a `run_load`, in order."""
    names = PAPERS[: len(turns)]
    return [
        p for name, t in zip(names, turns, strict=True) for p in session_problems(name, t, tracks)
    ]
