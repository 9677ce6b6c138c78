"""Prefect orchestration of the pipeline: nightly runs, date-range backfills, ad-hoc runs.

    flows.daily.daily_flow        one partition: INPUT_ROOT/<run_date>/ -> OUTPUT/<dataset>/run_date=<run_date>/
    flows.backfill.backfill_flow  the daily flow per date of a range, bounded concurrency, skips complete dates
    flows.tasks                   the pipeline stages as Prefect tasks (retries, run history; no results kept)
    flows.serve                   `python -m flows.serve`: serve both flows with a cron schedule (no work pool)
    flows.cli                     `pipeline backfill` (registered by pipeline.cli)

Flows only orchestrate: the stage functions and their composition live in `pipeline.run`
(`run_pipeline(cfg, stages=...)`); this package decides how each stage runs, never what it does.
Importing `flows` or `flows.cli` does not import Prefect, so `pipeline run` works without it.
"""
