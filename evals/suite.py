"""The evals suite: retrieval, grounding, abstention, correctness and latency in one run,
next to LlamaIndex's plain CitationQueryEngine on the same LLM.

    python -m evals [--llm BACKEND] [--corpus PATH ...] [--quick] [--check]

Writes evals/reports/<date>-<backend>.md, the same numbers as .json, and two PNG plots.
Grounding is scored ALCE-style with the verifier of rag.verify: citation recall is the share
of answer sentences that their citations support; citation precision the share of citations
that support their sentence on their own or are needed for it to be supported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.retrieval import DATA, MAIN, QUESTIONS, load_questions
from evals.verifier import evaluate as evaluate_verifier
from evals.verifier import load_pairs
from rag.answer import normalise_citations, parse_citations
from rag.corpus import Paper
from rag.engine import Engine
from rag.index import PaperIndex
from rag.settings import PROJECT_ROOT, LLMSettings, Settings, fingerprint
from rag.text import split_sentences
from rag.verify import Verifier, misattributed, strip_citations
from rag.writers import ModelWriter

REPORTS = Path(__file__).with_name("reports")
FOLLOWUPS = Path(__file__).with_name("data") / "followups.jsonl"
K = 5
QUICK_PER_TYPE = 3
# `--check` fails the run below these (what `make test` guards against regressions).
THRESHOLDS = {
    "ours.citation_validity": 1.0,
    "ours.answers_with_citation": 0.9,
    "ours.citation_recall": 0.8,
    "ours.no_answer_abstained": 0.6,
    "ours.answerable_wrongly_abstained_max": 0.15,
    "retrieval.recall@5": 0.85,
}


# ---------------------------------------------------------------------------- scoring


def retrieval_scores(ranked: list[str], gold: set[str]) -> dict[str, float]:
    if not gold:
        return {}
    top = ranked[:K]
    dcg = sum(1 / math.log2(i + 2) for i, pid in enumerate(top) if pid in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), K)))
    rank = next((i for i, pid in enumerate(ranked, start=1) if pid in gold), None)
    return {
        "recall@5": len(gold & set(top)) / min(len(gold), K),
        "mrr": 1 / rank if rank else 0.0,
        "ndcg@5": dcg / ideal if ideal else 0.0,
    }


def grounding(
    sentences: list[tuple[str, list[int]]], sources: dict[int, Paper], verifier: Verifier
) -> dict[str, Any]:
    """ALCE-style citation recall and precision of (sentence, cited source numbers) pairs."""
    n_cites = valid = precise = supported = wrong = 0
    for text, cites in sentences:
        good = [n for n in cites if n in sources]
        n_cites += len(cites)
        valid += len(good)
        if not good:
            continue
        # Names one source while citing only others that do not name it.
        wrong += bool(misattributed(text, [sources[n] for n in good], list(sources.values())))
        whole = verifier.check(text, [sources[n] for n in good]).supported
        supported += whole
        for n in good:
            alone = verifier.check(text, [sources[n]]).supported
            rest = [sources[m] for m in good if m != n]
            needed = whole and not (rest and verifier.check(text, rest).supported)
            precise += alone or needed
    return {
        "sentences": len(sentences),
        "supported": supported,
        "citations": n_cites,
        "valid": valid,
        "precise": precise,
        "misattributed": wrong,
    }


def correct(expected: list[str], text: str) -> bool | None:
    if not expected:
        return None
    flat = text.replace("\\,", ",").lower()
    return all(e.lower() in flat or e.replace(",", "").lower() in flat for e in expected)


# ---------------------------------------------------------------------------- systems


def _first_token(timings: dict[str, float]) -> float | None:
    first = timings.get("first_token_ms")
    if first is None:
        return None
    return first + timings.get("retrieve_ms", 0.0) + timings.get("read_ms", 0.0)


def run_ours(
    engine: Engine, q: dict[str, Any], gold: set[str], verifier: Verifier
) -> dict[str, Any]:
    started = time.perf_counter()
    answer = engine.ask(q["question"])
    total = (time.perf_counter() - started) * 1000
    sources = {s.n: s.paper for s in answer.sources}
    cited = {sources[n].id for s in answer.sentences for n in s.citations if n in sources}
    row = {
        "abstained": answer.abstained,
        "reason": answer.reason,
        "answer": answer.text,
        "shape": answer.shape.value,
        "written_by": answer.written_by,
        "fallback": answer.failed,
        # Which tries wrote it: the first, a redraft of a partly supported first answer, or
        # the retry after an answer none of whose sentences held.
        "tries": [t for t in ("redraft", "retry") if f"{t}_ms" in answer.timings],
        "retrieve_ms": answer.timings.get("retrieve_ms"),
        # From the question's start: retrieval and the model's reading come before the
        # answer's first token (the reading's prefill is most of that wait).
        "first_token_ms": _first_token(answer.timings),
        "read_ms": answer.timings.get("read_ms"),
        "total_ms": total,
        "cited_gold": bool(cited & gold),
        "cited_all_gold": bool(gold) and gold <= cited,
        # Citation precision against the gold papers: of the papers cited, those that answer.
        "cited_papers": len(cited),
        "cited_gold_papers": len(cited & gold),
        "compare": bool(q.get("compare")),
        "label": q.get("label"),
        "verdict": answer.verdict,
        "read": answer.read,
        "sentences": [s.to_dict() for s in answer.sentences],
        "raw": answer.raw,
    }
    # The verdict of a yes/no answer and what a model says the sources lack are not claims
    # a source supports: grounding scores the claims.
    pairs = [(s.text, s.citations) for s in answer.sentences if s.kind == "claim"]
    row |= {"grounding": grounding(pairs, sources, verifier) if not answer.abstained else None}
    row["correct"] = correct(q.get("expected") or [], answer.text)
    return row


def run_followups(engine: Engine, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each pair's follow-up asked after its first question, in one conversation: how long
    it takes (and the model's condensing of it, when no rule made it standalone)."""
    from rag.chat import Conversation

    rows = []
    for pair in pairs:
        conv = Conversation()
        engine.ask(pair["first"], conv)
        started = time.perf_counter()
        answer = engine.ask(pair["follow_up"], conv)
        total = (time.perf_counter() - started) * 1000
        gold = {engine.retriever.resolve(g) for g in pair["gold"]}
        condense = answer.timings.get("condense_ms")
        first = _first_token(answer.timings)
        rows.append(
            {
                "id": pair["id"],
                "standalone": conv.turns[-1].standalone,
                "condensed": condense is not None,
                "condense_ms": condense,
                # From the follow-up's start: its condensing comes before the answer's tokens.
                "first_token_ms": None if first is None else first + (condense or 0.0),
                "total_ms": total,
                "written_by": answer.written_by,
                "gold_found": bool(gold & {s.paper.id for s in answer.sources}),
            }
        )
    return {
        "pairs": len(rows),
        "condensed": sum(r["condensed"] for r in rows),
        "gold_found": round(sum(r["gold_found"] for r in rows) / max(1, len(rows)), 4),
        "answered_by_model": round(
            sum(r["written_by"] == "model" for r in rows) / max(1, len(rows)), 4
        ),
        "latency_ms": {
            "first_token": _pct([r["first_token_ms"] for r in rows]),
            "total": _pct([r["total_ms"] for r in rows]),
            "condense": _pct([r["condense_ms"] for r in rows]),
        },
        "rows": rows,
    }


class Baseline:
    """LlamaIndex's CitationQueryEngine: plain dense top-5, the same LLM, its own prompt."""

    def __init__(self, index: PaperIndex, llm: Any, papers: dict[str, Paper]) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.query_engine import CitationQueryEngine
        from llama_index.vector_stores.chroma import ChromaVectorStore

        vector = VectorStoreIndex.from_vector_store(
            ChromaVectorStore(chroma_collection=index.collection), embed_model=index.embed_model
        )
        self.engine = CitationQueryEngine.from_args(vector, llm=llm, similarity_top_k=K)
        self.papers = papers

    def run(self, q: dict[str, Any], gold: set[str], verifier: Verifier) -> dict[str, Any]:
        started = time.perf_counter()
        response: Any = self.engine.query(q["question"])
        total = (time.perf_counter() - started) * 1000
        text = str(response.response or "")
        sources: dict[int, Paper] = {}
        for i, node in enumerate(response.source_nodes, start=1):
            pid = str(node.node.metadata.get("paper_id", ""))
            if pid in self.papers:
                sources[i] = self.papers[pid]
        pairs = [
            (strip_citations(s), parse_citations(s))
            for s in split_sentences(normalise_citations(text))
        ]
        refused = not text.strip() or "none of the sources" in text.lower()
        return {
            "abstained": refused,
            "answer": text,
            "total_ms": total,
            "cited_gold": any(sources[n].id in gold for _, c in pairs for n in c if n in sources),
            "grounding": grounding(pairs, sources, verifier) if not refused else None,
            "correct": correct(q.get("expected") or [], text),
        }


# ---------------------------------------------------------------------------- summary


def _pct(values: Sequence[float | None]) -> dict[str, float]:
    clean = sorted(v for v in values if v is not None)
    if not clean:
        return {}
    return {
        "p50": round(statistics.median(clean)),
        "p95": round(clean[min(len(clean) - 1, int(0.95 * len(clean)))]),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in rows if not r["abstained"] and r["grounding"]]
    g: defaultdict[str, int] = defaultdict(int)
    for r in answered:
        for key, value in r["grounding"].items():
            g[key] += value
    unanswerable = [r for r in rows if not r["answerable"]]
    answerable = [r for r in rows if r["answerable"]]
    checks = [r["correct"] for r in rows if r["correct"] is not None and r["answerable"]]
    compares = [r for r in answerable if r.get("compare")]
    yesno = [r for r in answerable if r.get("label") in ("yes", "no")]

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 4) if b else None

    return {
        "questions": len(rows),
        "citation_validity": ratio(g["valid"], g["citations"]),
        "citation_recall": ratio(g["supported"], g["sentences"]),
        "citation_precision": ratio(g["precise"], g["valid"]),
        "misattributed_sentences": g["misattributed"],
        "cited_papers_gold": ratio(
            sum(r.get("cited_gold_papers", 0) for r in answerable),
            sum(r.get("cited_papers", 0) for r in answerable),
        ),
        "answers_with_citation": ratio(
            sum(1 for r in answered if r["grounding"]["citations"]), len(answered)
        ),
        "answers_citing_gold": ratio(
            sum(r["cited_gold"] for r in answered if r["answerable"]),
            sum(1 for r in answered if r["answerable"]),
        ),
        "no_answer_abstained": ratio(sum(r["abstained"] for r in unanswerable), len(unanswerable)),
        "answerable_wrongly_abstained": ratio(
            sum(r["abstained"] for r in answerable), len(answerable)
        ),
        "correct": ratio(sum(checks), len(checks)),
        # Answerable questions whose answer the model wrote (verified), not the sources'
        # sentences standing in for it and not an abstention.
        "answered_by_model": ratio(
            sum(r.get("written_by") == "model" for r in answerable), len(answerable)
        ),
        # Of those, the share the last try wrote: the model picking the sources' sentences
        # that answer, after a first answer none of whose sentences held.
        "model_answers_from_retry": ratio(
            sum(
                r.get("written_by") == "model" and "retry" in r.get("tries", ()) for r in answerable
            ),
            sum(r.get("written_by") == "model" for r in answerable),
        ),
        "compare_cites_all": ratio(
            sum(r.get("cited_all_gold", False) for r in compares), len(compares)
        ),
        "yesno_agrees": ratio(sum(r.get("verdict") == r.get("label") for r in yesno), len(yesno)),
        "yesno_macro_f1": _macro_f1(yesno),
        "latency_ms": {
            "retrieve": _pct([r.get("retrieve_ms") for r in rows]),
            "first_token": _pct([r.get("first_token_ms") for r in rows]),
            "total": _pct([r["total_ms"] for r in rows]),
        },
    }


def _macro_f1(yesno: list[dict[str, Any]]) -> float | None:
    """The mean over "yes" and "no" of F1, a missing verdict counting against both: what
    always answering yes cannot score well on, unlike agreement when most labels are yes."""
    if not yesno:
        return None
    f1s = []
    for label in ("yes", "no"):
        hit = sum(r.get("verdict") == label == r.get("label") for r in yesno)
        said = sum(r.get("verdict") == label for r in yesno)
        truth = sum(r.get("label") == label for r in yesno)
        f1s.append(2 * hit / (said + truth) if said + truth else 0.0)
    return round(sum(f1s) / 2, 3)


def by_type(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["type"]].append(r)
    return {t: summarise(rs) for t, rs in sorted(groups.items())}


# ---------------------------------------------------------------------------- report


def report_stem(date: str, backend: str, quick: bool, question_set: str = "") -> str:
    """`2026-11-30-local`, `...-quick`, `...-questions_heldout` for another question set."""
    return (
        f"{date}-{backend}{'-quick' if quick else ''}{f'-{question_set}' if question_set else ''}"
    )


def write_report(result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = report_stem(
        result["date"], result["backend"], result["quick"], result.get("question_set", "")
    )
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    plots = _plots(result, out_dir, stem)
    ours, base = result["ours"], result.get("baseline")
    keys = [
        "citation_validity",
        "citation_recall",
        "citation_precision",
        "misattributed_sentences",
        "cited_papers_gold",
        "answers_with_citation",
        "answers_citing_gold",
        "no_answer_abstained",
        "answerable_wrongly_abstained",
        "correct",
        "answered_by_model",
        "model_answers_from_retry",
        "compare_cites_all",
        "yesno_agrees",
        "yesno_macro_f1",
    ]
    lines = [
        f"# Evals {result['date']} — {result['backend']} ({result['model']})",
        "",
        f"`{result['command']}` on {result['papers']} papers, {result['questions']} questions.",
        "",
        "| metric | ours | CitationQueryEngine (dense top-5, same LLM) |",
        "|---|---|---|",
    ]
    for key in keys:
        b = base["summary"].get(key) if base else None
        lines.append(f"| {key} | {_fmt(ours['summary'].get(key))} | {_fmt(b)} |")
    for part in ("retrieve", "first_token", "total"):
        o = ours["summary"]["latency_ms"].get(part, {})
        b = base["summary"]["latency_ms"].get(part, {}) if base else {}
        lines.append(f"| {part} ms p50 / p95 | {_lat(o)} | {_lat(b)} |")
    r = result["retrieval"]
    lines += [
        "",
        "Retrieval (hybrid): " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()),
        "",
        "Verifier on its calibration set: "
        f"precision {result['verifier']['precision']:.2f}, "
        f"recall {result['verifier']['recall']:.2f}, "
        f"accuracy {result['verifier']['accuracy']:.2f} "
        f"({result['verifier']['pairs']} pairs)",
        "",
        "Citation recall is the share of answer sentences the verifier finds supported by "
        f"their citations; the verifier's own precision is {result['verifier']['precision']:.2f}.",
        "",
        "| type | n | recall@5 | answered by the model | citation recall | gold cited | "
        "cited papers gold | abstained | correct | first token p50 | total p50 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t, s in result["ours"]["by_type"].items():
        lat = s["latency_ms"]
        lines.append(
            f"| {t} | {s['questions']} | {_fmt(result['retrieval_by_type'].get(t))} | "
            f"{_fmt(s['answered_by_model'])} | {_fmt(s['citation_recall'])} | "
            f"{_fmt(s['answers_citing_gold'])} | {_fmt(s['cited_papers_gold'])} | "
            f"{_fmt(_abst(s))} | {_fmt(s['correct'])} | "
            f"{_lat1(lat.get('first_token', {}))} | {_lat1(lat.get('total', {}))} |"
        )
    if f := result.get("followups"):
        lat = f["latency_ms"]
        lines += [
            "",
            f"Follow-ups ({f['pairs']} conversations of {FOLLOWUPS.name}): first token p50 "
            f"{_lat1(lat['first_token'])}, total p50 {_lat1(lat['total'])}; "
            f"{f['condensed']} condensed by the model (p50 {_lat1(lat['condense'])}), the rest "
            f"made standalone by rules; the earlier paper found {f['gold_found']:.2f}, "
            f"answered by the model {f['answered_by_model']:.2f}.",
        ]
    lines += ["", *[f"![{p.stem}]({p.name})" for p in plots]]
    path = out_dir / f"{stem}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _abst(s: dict[str, Any]) -> float | None:
    return (
        s["no_answer_abstained"]
        if s["no_answer_abstained"] is not None
        else s["answerable_wrongly_abstained"]
    )


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _lat1(d: dict[str, float]) -> str:
    return f"{d['p50'] / 1000:.1f} s" if d else "–"


def _lat(d: dict[str, float]) -> str:
    return f"{d['p50']:.0f} / {d['p95']:.0f}" if d else "–"


def _plots(result: dict[str, Any], out_dir: Path, stem: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = list(result["ours"]["by_type"])
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.4
    for i, (name, key) in enumerate([("retrieval recall@5", None), ("citation recall", "c")]):
        values = [
            (
                result["retrieval_by_type"].get(t)
                if key is None
                else result["ours"]["by_type"][t]["citation_recall"]
            )
            or 0.0
            for t in types
        ]
        ax.bar([x + i * width for x in range(len(types))], values, width, label=name)
    ax.set_xticks([x + width / 2 for x in range(len(types))], types, rotation=20)
    ax.set_ylim(0, 1.05)
    ax.legend()
    ax.set_title("Scores per question type")
    fig.tight_layout()
    scores = out_dir / f"{stem}-types.png"
    fig.savefig(scores, dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    totals = [r["total_ms"] / 1000 for r in result["ours"]["rows"]]
    ax.hist(totals, bins=20, label="ours")
    if result.get("baseline"):
        ax.hist(
            [r["total_ms"] / 1000 for r in result["baseline"]["rows"]],
            bins=20,
            alpha=0.6,
            label="CitationQueryEngine",
        )
    ax.set_xlabel("seconds per answer")
    ax.legend()
    ax.set_title("Latency distribution")
    fig.tight_layout()
    latency = out_dir / f"{stem}-latency.png"
    fig.savefig(latency, dpi=90)
    plt.close(fig)
    return [scores, latency]


# ---------------------------------------------------------------------------- main


def check(result: dict[str, Any]) -> list[str]:
    failures = []
    ours = result["ours"]["summary"]
    for key, floor in THRESHOLDS.items():
        part, name = key.split(".", 1)
        if name.endswith("_max"):
            value = ours.get(name.removesuffix("_max"))
            if value is not None and value > floor:
                failures.append(f"{name.removesuffix('_max')} {value} > {floor}")
            continue
        value = result["retrieval"].get(name) if part == "retrieval" else ours.get(name)
        if value is not None and value < floor:
            failures.append(f"{name} {value} < {floor}")
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals")
    parser.add_argument("--llm", choices=["local", "openai", "extractive"], default=None)
    parser.add_argument("--corpus", nargs="+", type=Path, default=[PROJECT_ROOT / "corpus"])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PER_TYPE} per type")
    parser.add_argument("--check", action="store_true", help="exit 1 below the thresholds")
    parser.add_argument(
        "--types",
        nargs="+",
        default=None,
        help="only questions of these types (a working subset: its report is named for them)",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--no-followups",
        action="store_true",
        help=f"skip the follow-up conversations of {FOLLOWUPS.name} (a full run asks them)",
    )
    parser.add_argument(
        "--questions",
        type=Path,
        default=QUESTIONS,
        help=f"question file (default {DATA.relative_to(DATA.parent.parent.parent)}: its "
        "--split sets; evals/data/heldout_icml.jsonl is the held-out set)",
    )
    parser.add_argument(
        "--split",
        nargs="*",
        help=f"the sets of the question file to ask (default for {DATA.name}: {MAIN})",
    )
    parser.add_argument("--out", type=Path, default=REPORTS)
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="the RAG_HOME of the suite's index (default .rag/evals-<hash of the corpus paths>); "
        "an index of the same corpus is brought up to date, not rebuilt",
    )
    args = parser.parse_args(argv)
    from tqdm import tqdm

    settings = Settings()
    if args.llm:
        settings.llm = settings.llm.model_copy(update={"backend": args.llm})
    corpus = [p.resolve() for p in args.corpus]
    home = args.home or PROJECT_ROOT / ".rag" / f"evals-{fingerprint([str(p) for p in corpus])}"
    settings = settings.model_copy(update={"home": home})
    index = PaperIndex(settings)
    index.ingest(corpus, progress=sys.stderr.isatty())
    engine = Engine(settings, index=index)
    retriever = engine.retriever
    retriever.load()
    index.embed_model.get_text_embedding_batch(["warm up"])
    verifier = engine.answerer.verifier
    splits = args.split if args.split is not None else ([MAIN] if args.questions == DATA else [])
    questions = load_questions(args.questions, splits)
    if args.types:
        unknown = set(args.types) - {q["type"] for q in questions}
        if unknown:
            parser.error(f"no questions of type {', '.join(sorted(unknown))} in {args.questions}")
        questions = [q for q in questions if q["type"] in args.types]
    if args.quick:
        seen: dict[str, int] = defaultdict(int)
        picked = []
        for q in questions:
            seen[q["type"]] += 1
            if seen[q["type"]] <= QUICK_PER_TYPE:
                picked.append(q)
        questions = picked
    writer = engine.writer
    llm = getattr(writer.backend, "llm", None) if isinstance(writer, ModelWriter) else None
    baseline = None
    if llm is not None and not args.no_baseline:
        baseline = Baseline(index, llm, retriever.papers)

    ours_rows, base_rows, ret_rows = [], [], []
    # Each question's rows as it finishes: a run with the baseline takes hours on a laptop,
    # and one that is stopped still shows where it got.
    args.out.mkdir(parents=True, exist_ok=True)
    question_set = (
        "-".join(s for s in splits if s != MAIN)
        if args.questions.resolve() == QUESTIONS.resolve()
        else args.questions.stem
    )
    if args.types:
        question_set = "-".join([question_set, *sorted(args.types)]).strip("-")
    # A run with another bundled model is named for it, beside the default model's report.
    label: str = settings.llm.backend
    if (
        label == "local"
        and settings.llm.local_model != LLMSettings.model_fields["local_model"].default
    ):
        label = f"local-{settings.llm.local_model}"
    stem = report_stem(dt.date.today().isoformat(), label, args.quick, question_set)
    with (args.out / f"{stem}.rows.jsonl").open("w", encoding="utf-8") as progress:
        for q in tqdm(questions, desc="questions", file=sys.stderr, disable=None):
            gold = {retriever.resolve(g) for g in q["gold"]}
            hits = retriever.retrieve(q["question"], k=K)
            ret_rows.append(
                {"type": q["type"], **retrieval_scores([h.paper.id for h in hits.hits], gold)}
            )
            meta = {"id": q["id"], "type": q["type"], "answerable": q["answerable"]}
            ours_rows.append(meta | run_ours(engine, q, gold, verifier))
            if baseline is not None:
                base_rows.append(meta | baseline.run(q, gold, verifier))
            done = {"ours": ours_rows[-1], "baseline": base_rows[-1] if baseline else None}
            progress.write(json.dumps(done, ensure_ascii=False) + "\n")
            progress.flush()

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        values = [r[key] for r in rows if key in r]
        return round(statistics.fmean(values), 4) if values else float("nan")

    retrieval = {k: mean(ret_rows, k) for k in ("recall@5", "mrr", "ndcg@5")}
    retrieval_by_type = {
        t: mean([r for r in ret_rows if r["type"] == t], "recall@5")
        for t in {r["type"] for r in ret_rows}
    }
    retrieval_by_type = {t: v for t, v in retrieval_by_type.items() if not math.isnan(v)}
    followups = None
    # The follow-up conversations are about the seed papers: asked of the default corpus only.
    seeds = corpus == [(PROJECT_ROOT / "corpus").resolve()]
    if not args.quick and not args.types and not args.no_followups and seeds:
        followups = run_followups(engine, load_questions(FOLLOWUPS))
    verifier_result = evaluate_verifier(verifier, load_pairs())  # type: ignore[arg-type]
    verifier_result.pop("mistakes")
    result = {
        "date": dt.date.today().isoformat(),
        "command": "python -m evals " + " ".join(argv if argv is not None else sys.argv[1:]),
        "backend": label,
        "model": writer.model or "none",
        "quick": args.quick,
        "question_set": question_set,
        "papers": len(retriever.papers),
        "questions": len(questions),
        "retrieval": retrieval,
        "retrieval_by_type": retrieval_by_type,
        "verifier": verifier_result,
        "ours": {"summary": summarise(ours_rows), "by_type": by_type(ours_rows), "rows": ours_rows},
        "baseline": {"summary": summarise(base_rows), "rows": base_rows} if base_rows else None,
        "followups": followups,
    }
    report = write_report(result, args.out)
    print(report.read_text().split("\n![")[0])
    print(f"report: {report}")
    if args.check:
        failures = check(result)
        for f in failures:
            print(f"REGRESSION: {f}", file=sys.stderr)
        return 1 if failures else 0
    return 0
