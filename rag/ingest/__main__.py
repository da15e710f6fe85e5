from rag.cli import ingest_main

raise SystemExit(ingest_main())
