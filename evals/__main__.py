from evals.suite import main

raise SystemExit(main())
