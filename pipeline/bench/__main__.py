"""`python -m pipeline.bench`: the bench command without the rest of the pipeline CLI."""

from pipeline.bench.cli import main

raise SystemExit(main())
