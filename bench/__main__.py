"""`python -m bench`: the bench command without the rest of the pipeline CLI."""

from bench.cli import main

raise SystemExit(main())
