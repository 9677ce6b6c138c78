"""Offline batch pipeline: ingest PDFs and transaction logs, build prompts, run the engine, sink to Parquet.

Stages (plain functions, see `pipeline.run`): ingest -> prepare_requests -> infer -> write/publish.
"""

# Importing the engine first lets it set its CPU runtime defaults (OpenMP waiting) before anything loads torch.
import engine  # noqa: E402,F401

__version__ = "0.1.0"
