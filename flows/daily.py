"""The daily flow: `INPUT_ROOT/<run_date>/` -> the `run_date` partition of every output dataset.

Scheduled nightly by a deployment (`prefect.yaml` or `python -m flows.serve`); `run_date`
defaults to the run's scheduled date in `timezone` (for an ad-hoc run: today). Each pipeline
stage runs as a Prefect task (see `flows.tasks`); the composition is `pipeline.run.run_pipeline`,
so a flow run and `pipeline run` write exactly the same rows. A markdown artifact
`pipeline-run-<run_date>` summarises counts, errors, throughput and the partition location.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from flows.report import run_markdown
from flows.tasks import prefect_stages
from pipeline.config import RunConfig
from pipeline.output.datasets import DATASETS
from pipeline.output.sink import output_lock
from pipeline.run import RunSummary, run_pipeline

RESERVED_OPTIONS = frozenset({"input_dir", "output_dir", "run_date", "model_dir", "force"})
WRITER_POLL_S = 2.0


class ReconciliationError(RuntimeError):
    """A run published rows whose accounting does not balance (see its manifest)."""


def partition_date(when: dt.datetime, timezone: str = "UTC") -> dt.date:
    """The calendar date of `when` in `timezone` (a 00:30 Berlin run is that Berlin day)."""
    return when.astimezone(ZoneInfo(timezone)).date()


def scheduled_date(timezone: str = "UTC") -> dt.date:
    """The current flow run's scheduled date (now, for an ad-hoc run outside a deployment)."""
    # lazy: Prefect is optional: `pipeline run` works without it
    from prefect.runtime import flow_run

    return partition_date(flow_run.scheduled_start_time, timezone)


def day_config(input_root: str | Path, output_dir: str | Path, run_date: dt.date, model_dir: str | Path | None = None,
               force: bool = False, options: dict[str, Any] | None = None) -> RunConfig:
    """The RunConfig of one date. `options` sets any other RunConfig field (e.g. `engine`,
    `bucket_size`, `max_tokens_document`) and is validated like CLI input."""
    options = dict(options or {})
    clash = RESERVED_OPTIONS & options.keys()
    if clash:
        raise ValueError(f"options may not set {sorted(clash)}: they are flow parameters")
    fields: dict[str, Any] = {"progress": False, **options, "input_dir": Path(input_root) / run_date.isoformat(),
                              "output_dir": Path(output_dir), "run_date": run_date, "force": force}
    if model_dir is not None:
        fields["model_dir"] = Path(model_dir)
    return RunConfig(**fields)


def wait_for_writer(output_dir: Path, logger: Any = None) -> None:
    """Block while another run (a backfill, a `pipeline run`) writes to `output_dir`: the pipeline
    allows one writer per output directory and would otherwise fail this run."""
    waited = False
    while True:
        try:
            with output_lock(output_dir):
                return
        except RuntimeError:
            if not waited and logger is not None:
                logger.info("another run is writing to %s; waiting for it", output_dir)
            waited = True
            time.sleep(WRITER_POLL_S)


def day_result(summary: RunSummary) -> dict[str, Any]:
    """The small, JSON-able outcome of one date (the flow's return value)."""
    m = summary.manifest
    day = m["run_date"]
    return {"run_date": day, "status": "ran", "run_key": summary.run_key, "input_dir": m["input_dir"],
            "partitions": {ds: str(summary.output_dir / ds / f"run_date={day}") for ds in DATASETS},
            "outputs": m["outputs"], "errors_by_class": m["errors_by_class"],
            "balanced": m["reconciliation"]["balanced"], "forced": m["force"]}


def _run_name() -> str:
    # lazy: Prefect is optional: `pipeline run` works without it
    from prefect.runtime import flow_run

    params = flow_run.parameters
    day = params.get("run_date") or scheduled_date(params.get("timezone") or "UTC")
    return f"daily-{day}"


@flow(name="pipeline-daily", flow_run_name=_run_name)
def daily_flow(input_root: str, output_dir: str = "output", run_date: dt.date | None = None,
               model_dir: str | None = None, force: bool = False, timezone: str = "UTC",
               options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Process `input_root/<run_date>/` into the `run_date` partition under `output_dir`.

    Re-running a date is idempotent (done units are skipped); `force` re-processes every unit
    of the date and replaces its rows. `model_dir` defaults to finextract-smollm2. Waits
    while another run writes to the same output directory."""
    day = run_date or scheduled_date(timezone)
    cfg = day_config(input_root, output_dir, day, model_dir, force, options)
    logger = get_run_logger()
    logger.info("run_date=%s input=%s output=%s model=%s force=%s", day, cfg.input_dir, cfg.output_dir,
                cfg.model_dir, force)
    wait_for_writer(cfg.output_dir, logger)
    summary = run_pipeline(cfg, stages=prefect_stages())
    create_markdown_artifact(run_markdown(summary.manifest), key=f"pipeline-run-{day}",
                             description=f"pipeline run {day}: counts, errors, throughput, partition")
    result = day_result(summary)
    if not result["balanced"]:
        raise ReconciliationError(f"run {summary.run_key} for {day} does not reconcile; see its manifest")
    return result
