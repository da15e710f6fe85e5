from rag.cli import search_main

raise SystemExit(search_main())
