"""Runs one system in its own process: a fresh heap makes its peak memory its own, and a crash costs one row only.

Usage (by the orchestrator): python -m bench.worker JOB.json ROW.json
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import torch

from bench.baselines import run_hf_continuous_batching, run_hf_generate
from bench.config import BenchJob
from bench.engine_runner import LADDER_BY_NAME, run_engine_step
from bench.machine import PeakMemoryTracker
from bench.metrics import summarise
from bench.results import (
    SYSTEM_LABELS,
    SystemResult,
    SystemRun,
    SystemUnavailable,
    empty_row,
    kind_of,
)
from bench.shapes import ModelShape
from bench.workload import Workload, build_workload


def _run_system(job: BenchJob, workload: Workload) -> SystemRun:
    if job.system == "hf_generate_b4":
        return run_hf_generate(job, workload)
    if job.system == "hf_continuous_batching":
        return run_hf_continuous_batching(job, workload)
    if job.system in LADDER_BY_NAME:
        return run_engine_step(job, workload, LADDER_BY_NAME[job.system])
    raise ValueError(f"unknown system {job.system!r}")


def run_job(job: BenchJob) -> tuple[SystemResult, list[list[int]]]:
    """Measure one system; failures become a row with status and reason rather than an exception."""
    torch.set_num_threads(job.threads)
    shape = ModelShape(**job.shape)  # type: ignore[arg-type]
    workload = build_workload(job.workload, shape.vocab_size, frozenset(job.reserved_ids))
    if workload.fingerprint() != job.workload_fingerprint:
        raise RuntimeError("worker rebuilt a different workload than the orchestrator: generation is not deterministic")
    try:
        with PeakMemoryTracker(job.device) as mem:
            run = _run_system(job, workload)
        peak = mem.result()
    except SystemUnavailable as e:
        return empty_row(job.system, e.status, e.reason), []
    except Exception as e:  # noqa: BLE001 - any failure is recorded as this system's result
        tb = traceback.format_exc(limit=6)
        print(tb, file=sys.stderr)
        return empty_row(job.system, "error", f"{type(e).__name__}: {e}"), []
    summary = summarise(run.records, run.wall_s, shape, job.gemm_flops_per_s)
    row = SystemResult(
        name=job.system,
        label=SYSTEM_LABELS.get(job.system, job.system),
        kind=kind_of(job.system),
        status="ok",
        load_s=run.load_s,
        preemptions=run.preemptions,
        peak_rss_bytes=peak.rss_peak_bytes,
        start_rss_bytes=peak.rss_start_bytes,
        rss_method=peak.rss_method,
        peak_device_bytes=peak.device_peak_bytes,
        config=run.config,
        engine_stats=run.engine_stats,
        engine_stats_delta=run.engine_stats_delta,
        per_request={
            "prompt_tokens": [r.prompt_tokens for r in run.records],
            "output_tokens": [r.output_tokens for r in run.records],
            "cached_tokens": [r.cached_tokens for r in run.records],
            "ttft_s": [r.ttft_s for r in run.records],
            "tpot_s": [r.tpot_s for r in run.records],
            "e2e_s": [r.e2e_s for r in run.records],
        },
        notes=run.notes,
        **summary,  # type: ignore[arg-type]
    )
    return row, [r.token_ids for r in run.records]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.worker JOB.json ROW.json", file=sys.stderr)
        return 2
    job = BenchJob.model_validate_json(Path(args[0]).read_text())
    row, token_ids = run_job(job)
    Path(args[1]).write_text(json.dumps({"row": row.model_dump(mode="json"), "token_ids": token_ids}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
