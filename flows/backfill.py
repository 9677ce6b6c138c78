"""Backfill: the daily flow for every date of a range, with bounded concurrency; idempotent.

A date is skipped when its input folder is missing, or when it is already complete: a published
manifest for that partition exists from the same input folder, model, prompt and schema version,
without `limit`, and the folder still holds the same number of files and bytes. `force` runs
every date anyway (re-processing and replacing its rows). Each date runs as a `run-date` task
that calls `daily_flow`, so it appears as its own subflow run.

Concurrency: at most `max_concurrency` dates are in flight (default 1: dates run one after the
other in the flow's own thread). All dates share one output directory and the pipeline allows one
writer per directory: dates of one backfill take turns on a lock owned by the flow run, the daily
flow waits while another process writes, and a date that still loses that race is retried.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.states import State
from prefect.task_runners import ThreadPoolTaskRunner

from flows.daily import daily_flow, day_config
from flows.report import backfill_markdown
from pipeline.config import default_model_dir
from pipeline.identity import RunIdentity
from pipeline.ingest.discover import discover
from pipeline.models import resolve_model
from pipeline.output.manifest import manifest_paths
from pipeline.plan.work import run_identity

MAX_CONCURRENCY = 4  # thread-pool size; `max_concurrency` is bounded by it


class BackfillError(RuntimeError):
    """One or more dates of a backfill failed (the others completed)."""


def date_range(start: dt.date, end: dt.date) -> list[dt.date]:
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]


def is_complete(output_dir: Path, run_date: dt.date, input_dir: Path, identity: RunIdentity) -> bool:
    """Whether a published run already covers this date's current inputs with this model/prompt/schema."""
    inputs, skipped = discover(input_dir, (output_dir,))
    files = inputs + skipped  # the manifest counts skipped files too (each has its error row)
    n_files, n_bytes = len(files), sum(p.stat().st_size for p in files)
    want = {"input_dir": str(input_dir.resolve()), **identity.row_fields(), "limit": None}
    for path in manifest_paths(output_dir):
        if path.parent.name != f"run_date={run_date.isoformat()}":
            continue
        try:
            m = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if all(m.get(k) == v for k, v in want.items()) and m.get("inputs", {}).get("files") == n_files \
                and m.get("inputs", {}).get("bytes") == n_bytes:
            return True
    return False


@task(name="plan-dates", cache_policy=NO_CACHE, persist_result=False)
def plan_dates(input_root: Path, output_dir: Path, dates: list[dt.date], identity: RunIdentity,
               force: bool) -> list[dict[str, Any]]:
    """Per date: `todo`, `complete` (skipped) or `no-input` (skipped)."""
    plan = []
    for day in dates:
        input_dir = input_root / day.isoformat()
        if not input_dir.is_dir():
            status, detail = "no-input", f"{input_dir} not found"
        elif not force and is_complete(output_dir, day, input_dir, identity):
            status, detail = "complete", "already done (--force re-runs it)"
        else:
            status, detail = "todo", ""
        plan.append({"run_date": day.isoformat(), "status": status, "detail": detail})
    return plan


def _writer_busy(_task: Any, _run: Any, state: State) -> bool:
    """Retry a date only when it lost the race for the writer lock (a transient condition)."""
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, RuntimeError) and isinstance(exc.__cause__, BlockingIOError)


@task(name="run-date", retries=3, retry_delay_seconds=[5, 15, 30], retry_condition_fn=_writer_busy,
      cache_policy=NO_CACHE, persist_result=False)
def run_date_task(input_root: str, output_dir: str, run_date: dt.date, model_dir: str | None, force: bool,
                  options: dict[str, Any] | None, writer: threading.Lock) -> dict[str, Any]:
    """One date as a `daily_flow` subflow run, after this backfill's previous date has written."""
    with writer:
        return daily_flow(input_root=input_root, output_dir=output_dir, run_date=run_date, model_dir=model_dir,
                          force=force, options=options)


def _outcome(day: str, state: State) -> dict[str, Any]:
    if state.is_completed():
        return state.result()
    exc = state.result(raise_on_failure=False)
    return {"run_date": day, "status": "failed", "detail": f"{type(exc).__name__}: {exc}"[:300]}


@flow(name="pipeline-backfill", flow_run_name="backfill-{start}-{end}",
      task_runner=ThreadPoolTaskRunner(max_workers=MAX_CONCURRENCY))
def backfill_flow(input_root: str, start: dt.date, end: dt.date, output_dir: str = "output",
                  model_dir: str | None = None, force: bool = False, max_concurrency: int = 1,
                  options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run `daily_flow` for each date in [start, end] not yet complete (all of them with `force`)."""
    if not 1 <= max_concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"max_concurrency must be between 1 and {MAX_CONCURRENCY}, got {max_concurrency}")
    logger = get_run_logger()
    dates = date_range(start, end)
    model = resolve_model(model_dir) if model_dir else default_model_dir()
    # the identity of the daily runs: their own config (model, engine and answer budgets from `options`)
    identity = run_identity(day_config(input_root, output_dir, dates[0], model, force, options))
    plan = plan_dates(Path(input_root), Path(output_dir), dates, identity, force)
    todo = [p["run_date"] for p in plan if p["status"] == "todo"]
    logger.info("%d dates: %d to run, %d complete, %d without input", len(dates), len(todo),
                sum(p["status"] == "complete" for p in plan), sum(p["status"] == "no-input" for p in plan))

    params = {"input_root": input_root, "output_dir": output_dir, "model_dir": model_dir, "force": force,
              "options": options, "writer": threading.Lock()}
    states: dict[str, State] = {}
    if max_concurrency == 1:  # in the flow's thread: keeps ingest's per-file time limit (main thread only)
        for day in todo:
            states[day] = run_date_task.with_options(task_run_name=f"run-{day}")(
                run_date=dt.date.fromisoformat(day), return_state=True, **params)
    else:
        in_flight: list[Any] = []
        futures = []
        for day in todo:
            if len(in_flight) >= max_concurrency:
                in_flight.remove(next(as_completed(in_flight)))
            fut = run_date_task.with_options(task_run_name=f"run-{day}").submit(
                run_date=dt.date.fromisoformat(day), **params)
            in_flight.append(fut)
            futures.append((day, fut))
        for day, fut in futures:
            fut.wait()
            states[day] = fut.state

    results = [_outcome(p["run_date"], states[p["run_date"]]) if p["run_date"] in states else p for p in plan]
    create_markdown_artifact(backfill_markdown(start.isoformat(), end.isoformat(), results), key="pipeline-backfill",
                             description=f"backfill {start} .. {end}")
    failed = [r["run_date"] for r in results if r["status"] == "failed"]
    if failed:
        raise BackfillError(f"{len(failed)} of {len(todo)} dates failed: {', '.join(failed)}")
    return results
