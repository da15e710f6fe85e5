import gc

gc.disable()  # while the modules load; rag.cli.started() turns it back on

from rag.cli import search_main  # noqa: E402

raise SystemExit(search_main())
