"""Ingest time against the floor: raw `SentenceTransformer.encode` of the same chunk texts.

    python -m evals.ingest_bench [PATH ...]

Both are measured in one process, the model loaded once beforehand, so the ratio shows only
what the pipeline adds (reading, merging, chunking, Chroma writes, bookkeeping).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from rag.corpus import read_papers
from rag.index import PaperIndex
from rag.settings import PROJECT_ROOT, Settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.ingest_bench")
    parser.add_argument("paths", nargs="*", type=Path, default=[PROJECT_ROOT / "corpus"])
    parser.add_argument("--limit", type=int, default=0, help="only the first N papers")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    try:
        settings = Settings(home=home)
        index = PaperIndex(settings)
        model = index.embed_model
        model.get_text_embedding_batch(["warm up the model"] * 8)
        from llama_index.core.schema import MetadataMode

        papers = read_papers(args.paths, root=PROJECT_ROOT).papers
        paths = args.paths
        if args.limit:
            papers = papers[: args.limit]
            subset = home / "subset.jsonl"
            with subset.open("w") as f:
                for p in papers:
                    f.write(json.dumps(p.to_dict() | {"id": p.own_id or None}) + "\n")
            paths = [subset]
        texts = [n.get_content(MetadataMode.EMBED) for p in papers for n in index.nodes_for(p)]
        st = model._model  # type: ignore[attr-defined]  # the SentenceTransformer inside
        t0 = time.perf_counter()
        st.encode(texts, batch_size=settings.embed.batch_size, normalize_embeddings=True)
        floor = time.perf_counter() - t0

        t0 = time.perf_counter()
        first = index.ingest(paths, progress=False)
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = index.ingest(paths, progress=False)
        again_s = time.perf_counter() - t0
        report = {
            "papers": first.total_papers,
            "chunks": len(texts),
            "floor_encode_s": round(floor, 2),
            "ingest_s": round(first_s, 2),
            "ingest_over_floor": round(first_s / floor, 3),
            "reingest_unchanged_s": round(again_s, 2),
            "reingest_over_ingest": round(again_s / first_s, 4),
            "reembedded_on_rerun": again.chunks_embedded,
        }
        print(json.dumps(report))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
