from rag.cli import fetch_main

raise SystemExit(fetch_main())
