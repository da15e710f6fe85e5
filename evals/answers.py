"""Answer eval: grounding, abstention, correctness and latency of `rag.ask` answers.

    python -m evals.answers [--llm local|openai|extractive] [--per-type N] [--out FILE]

Runs on the 60-paper seed index (.rag/evals-seed/, built if missing). `--per-type N` takes the
first N questions of each type (the full set with the local model takes about half an hour).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from evals.retrieval import build, load_questions
from rag.answer import Answer, Answerer
from rag.settings import Settings


def pick(questions: list[dict[str, Any]], per_type: int) -> list[dict[str, Any]]:
    if per_type <= 0:
        return questions
    seen: dict[str, int] = defaultdict(int)
    out = []
    for q in questions:
        if seen[q["type"]] < per_type:
            out.append(q)
            seen[q["type"]] += 1
    return out


def score(q: dict[str, Any], a: Answer, gold: set[str]) -> dict[str, Any]:
    sources = {s.n: s for s in a.sources}
    cites = [n for s in a.sentences for n in s.citations]
    row: dict[str, Any] = {
        "id": q["id"],
        "type": q["type"],
        "answerable": q["answerable"],
        "abstained": a.abstained,
        "backend": a.backend,
        "fallback": bool(a.note),
        "sentences": len(a.sentences),
        "supported": sum(s.supported for s in a.sentences),
        "citations": len(cites),
        "valid_citations": sum(1 for n in cites if n in sources),
        "cites_gold": any(sources[n].paper.id in gold for n in cites if n in sources),
        "first_token_ms": a.timings.get("first_token_ms"),
        "total_ms": a.timings.get("total_ms"),
        "answer": a.text,
    }
    expected = q.get("expected") or []
    if expected and q["type"] == "numeric":
        row["numeric_correct"] = all(e.lower() in a.text.lower() for e in expected)
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in rows if not r["abstained"]]
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    sentences = sum(r["sentences"] for r in answered)
    cites = sum(r["citations"] for r in answered)
    numeric = [r["numeric_correct"] for r in rows if "numeric_correct" in r]

    def pct(values: list[float]) -> dict[str, float]:
        values = sorted(v for v in values if v is not None)
        if not values:
            return {}
        return {
            "p50": round(statistics.median(values)),
            "p95": round(values[int(0.95 * (len(values) - 1))]),
        }

    return {
        "questions": len(rows),
        "citation_validity": round(sum(r["valid_citations"] for r in answered) / cites, 4)
        if cites
        else 1.0,
        "sentences_supported": round(sum(r["supported"] for r in answered) / sentences, 4)
        if sentences
        else 0.0,
        "answers_with_citation": round(sum(r["citations"] > 0 for r in answered) / len(answered), 4)
        if answered
        else 0.0,
        "answers_citing_gold": round(
            sum(r["cites_gold"] for r in answered if r["answerable"])
            / max(1, sum(r["answerable"] for r in answered)),
            4,
        ),
        "no_answer_abstained": round(
            sum(r["abstained"] for r in unanswerable) / len(unanswerable), 4
        )
        if unanswerable
        else None,
        "answerable_wrongly_abstained": round(
            sum(r["abstained"] for r in answerable) / len(answerable), 4
        )
        if answerable
        else None,
        "numeric_correct": round(sum(numeric) / len(numeric), 4) if numeric else None,
        "llm_fallbacks": sum(r["fallback"] for r in rows),
        "first_token_ms": pct([r["first_token_ms"] for r in rows]),
        "total_ms": pct([r["total_ms"] for r in rows if not r["abstained"]]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.answers")
    parser.add_argument("--llm", choices=["local", "openai", "extractive"], default=None)
    parser.add_argument("--per-type", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    retriever = build("seed")
    settings = Settings(home=retriever.index.settings.home)
    if args.llm:
        settings.llm = settings.llm.model_copy(update={"backend": args.llm})
    answerer = Answerer(retriever, settings)
    questions = pick(load_questions(), args.per_type)
    rows = []
    started = time.perf_counter()
    for i, q in enumerate(questions, start=1):
        answer = answerer.ask(q["question"])
        gold = {retriever.resolve(g) for g in q["gold"]}
        rows.append(score(q, answer, gold))
        print(
            f"\r{i}/{len(questions)} answered ({time.perf_counter() - started:.0f}s)",
            end="",
            file=sys.stderr,
            flush=True,
        )
    print(file=sys.stderr)
    result = {"backend": settings.llm.backend, "summary": summarise(rows), "rows": rows}
    print(json.dumps(result["summary"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
