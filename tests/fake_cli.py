"""`python -m tests.fake_cli rag.search ...`: a real entry-point process on the hashing embedder.

`run_cli` uses it when the environment selects `test-hash`, so process-level behaviour (exit
codes, a crash of the child, output) is tested without the seconds of loading the real model.
"""

import sys

from rag import cli
from tests import fake_embed

fake_embed.register()
MAINS = {"rag.ingest": cli.ingest_main, "rag.search": cli.search_main, "rag.ask": cli.ask_main}

if __name__ == "__main__":
    sys.exit(MAINS[sys.argv[1]](sys.argv[2:]))
