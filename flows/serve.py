"""`python -m flows.serve`: serve the nightly and backfill deployments from this process.

The no-infrastructure way to schedule the pipeline on one machine (no work pool, no worker):
this process registers both deployments with the Prefect server and starts each flow run as a
subprocess, so each run loads the model once. `prefect.yaml` declares the same two deployments
for `prefect deploy` + `prefect worker start` instead.

    nightly   pipeline-daily, cron schedule (default 02:00 UTC), run_date = the scheduled date
    backfill  pipeline-backfill, no schedule: `prefect deployment run pipeline-backfill/backfill ...`
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NIGHTLY_CRON = "0 2 * * *"


def build_deployments(input_root: str, output_dir: str, model_dir: str | None = None, cron: str = NIGHTLY_CRON,
                      timezone: str = "UTC") -> list[Any]:
    """The nightly (scheduled) and backfill (on demand) deployments as `RunnerDeployment`s."""
    # lazy: Prefect loads only when serving
    from prefect.schedules import Cron

    # lazy: Prefect loads only when serving
    from flows.backfill import backfill_flow
    from flows.daily import daily_flow

    common = {"input_root": input_root, "output_dir": output_dir, "model_dir": model_dir}
    nightly = daily_flow.to_deployment(name="nightly", schedule=Cron(cron, timezone=timezone),
                                       parameters={**common, "timezone": timezone}, concurrency_limit=1,
                                       tags=["pipeline", "nightly"],
                                       description="INPUT_ROOT/<scheduled date>/ -> the run_date partition")
    backfill = backfill_flow.to_deployment(name="backfill", parameters=common, concurrency_limit=1,
                                           tags=["pipeline", "backfill"],
                                           description="the daily flow for each date in [start, end]")
    return [nightly, backfill]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__.splitlines()[0])
    p.add_argument("--input-root", required=True, help="folder with one sub-folder per date (YYYY-MM-DD)")
    p.add_argument("--output", default="output", help="output directory")
    p.add_argument("--model", default=None, help="model directory or registered name (default: finextract-smollm2)")
    p.add_argument("--cron", default=NIGHTLY_CRON, help=f"nightly schedule (default '{NIGHTLY_CRON}')")
    p.add_argument("--timezone", default="UTC", help="IANA zone of the schedule and of run_date (default UTC)")
    args = p.parse_args(argv)

    # lazy: Prefect loads only when serving
    from prefect import serve

    def absolute(path: str | None) -> str | None:  # flow runs start in their own processes
        return str(Path(path).resolve()) if path else None

    serve(*build_deployments(absolute(args.input_root), absolute(args.output), absolute(args.model), args.cron,
                             args.timezone))


if __name__ == "__main__":
    main()
