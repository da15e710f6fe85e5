"""Command-line entry points (`python -m rag.ingest`, `python -m rag.search`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from rag.settings import Settings

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILURE = 3


def _settings(parser: argparse.ArgumentParser) -> Settings:
    try:
        return Settings()
    except ValidationError as err:
        parser.exit(EXIT_USAGE, f"{parser.prog}: bad setting: {err}\n")


def _epilog(*sections: str) -> str:
    try:
        text = Settings().describe(*sections)
    except ValidationError:
        text = "  (the current environment has an invalid RAG_* setting)"
    return "settings (environment variables):\n" + text


def ingest_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.ingest",
        description="Index paper listings (.txt) and JSON Lines (.jsonl, .jsonl.gz) files.",
        epilog=_epilog("home", "corpus", "embed", "chunk", "chroma", "ingest"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: corpus/)")
    parser.add_argument(
        "--prune", action="store_true", help="remove papers their source files no longer have"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    settings = _settings(parser)

    from rag.embed import EmbeddingModelError
    from rag.index import IndexError_, PaperIndex

    paths = args.paths or settings.corpus
    try:
        index = PaperIndex(settings)
        summary = index.ingest(
            paths, prune=args.prune, progress=False if args.no_progress else None
        )
    except (IndexError_, EmbeddingModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE if not isinstance(err, EmbeddingModelError) else EXIT_USAGE
    if args.json:
        print(json.dumps(summary.to_dict(), ensure_ascii=False))
    else:
        print(summary.render())
    return EXIT_OK


def search_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.search",
        description="Find the papers nearest to a question.",
        epilog=_epilog("home", "embed", "chroma", "search"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("query", help="what to look for")
    parser.add_argument("--k", type=int, default=None, help="how many papers (default 5)")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args(argv)
    settings = _settings(parser)
    if not args.query.strip():
        parser.error("the query is empty")
    k = args.k or settings.search.k
    if k < 1:
        parser.error("--k must be at least 1")

    from rag.embed import EmbeddingModelError
    from rag.index import IndexError_, PaperIndex

    try:
        index = PaperIndex(settings)
        if index.count_chunks() == 0:
            print(
                f"error: the index {index.name} in {settings.home} is empty; "
                "fill it with `python -m rag.ingest [PATH ...]` (or `make ingest`)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        hits = index.dense_search(args.query, k=k)
    except (IndexError_, EmbeddingModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        rows = [
            {
                "id": h.paper.id,
                "display_name": h.paper.display_name,
                "title": h.paper.title,
                "authors": list(h.paper.authors),
                "track": h.paper.track,
                "score": round(h.score, 4),
                "passage": h.passage,
                "matched": list(h.matched),
            }
            for h in hits
        ]
        print(json.dumps({"query": args.query, "results": rows}, ensure_ascii=False, indent=1))
        return EXIT_OK
    for n, h in enumerate(hits, start=1):
        p = h.paper
        print(f"[{n}] {p.display_name}  (score {h.score:.3f})")
        print(f"    {p.authors_text}")
        if p.track:
            print(f"    {p.track}")
        snippet = " ".join(h.passage.split())
        print(f"    {snippet[:240]}{'…' if len(snippet) > 240 else ''}")
    if not hits:
        print("no papers found")
    return EXIT_OK
