"""Offline batch pipeline: ingest PDFs and transaction logs, build prompts, run the engine, sink to Parquet.

Stages (plain functions, see `pipeline.run`): ingest -> prepare_requests -> infer -> write/publish.
"""

__version__ = "0.1.0"
