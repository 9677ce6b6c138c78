"""Offline batch pipeline: ingest PDFs and transaction logs, build prompts, run the engine, sink to Parquet.

Stages (plain functions, see `pipeline.run`): ingest -> prepare_requests -> infer -> write/publish.
"""

import os as _os
import sys as _sys

if "torch" not in _sys.modules:  # same default as engine.threads, without importing the engine (and torch) here
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
