"""Fit every model the question side reads, and say how well each does on questions it did
not see.

    python -m evals.calibrate [--scales seed,icml] [--out-dir rag/calibration] [--report FILE]

1. The intent classifier (rag.intent) on the development questions' hand-given intents:
   rag/calibration/intent.json. It does not depend on the embedding model.
2. The relevance model (rag.relevance) for the embedding model in use (RAG_EMBED_MODEL):
   each development question is run through retrieval at each scale (`seed`: the 60 papers
   of corpus/; `icml`: those mixed into ../shared/corpora/icml2026_main.jsonl), its evidence
   kept with its gold papers; then everything is fitted, thresholds included, and written to
   rag/calibration/<model key>.relevance.json.

Leave-one-set-out cross-validation (each question set predicted by models fitted without it)
gives the figures printed: what a question set written after the fit would see. The held-out
set (evals/data/heldout_icml.jsonl) is never read here.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from evals.retrieval import DATA, HELD_OUT, build, gold_for, load_questions
from rag import intent
from rag.embed import model_identity
from rag.intent import IntentModel
from rag.relevance import (
    PACKAGE_DIR,
    Predictions,
    RelevanceModel,
    Sample,
    TermWeights,
    TopicSample,
    choose_topic,
    observations,
    out_of_fold,
)
from rag.retrieve import Retriever
from rag.settings import PROJECT_ROOT

K = 5


def fit_intent(questions: list[dict[str, Any]]) -> tuple[IntentModel, dict[str, Any]]:
    """The intent classifier, and its leave-one-set-out accuracy."""
    texts = [q["question"] for q in questions]
    labels = [q["intent"] for q in questions]
    groups = [q["split"] for q in questions]
    right = 0
    for group in sorted(set(groups)):
        inside = [i for i, g in enumerate(groups) if g != group]
        fitted = IntentModel.fit([texts[i] for i in inside], [labels[i] for i in inside])
        right += sum(
            fitted.predict(texts[i]).value == labels[i] for i, g in enumerate(groups) if g == group
        )
    metrics = {"leave_one_set_out_accuracy": round(right / len(questions), 4)}
    info = {"fitted_on": _source(questions), "metrics": metrics, **_stamp()}
    return IntentModel.fit(texts, labels, info), metrics


def collect(
    retriever: Retriever, questions: list[dict[str, Any]], scale: str
) -> tuple[list[Sample], list[TopicSample], list[dict[str, Any]]]:
    """Each question's evidence at this scale, with its gold; the author's and track's
    questions' words for the topic cut; and the questions kept, in the samples' order."""
    papers = list(retriever.papers.values())
    samples, topics, kept = [], [], []
    bm25 = retriever._bm25
    passages = len(bm25.corpus) if bm25 is not None else 0
    for q in questions:
        written_for = q.get("scale", "seed")
        # Questions on the conference's papers have nothing to find among 60; a 60-paper
        # question's "no answer" may well be answered among 6,000.
        if written_for != scale and (scale == "seed" or not q["answerable"]):
            continue
        gold = frozenset(gold_for(q, retriever, papers, scale))
        parsed = retriever.parse(q["question"])
        if parsed.authors or parsed.tracks:
            said = tuple(dict.fromkeys(retriever.topic_terms(parsed)))
            allowed = retriever._allowed(parsed) or set()
            listing = q["type"] in ("author", "track") and q["answerable"] and gold == allowed
            wrote = [retriever._written(pid)[0] for pid in gold] if listing else []
            topics.append(
                TopicSample(
                    said,
                    tuple(retriever._df(t) for t in said),
                    passages,
                    not listing,
                    q["split"],
                    tuple(any(t in w for w in wrote) for t in said) if listing else (),
                )
            )
            if listing:
                continue  # answered from the metadata, whatever the relevance model says
        ev = retriever.evidence(q["question"], k=K, topical=True)
        if ev is None:
            continue
        # Below 60 papers the hand gold is every relevant paper; among 6,000, only where it
        # comes from the metadata or a topic's words.
        complete = (
            scale == written_for == "seed"
            or bool(q.get("gold_terms"))
            or (q["type"] in ("author", "track") and scale == written_for)
        )
        samples.append(Sample(ev, gold, bool(q["answerable"]), q["split"], complete))
        kept.append(q | {"at": scale})
    return samples, topics, kept


def interval(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95% interval for a share k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p, z = k / n, 1.96
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(mid - half, 3), round(mid + half, 3))


def share(k: int, n: int) -> dict[str, Any]:
    return {"share": round(k / n, 4) if n else math.nan, "n": n, "ci95": interval(k, n)}


def cross_validated(
    samples: list[Sample], kept: list[dict[str, Any]], oof: Predictions, model: RelevanceModel
) -> dict[str, Any]:
    """What leave-one-set-out predictions give at each scale. Each set's abstention threshold
    is chosen from the other sets' predictions, as the fit chooses it."""
    from rag.relevance import choose_abstain

    declined = np.zeros(len(samples), dtype=bool)
    for group in sorted({s.group for s in samples}):
        others = [n for n, s in enumerate(samples) if s.group != group]
        cut = choose_abstain(
            [samples[n] for n in others], oof.answerable[others], model.MAX_WRONGLY_ABSTAINED
        )
        for n, s in enumerate(samples):
            if s.group == group:
                declined[n] = oof.answerable[n] < cut
    out: dict[str, Any] = {}
    for name in sorted({q["at"] for q in kept}):
        idx = [n for n, q in enumerate(kept) if q["at"] == name]
        # Scored on the questions written for this scale (60-paper ones at 60 papers).
        written = [n for n in idx if kept[n].get("scale", "seed") == name]
        na = [n for n in written if not samples[n].answerable]
        ans = [n for n in written if samples[n].answerable]
        row: dict[str, Any] = {
            "no_answer_abstained": share(int(declined[na].sum()), len(na)),
            "answerable_wrongly_abstained": share(int(declined[ans].sum()), len(ans)),
        }
        recall, by_type = [], defaultdict(list)
        lists: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for n in (n for n in idx if samples[n].answerable and samples[n].gold):
            complete = samples[n].complete
            s, p = samples[n], oof.relevance[n]
            order = np.argsort(-p, kind="stable")
            ids = [s.evidence.candidates[i].id for i in order]
            got = len(set(ids[:K]) & s.gold) / min(len(s.gold), K)
            recall.append(got)
            by_type[kept[n]["type"]].append(got)
            listing = s.evidence.intent == "papers"
            cut = model.keeps(s.evidence.intent)
            listed = [ids[i] for i, j in enumerate(order) if p[j] >= cut] or ids[:1]
            if not listing:
                listed = listed[:K]
            hit = len(set(listed) & s.gold)
            if complete:  # otherwise what else is listed may be relevant, unlabelled
                lists[kept[n]["type"]].append((hit / len(listed), hit / len(s.gold)))
        row["recall@5"] = round(float(np.mean(recall)), 4) if recall else math.nan
        row["recall@5_by_type"] = {
            t: round(float(np.mean(v)), 4) for t, v in sorted(by_type.items())
        }
        row["listed_precision_recall_by_type"] = {
            t: [
                round(float(np.mean([a for a, _ in v])), 4),
                round(float(np.mean([b for _, b in v])), 4),
                len(v),
            ]
            for t, v in sorted(lists.items())
        }
        out[name] = row
    return out


def topic_cut_cross_validated(samples: list[Sample], topics: list[TopicSample]) -> dict[str, Any]:
    """Author's and track's questions told apart as asking for the whole list or about a
    topic among their papers, each set by term weights and a cut fitted without it."""
    right = {True: 0, False: 0}
    seen = {True: 0, False: 0}
    for group in sorted({t.group for t in topics}):
        weights = TermWeights.fit(
            observations(
                [s for s in samples if s.group != group], [t for t in topics if t.group != group]
            )
        )
        cut = choose_topic(weights, [t for t in topics if t.group != group])
        for t in (t for t in topics if t.group == group):
            seen[t.topical] += 1
            right[t.topical] += (weights.heaviest(t.terms, t.df, t.passages) >= cut) == t.topical
    return {
        "lists_read_as_lists": share(right[False], seen[False]),
        "topics_read_as_topics": share(right[True], seen[True]),
    }


def _source(questions: list[dict[str, Any]]) -> dict[str, Any]:
    data = DATA.read_bytes()
    return {
        "questions": str(DATA.relative_to(PROJECT_ROOT)),
        "sha256": hashlib.sha256(data).hexdigest(),
        "count": len(questions),
        "sets": len({q["split"] for q in questions}),
    }


def _stamp() -> dict[str, Any]:
    command = " ".join(["python -m evals.calibrate", *sys.argv[1:]])
    return {"date": datetime.date.today().isoformat(), "command": command}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.calibrate", description=__doc__)
    parser.add_argument("--scales", default="seed,icml", help="comma-separated: seed, icml")
    parser.add_argument("--out-dir", type=Path, default=PACKAGE_DIR)
    parser.add_argument("--report", type=Path, help="also write the figures as JSON here")
    parser.add_argument(
        "--samples",
        type=Path,
        help="keep the questions' evidence in this file and read it from there next time "
        "(for refitting without running every question again; delete it when the index, "
        "the questions or the intent classifier change)",
    )
    args = parser.parse_args(argv)
    questions = load_questions(DATA)
    if any(q["split"] == HELD_OUT for q in questions):
        parser.error(f"{DATA} holds held-out questions: fit on development questions only")

    intents, intent_metrics = fit_intent(questions)
    intents.save(args.out_dir / "intent.json")
    intent._LOADED = intents  # the relevance evidence reads the intent just fitted
    print(f"intent: leave-one-set-out accuracy {intent_metrics['leave_one_set_out_accuracy']:.3f}")

    if args.samples and args.samples.exists():
        with args.samples.open("rb") as f:
            samples, topics, kept, model_key, identity, papers = pickle.load(f)
    else:
        samples, topics, kept = [], [], []
        model_key, identity, papers = "", {}, {}
        for scale in args.scales.split(","):
            retriever = build(scale, warn=False)
            retriever.relevance = None  # the evidence does not depend on a fitted model
            model_key = retriever.index.model_key
            identity = model_identity(retriever.index.settings.embed)
            papers[scale] = len(retriever.papers)
            got, topic, asked = collect(retriever, questions, scale)
            samples += got
            topics += topic
            kept += asked
            print(f"[{scale}] {len(got)} questions with evidence", file=sys.stderr)
        if args.samples:
            with args.samples.open("wb") as f:
                pickle.dump((samples, topics, kept, model_key, identity, papers), f)
    info = {
        "model": identity,
        "fitted_on": _source(questions) | {"papers": papers, "samples": len(samples)},
        **_stamp(),
    }
    oof = out_of_fold(samples, topics)
    model = RelevanceModel.fit(model_key, samples, topics, info, oof)
    figures = cross_validated(samples, kept, oof, model)
    figures["topic_cut"] = topic_cut_cross_validated(samples, topics)
    model.info["leave_one_set_out"] = figures
    out = args.out_dir / f"{model_key}.relevance.json"
    model.save(out)
    print(
        f"relevance ({identity.get('name')}, {model_key}): decline below P(answerable) "
        f"{model.abstain_below:.3f}; answers hold papers from P(relevant) {model.keep_from}; "
        f"topic words from weight {model.topic_from:.3f}"
    )
    print(json.dumps(figures, indent=1))
    print(f"wrote {out} and {args.out_dir / 'intent.json'}")
    if args.report:
        args.report.write_text(
            json.dumps({"intent": intent_metrics, "relevance": figures}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
