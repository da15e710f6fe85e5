from rag.cli import ask_main

raise SystemExit(ask_main())
