"""`pipeline backfill`: run the backfill flow from the command line.

Registered by `pipeline.cli` through `register(subparsers)`. Importing this module does not import
Prefect; only invoking the subcommand does, so the rest of the CLI works without it. Without a
configured `PREFECT_API_URL`, Prefect starts a temporary local server for the duration of the call
(the runs then are not kept); point it at a server to keep run history and artifacts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any


def _concurrency(text: str) -> int:
    n = int(text)
    if not 1 <= n <= 4:
        raise argparse.ArgumentTypeError("must be between 1 and 4")
    return n


def register(sub: Any) -> None:
    # lazy: Prefect loads only for the flow commands
    from pipeline.cli import add_run_options
    from pipeline.config import add_engine_group, add_executor_args

    p = sub.add_parser("backfill", help="re-run the daily Prefect flow for every date in a range",
                       description="For each date D in [start, end]: INPUT_ROOT/D/ -> the run_date=D partition of "
                                   "OUTPUT. Dates already complete are skipped unless --force.")
    p.add_argument("--input-root", required=True, help="folder holding one sub-folder per date (YYYY-MM-DD)")
    p.add_argument("--start", required=True, type=dt.date.fromisoformat, help="first date YYYY-MM-DD")
    p.add_argument("--end", required=True, type=dt.date.fromisoformat, help="last date YYYY-MM-DD (inclusive)")
    p.add_argument("--output", default="output", help="output directory (default ./output)")
    p.add_argument("--model", default=None, help="model directory or registered name (default: finextract-smollm2)")
    p.add_argument("--force", action="store_true", help="re-process dates (and units) already done")
    p.add_argument("--max-concurrency", type=_concurrency, default=1, help="dates in flight (1-4, default 1)")
    add_executor_args(p)
    add_run_options(p)
    add_engine_group(p)
    p.set_defaults(func=_cmd_backfill)


def _cmd_backfill(args: argparse.Namespace) -> int:
    if args.end < args.start:
        print(f"pipeline backfill: --end {args.end} is before --start {args.start}", file=sys.stderr)
        return 2
    try:
        # lazy: Prefect loads only for the flow commands
        from flows.backfill import BackfillError, backfill_flow
    except ImportError as exc:
        print(f"pipeline backfill is unavailable: cannot import the Prefect flows ({exc})", file=sys.stderr)
        return 2
    # lazy: Prefect loads only for the flow commands
    from pipeline.cli import run_options
    from pipeline.config import engine_options, executor_options

    try:
        engine = engine_options(args)
        executor = executor_options(args)
        run = run_options(args)
    except ValueError as exc:
        print(f"pipeline backfill: {exc}", file=sys.stderr)
        return 2
    try:
        results = backfill_flow(input_root=args.input_root, start=args.start, end=args.end, output_dir=args.output,
                                model_dir=args.model, force=args.force, max_concurrency=args.max_concurrency,
                                options={**run, **{k: v for k, v in {"engine": engine, "executor": executor}.items()
                                                   if v}})
    except BackfillError as exc:
        print(f"pipeline backfill: {exc} (see the flow runs and the pipeline-backfill artifact)", file=sys.stderr)
        return 1
    _print_results(results)
    return 0


def _print_results(results: list[dict[str, Any]]) -> None:
    # lazy: Prefect loads only for the flow commands
    from rich.console import Console
    from rich.table import Table

    t = Table(title="backfill")
    for col in ("run_date", "status", "documents", "account windows", "transactions", "error rows", "detail"):
        t.add_column(col)
    for r in results:
        out = r.get("outputs") or {}
        t.add_row(r["run_date"], r["status"], *(str(out.get(k, "")) for k in
                                                 ("documents", "account_windows", "transactions", "errors")),
                  r.get("detail", ""))
    Console().print(t)
