"""Retrieval eval: hybrid retrieval (with the fitted relevance model) against plain dense and
plain BM25 on the same questions.

    python -m evals.retrieval [--scale seed|icml|both] [--split NAME ...] [--questions FILE]
                              [--details FILE]

The questions are evals/data/questions.jsonl (one row per question, its `split` the set it
came in; default: the `main` set), or any file of the same shape (the held-out set,
evals/data/heldout_icml.jsonl). (a) `seed`: the 60 papers of corpus/; (b) `icml`: the same
60 mixed into ../shared/corpora/icml2026_main.jsonl (5,863 papers), where the gold of author
and track questions is recomputed from every paper's metadata, and that of multi-paper
questions from their `gold_terms` (every paper whose title and abstract mention the topic;
at seed scale the rules give exactly the hand-picked gold, which `tests/test_evals.py`
checks). A 60-paper question without an answer is left out at ICML scale, where the
conference may well answer it. Indexes are built once under .rag/evals-<scale>/ and reused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag import relevance
from rag.corpus import Paper
from rag.index import PaperIndex
from rag.retrieve import Retrieval, Retriever
from rag.settings import PROJECT_ROOT, Settings

DATA = Path(__file__).with_name("data") / "questions.jsonl"
HELD_OUT_FILE = DATA.with_name("heldout_icml.jsonl")
HELD_OUT = "heldout-icml"  # the held-out set's split: never in DATA, never fitted on
MAIN = "main"  # the set the answer suite and the README's figures use
QUESTIONS = DATA
ICML = PROJECT_ROOT.parent / "shared" / "corpora" / "icml2026_main.jsonl"
MODES = ("hybrid", "dense", "bm25")
K = 5


def load_questions(path: Path = DATA, splits: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The questions of a file (of `splits` only, if given). A file without a `split`
    column is one set; the held-out file's rows are its set."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SystemExit(f"{path}:{n}: {err}") from err
            default = HELD_OUT if path.name == HELD_OUT_FILE.name else path.stem
            row.setdefault("split", default)
            if path.name == HELD_OUT_FILE.name:
                row.setdefault("scale", "icml")
            rows.append(row)
    if splits:
        unknown = set(splits) - {r["split"] for r in rows}
        if unknown:
            raise SystemExit(f"{path} has no set called {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r["split"] in splits]
    return rows


def _fold(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return "".join(c if c.isalnum() else " " for c in plain).split()


def gold_from_metadata(q: dict[str, Any], papers: list[Paper]) -> set[str]:
    """Independent of rag.retrieve: plain token rules over every paper's metadata."""
    if q["type"] == "author":
        want = _fold(q["author"])
        out = set()
        for p in papers:
            for name in p.authors:
                toks = _fold(name)
                if (len(want) == 1 and toks and toks[-1] == want[0]) or (
                    len(want) > 1 and all(w in toks for w in want)
                ):
                    out.add(p.id)
        return out
    want = _fold(q["track"])
    out = set()
    for p in papers:
        area, sub = _fold(p.area), _fold(p.subarea)
        if want in (_fold(p.track), area, sub):
            out.add(p.id)
    return out


def _mentions(tokens: list[str], phrase: str) -> bool:
    """`phrase` as a run of words in `tokens`, each word matched as a prefix ("autoencoder"
    finds "autoencoders"); "^word" must open the text (a title "Position: ...")."""
    if phrase.startswith("^"):
        want = _fold(phrase[1:])
        return all(t.startswith(w) for t, w in zip(tokens, want, strict=False))
    want = _fold(phrase)
    n = len(want)
    return any(
        all(tokens[i + j].startswith(want[j]) for j in range(n)) for i in range(len(tokens) - n + 1)
    )


def gold_from_text(q: dict[str, Any], papers: list[Paper]) -> set[str]:
    """A multi-paper question's gold in a large collection: every paper whose title and
    abstract mention its topic by one of `gold_terms` (alternatives, each a list of phrases
    that must all appear). At ICML scale a topic like sparse autoencoders has dozens of papers
    besides the seed ones, so the hand-picked seed gold would score a right answer as wrong."""
    out = set()
    for p in papers:
        tokens = _fold(f"{p.title} {p.abstract}")
        if any(all(_mentions(tokens, ph) for ph in alt) for alt in q["gold_terms"]):
            out.add(p.id)
    return out


def score_question(q: dict[str, Any], r: Retrieval, gold: set[str]) -> dict[str, Any]:
    ids = [h.paper.id for h in r.hits]
    row: dict[str, Any] = {
        "id": q["id"],
        "type": q["type"],
        "abstained": r.abstained,
        "relevance": r.signals.get("relevance"),
        "n": len(ids),
        "named": bool(r.signals.get("named")),
    }
    if not q["answerable"]:
        return row
    top = ids[:K]
    found = len(gold & set(top))
    row["recall@5"] = found / min(len(gold), K) if gold else 0.0
    rank = next((i for i, pid in enumerate(ids, start=1) if pid in gold), None)
    row["mrr"] = 1.0 / rank if rank else 0.0
    # What the answer lists (every hit of a list; the papers an answer reads, otherwise):
    # the share of them that is gold, and of the gold that they hold.
    got = set(ids)
    row["list_precision"] = len(got & gold) / len(got) if got else 0.0
    row["list_recall"] = len(got & gold) / len(gold) if gold else 0.0
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if "recall@5" in r]
    unanswerable = [r for r in rows if "recall@5" not in r]

    def mean(values: list[float]) -> float:
        return round(statistics.fmean(values), 4) if values else float("nan")

    by_type: dict[str, dict[str, float]] = {}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in answerable:
        groups[r["type"]].append(r)
    for t, rs in sorted(groups.items()):
        by_type[t] = {
            "n": len(rs),
            "recall@5": mean([r["recall@5"] for r in rs]),
            "mrr": mean([r["mrr"] for r in rs]),
        }
        if any("recall@5_hand_gold" in r for r in rs) and t not in ("author", "track"):
            by_type[t]["recall@5_hand_gold"] = mean(
                [r.get("recall@5_hand_gold", r["recall@5"]) for r in rs]
            )
        answered = [r for r in rs if not r["abstained"]]
        by_type[t]["list_precision"] = mean([r["list_precision"] for r in answered])
        by_type[t]["list_recall"] = mean([r["list_recall"] for r in answered])
    na = sum(r["abstained"] for r in unanswerable)
    wa = sum(r["abstained"] for r in answerable)
    return {
        "questions": len(rows),
        "recall@5": mean([r["recall@5"] for r in answerable]),
        "mrr": mean([r["mrr"] for r in answerable]),
        "no_answer_abstained": mean([float(r["abstained"]) for r in unanswerable]),
        "no_answer_abstained_ci95": wilson(na, len(unanswerable)),
        "answerable_wrongly_abstained": mean([float(r["abstained"]) for r in answerable]),
        "answerable_wrongly_abstained_ci95": wilson(wa, len(answerable)),
        "by_type": by_type,
    }


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95% interval for a share k/n."""
    if n == 0:
        return (float("nan"), float("nan"))
    p, z = k / n, 1.96
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (round(mid - half, 3), round(mid + half, 3))


def build(scale: str, warn: bool = True) -> Retriever:
    home = PROJECT_ROOT / ".rag" / f"evals-{scale}"
    paths = [PROJECT_ROOT / "corpus"]
    if scale == "icml":
        if not ICML.exists():
            raise SystemExit(f"{ICML} is missing: the icml scale needs ../shared/corpora")
        paths.append(ICML)
    index = PaperIndex(Settings(home=home))
    summary = index.ingest(paths, progress=sys.stderr.isatty())
    print(
        f"[{scale}] index: {summary.total_papers} papers ({summary.chunks_embedded} chunks "
        f"embedded now, {summary.seconds:.0f}s"
        + (f"; estimated {summary.estimate_seconds:.0f}s" if summary.estimate_seconds else "")
        + ")",
        file=sys.stderr,
    )
    retriever = Retriever(index)
    # The relevance model `python -m evals.calibrate` wrote beside the code (or into RAG_HOME).
    retriever.relevance = relevance.load([home, Settings().home], index.model_key)[0]
    if warn and retriever.relevance is None:
        print(f"[{scale}] warning: no relevance model for {index.model_key}", file=sys.stderr)
    return retriever


def _policy(retriever: Retriever) -> dict[str, Any]:
    """Which relevance model the hybrid rows were decided by."""
    model = retriever.relevance
    if model is None:
        return {"calibrated": False, "text": "no relevance model: ranked by search, none declined"}
    return {
        "calibrated": True,
        "file": str(model.source),
        "abstain_below": model.abstain_below,
        "keep_from": model.keep_from,
        "text": f"relevance model {model.source} (decline below P(answerable) "
        f"{model.abstain_below:.3f}; papers kept from P(relevant) {model.keep_from})",
    }


def gold_for(q: dict[str, Any], retriever: Retriever, papers: list[Paper], scale: str) -> set[str]:
    """A question's gold papers at a scale: its own at its own scale; at ICML scale, an
    author's or track's papers from the metadata and a topic's from `gold_terms`."""
    hand = {retriever.resolve(g) for g in q["gold"]}
    if scale == q.get("scale", "seed"):
        return hand
    if q["type"] in ("author", "track") and q.get(q["type"]):
        return gold_from_metadata(q, papers)
    if q.get("gold_terms"):
        return gold_from_text(q, papers)
    return hand


def run_scale(scale: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
    retriever = build(scale)
    retriever.load()
    papers = list(retriever.papers.values())
    # At 60 papers, questions about the conference's papers have nothing to find; at ICML
    # scale, a 60-paper question without an answer may well have one.
    questions = [
        q
        for q in questions
        if q.get("scale", "seed") == scale or (scale == "icml" and q["answerable"])
    ]
    retriever.retrieve("warm up the models", k=K)
    out: dict[str, Any] = {"scale": scale, "papers": len(papers), "modes": {}}
    for mode in MODES:
        rows, times = [], []
        for q in questions:
            hand = {retriever.resolve(g) for g in q["gold"]}
            gold = gold_for(q, retriever, papers, scale)
            t0 = time.perf_counter()
            r = retriever.retrieve(q["question"], k=K, mode=mode)
            times.append((time.perf_counter() - t0) * 1000)
            row = score_question(q, r, gold)
            if gold != hand and q["answerable"]:
                # Reported beside the recomputed gold, so the change of gold is visible.
                row["recall@5_hand_gold"] = score_question(q, r, hand)["recall@5"]
            rows.append(row | {"top": [h.paper.id for h in r.hits[:K]], "gold": sorted(gold)})
        summary = summarise(rows)
        if mode == "hybrid":
            summary["abstention"] = _policy(retriever)
        times.sort()
        summary["latency_ms"] = {
            "p50": round(statistics.median(times), 1) if times else 0.0,
            "p95": round(times[int(0.95 * (len(times) - 1))], 1) if times else 0.0,
        }
        out["modes"][mode] = summary | {"rows": rows}
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        f"## {result['scale']} ({result['papers']} papers)",
        "",
        "| metric | " + " | ".join(MODES) + " |",
        "|---|" + "---|" * len(MODES),
    ]
    modes = result["modes"]
    for key in ("recall@5", "mrr", "no_answer_abstained", "answerable_wrongly_abstained"):
        cells = []
        for m in MODES:
            cell = f"{modes[m][key]:.3f}"
            if f"{key}_ci95" in modes[m] and m == "hybrid":
                low, high = modes[m][f"{key}_ci95"]
                cell += f" [{low:.2f}, {high:.2f}]"
            cells.append(cell)
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    for key in ("p50", "p95"):
        lines.append(
            f"| latency {key} ms | "
            + " | ".join(f"{modes[m]['latency_ms'][key]:.1f}" for m in MODES)
            + " |"
        )
    policy = modes["hybrid"].get("abstention")
    if policy:
        lines.insert(1, f"\nabstention (hybrid): {policy['text']}\n")
    types = sorted(modes["hybrid"]["by_type"])
    for t in types:
        cells = []
        for m in MODES:
            bt = modes[m]["by_type"][t]
            cell = f"{bt['recall@5']:.3f}"
            if "recall@5_hand_gold" in bt:
                cell += f" (seed gold only {bt['recall@5_hand_gold']:.3f})"
            if "list_precision" in bt and m == "hybrid":
                cell += f" (listed P {bt['list_precision']:.2f} / R {bt['list_recall']:.2f})"
            cells.append(cell)
        n = modes["hybrid"]["by_type"][t]["n"]
        lines.append(f"| {t} recall@5 (n={n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.retrieval")
    parser.add_argument("--scale", choices=["seed", "icml", "both"], default="both")
    parser.add_argument("--details", type=Path, help="write per-question rows as JSON here")
    parser.add_argument(
        "--questions",
        type=Path,
        default=DATA,
        help="question file (evals/data/heldout_icml.jsonl: the held-out set, run once)",
    )
    parser.add_argument(
        "--split",
        nargs="*",
        help=f"the sets of the file to run (default for {DATA.name}: {MAIN}; 'all': every set)",
    )
    args = parser.parse_args()
    splits = args.split if args.split is not None else ([MAIN] if args.questions == DATA else [])
    questions = load_questions(args.questions, [] if splits == ["all"] else splits)
    scales = ["seed", "icml"] if args.scale == "both" else [args.scale]
    results = [run_scale(s, questions) for s in scales]
    for r in results:
        print(render(r))
        print()
    if args.details:
        args.details.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
