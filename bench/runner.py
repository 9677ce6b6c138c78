"""Orchestrates a benchmark run: model, workload, GEMM peak, one worker process per system, ratios, report files."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from bench.config import BenchConfig, BenchJob
from bench.engine_runner import LADDER_BY_NAME
from bench.floor import describe as describe_floor
from bench.floor import workload_floor
from bench.llamacpp import peer_ggufs, run_peer
from bench.machine import (
    machine_info,
    measure_gemm_peak,
    measure_int8_peak,
    measure_read_bandwidth,
    resolve_device,
    usable_cores,
)
from bench.metrics import agreement, request_flops
from bench.results import BASELINES, SCHEMA_VERSION, SystemResult, empty_row
from bench.shapes import reserved_token_ids, resolve_model
from bench.workload import Workload, build_workload

_REPO_ROOT = Path(__file__).resolve().parents[1]
_RATIO_KEYS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _run_worker(job: BenchJob, log_path: Path, timeout_s: float | None = None) -> tuple[SystemResult, list[list[int]]]:
    """Run one system in a child process; its stdout/stderr go to `log_path`. A child still running after
    `timeout_s` is killed and recorded as a 'timeout' row with the limit as its wall time."""
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        job_path, row_path = Path(tmp) / "job.json", Path(tmp) / "row.json"
        job_path.write_text(job.model_dump_json())
        with open(log_path, "w") as log:
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "bench.worker", str(job_path), str(row_path)],
                    stdout=log, stderr=subprocess.STDOUT, env=_worker_env(), cwd=str(_REPO_ROOT), check=False,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired:
                row = empty_row(job.system, "timeout", f"stopped after {timeout_s:.0f} s (--system-timeout) "
                                                        "before finishing the workload")
                return row.model_copy(update={"wall_s": timeout_s}), []
        if proc.returncode != 0 or not row_path.exists():
            tail = log_path.read_text()[-1500:] if log_path.exists() else ""
            row = empty_row(job.system, "error", f"worker exited with code {proc.returncode}; log tail:\n{tail}")
            return row, []
        payload = json.loads(row_path.read_text())
    return SystemResult.model_validate(payload["row"]), payload["token_ids"]


def _compare_key(results: dict[str, Any]) -> dict[str, Any]:
    """What must match for rows of two runs to be comparable."""
    return {
        "fingerprint": results["workload"]["fingerprint"],
        "model": results["model"]["shape"],
        "dtype": results["run"]["dtype"],
        "device": results["run"]["device"],
        "threads": results["machine"]["torch_threads"],
        "cpu_model": results["machine"]["cpu_model"],
    }


def _load_reused(path: Path, current: dict[str, Any]) -> tuple[dict[str, SystemResult], dict[str, list[list[int]]]]:
    """Baseline rows from an earlier results.json of the same workload, model, dtype and machine."""
    old = json.loads(Path(path).read_text())
    mismatched = {k: (v, _compare_key(current)[k]) for k, v in _compare_key(old).items() if v != _compare_key(current)[k]}
    if mismatched:
        detail = "; ".join(f"{k}: earlier {a!r} vs now {b!r}" for k, (a, b) in mismatched.items())
        raise ValueError(f"cannot reuse baselines from {path}: {detail}")
    tokens_file = Path(path).with_name("outputs.json")
    tokens = json.loads(tokens_file.read_text()) if tokens_file.exists() else {}
    rows: dict[str, SystemResult] = {}
    for raw in old["systems"]:
        if raw["name"] in BASELINES and raw["status"] == "ok":
            row = SystemResult.model_validate(raw)
            rows[row.name] = row.model_copy(update={"reused_from": f"{path} ({old.get('created_at', '?')})"})
    return rows, {k: v for k, v in tokens.items() if k in rows}


def _ratios(rows: list[SystemResult], workload: Workload) -> None:
    """Fill each ok row's throughput ratio against each ok baseline and the best peer (`vs_llamacpp`), and lower
    bounds against baselines that were stopped at the time limit (in that time they did less than the whole
    workload, so their rate was lower)."""
    base = {r.name: r for r in rows if r.name in BASELINES and r.status == "ok"}
    peers = [r for r in rows if r.kind == "peer" and r.status == "ok"]
    if peers:
        base["llamacpp"] = max(peers, key=lambda r: r.output_tokens_per_s or 0.0)
    stopped = {r.name: r for r in rows if r.name in BASELINES and r.status == "timeout" and r.wall_s}
    totals = {"output_tokens_per_s": workload.total_output_tokens,
              "total_tokens_per_s": workload.total_output_tokens + workload.total_prompt_tokens,
              "requests_per_s": len(workload.requests)}
    for row in rows:
        if row.status != "ok":
            continue
        row.ratios = {
            f"vs_{b}": {k: getattr(row, k) / getattr(brow, k) for k in _RATIO_KEYS if getattr(brow, k)}
            for b, brow in base.items() if brow.name != row.name and row.kind != "peer"
        }
        row.ratios_at_least = {
            f"vs_{b}": {k: getattr(row, k) / (totals[k] / brow.wall_s) for k in _RATIO_KEYS if getattr(row, k)}
            for b, brow in stopped.items()
        }


def speculation_summary(delta: dict[str, Any], wall_s: float, output_tokens: int, base_delta: dict[str, Any],
                        base_wall_s: float, base_output_tokens: int) -> dict[str, Any]:
    """Acceptance and savings of a speculative run against a run without speculation (shared with the
    extraction workload)."""
    drafted, accepted = delta.get("spec_draft_tokens", 0), delta.get("spec_accepted_tokens", 0)
    verify = delta.get("spec_verify_steps", 0)
    steps, base_steps = delta.get("steps", 0), base_delta.get("steps", 0)
    rate, base_rate = output_tokens / wall_s if wall_s else 0.0, base_output_tokens / base_wall_s if base_wall_s else 0.0
    return {
        "draft_tokens": drafted, "accepted_tokens": accepted, "forced_tokens": delta.get("spec_forced_tokens", 0),
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "mean_accepted_length": accepted / verify if verify else 0.0,
        "steps": steps, "baseline_steps": base_steps,
        "steps_saved_share": 1 - steps / base_steps if base_steps else 0.0,
        "throughput_ratio": rate / base_rate if base_rate else None,
    }


def _speculative_rows(rows: list[SystemResult], tokens: dict[str, list[list[int]]], base_rung: str) -> None:
    """The speculative rung against the fastest rung without it (throughput, steps) and against the rung it
    builds on (identical tokens)."""
    spec = next((r for r in rows if r.name == "engine_speculative" and r.status == "ok"), None)
    others = [r for r in rows if r.kind == "ladder" and r.status == "ok" and r.name != "engine_speculative"]
    if spec is None or not others:
        return
    best = max(others, key=lambda r: r.output_tokens_per_s or 0.0)
    summary = speculation_summary(spec.engine_stats_delta or {}, spec.wall_s or 0.0, spec.output_tokens or 0,
                                  best.engine_stats_delta or {}, best.wall_s or 0.0, best.output_tokens or 0)
    summary["baseline"] = best.name
    same = next((r for r in others if r.name == base_rung), None)
    if same is not None and same.name in tokens and spec.name in tokens:
        pairs = list(zip(tokens[spec.name], tokens[same.name]))
        summary["identical_outputs_vs"] = same.name
        summary["identical_outputs_share"] = sum(a == b for a, b in pairs) / len(pairs) if pairs else None
    spec.speculative = summary


def _headline(rows: list[SystemResult]) -> dict[str, Any]:
    ladder = [r for r in rows if r.kind == "ladder" and r.status == "ok"]
    if not ladder:
        return {"best_engine_step": None}
    best = max(ladder, key=lambda r: r.output_tokens_per_s or 0.0)
    return {
        "best_engine_step": best.name,
        "best_engine_label": best.label,
        "output_tokens_per_s": best.output_tokens_per_s,
        "total_tokens_per_s": best.total_tokens_per_s,
        "mfu": best.mfu,
        "floor_ratio": best.floor_ratio,
        **{f"ratio_{k}": v for k, v in best.ratios.items()},
        **{f"ratio_at_least_{k}": v for k, v in best.ratios_at_least.items()},
    }


def _model_gguf(model: str) -> Path | None:
    from pipeline.models import resolve_model as resolve_real  # noqa: PLC0415

    try:
        path = resolve_real(model)
    except FileNotFoundError:
        return None
    return path if path.is_file() and path.suffix == ".gguf" else None


def _run_llamacpp(cfg: BenchConfig, workload: Workload, threads: int, out_dir: Path,
                  console: Console) -> list[SystemResult]:
    """One row per GGUF file (Q8_0 and BF16 of the benchmarked model unless given), each at its best setting."""
    opts = cfg.llamacpp
    ggufs = peer_ggufs(_model_gguf(cfg.model), opts.ggufs, out_dir / "llamacpp-gguf", opts.bin_dir)
    if isinstance(ggufs, str):
        console.print(f"llamacpp: not available ({ggufs})")
        return [empty_row("llamacpp", "not_available", ggufs)]
    rows = []
    for gguf in ggufs:
        t0 = time.perf_counter()
        with console.status(f"running llama.cpp on {gguf.name}"):
            row = run_peer(gguf, workload, threads, opts.parallel, opts.bin_dir,
                           out_dir / "logs" / f"llamacpp-{gguf.stem}.log", cfg.system_timeout_s)
        console.print(f"{row.name}: {row.status} in {time.perf_counter() - t0:.1f}s"
                      + (f" ({row.output_tokens_per_s:.1f} out tok/s)" if row.status == "ok" else f" ({row.reason})"))
        rows.append(row)
    return rows


def run_bench(
    cfg: BenchConfig, console: Console | None = None, argv: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, list[list[int]]]]:
    """Run every requested system on one workload: the results document and each system's output token ids."""
    console = console or Console(stderr=True)
    threads = cfg.threads or usable_cores()
    torch.set_num_threads(threads)
    device = resolve_device(cfg.device)
    t_start = time.perf_counter()

    with console.status(f"preparing model {cfg.model}"):
        model_dir, shape, random_weights = resolve_model(cfg.model, cfg.cache_dir, cfg.weights_seed, cfg.dtype)
    reserved = reserved_token_ids(model_dir)
    workload: Workload = build_workload(cfg.workload, shape.vocab_size, reserved)
    if cfg.workload.max_seq_len > shape.max_position_embeddings:
        raise ValueError(f"workload sequences reach {cfg.workload.max_seq_len} tokens but the model supports "
                         f"{shape.max_position_embeddings}")
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(argv) if argv else None,
        "preset": cfg.preset,
        "run": {"dtype": cfg.dtype, "device": device, "threads": threads, "warmup": cfg.warmup,
                "engine_options": cfg.engine.model_dump(), "hf_options": cfg.hf.model_dump(),
                "systems": list(cfg.systems)},
        "machine": machine_info(device, threads),
        "model": {"name": cfg.model, "dir": str(model_dir), "random_weights": random_weights, "shape": shape.to_dict(),
                  "num_params": shape.num_params},
        "workload": workload.summary(),
        "mfu_definition": "model FLOPs of the workload (each token once through the stack, causal attention, logits "
                          "only at sampled positions; no credit or charge for caching, padding or recompute) / wall "
                          "time / the dense GEMM peak of the run's dtype (gemm_peak)",
    }
    results["workload"]["model_flops"] = sum(
        request_flops(shape, len(r.prompt_token_ids), r.output_len) for r in workload.requests
    )

    reused: dict[str, SystemResult] = {}
    tokens: dict[str, list[list[int]]] = {}
    if cfg.reuse_baselines is not None:
        reused, tokens = _load_reused(cfg.reuse_baselines, results)
        console.print(f"reusing baseline rows {sorted(reused)} from {cfg.reuse_baselines}")
    # The MFU denominator is the dense GEMM rate in the run's own dtype (a float32 run against a bf16 peak would
    # be meaningless where bf16 has no hardware path, ~1 GFLOP/s on an AVX2-only CPU).
    with console.status(f"measuring dense {cfg.dtype} GEMM peak"):
        gemm = measure_gemm_peak(device, getattr(torch, cfg.dtype))
    results["gemm_peak"] = gemm
    for name, row in reused.items():  # one MFU denominator for every row of this run
        if row.achieved_flops_per_s is not None:
            reused[name] = row.model_copy(update={"mfu": row.achieved_flops_per_s / gemm["flops_per_s"]})
    console.print(f"{gemm['dtype']} GEMM peak: {gemm['flops_per_s'] / 1e9:.0f} GFLOP/s ({gemm['m']}^3, best of {gemm['reps']})")

    with console.status("measuring the int8 GEMM peak and memory bandwidth (floor model)"):
        int8 = measure_int8_peak(device)
        bandwidth = measure_read_bandwidth(device)
        # Any system may compute in float32; where the run's dtype has no fast path (bf16 on AVX2-only CPUs runs at
        # ~1 GFLOP/s), float32 is the machine's dense rate and the floor must use it to stay a lower bound.
        f32 = gemm if cfg.dtype == "float32" else measure_gemm_peak(device, torch.float32)
    dense = max(gemm["flops_per_s"], f32["flops_per_s"])
    floor = workload_floor(shape, workload, cfg.dtype, int8["flops_per_s"], dense, bandwidth["bytes_per_s"])
    results["floor"] = {**floor.to_dict(), "int8_gemm_peak": int8, "read_bandwidth": bandwidth,
                        "float32_gemm_peak": f32}
    console.print(describe_floor(results["floor"]))

    out_dir = Path(cfg.out_dir)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    rows: list[SystemResult] = []
    for system in cfg.systems:
        if system == "llamacpp":
            rows += _run_llamacpp(cfg, workload, threads, out_dir, console)
            continue
        if system in reused:
            rows.append(reused[system])
            continue
        step = LADDER_BY_NAME.get(system)
        if step is not None and step.llm_kwargs is None:
            rows.append(empty_row(system, "not_available", step.unavailable_reason))
            continue
        job = BenchJob(
            system=system, model_dir=model_dir, shape=shape.to_dict(), dtype=cfg.dtype, device=device,
            threads=threads, workload=cfg.workload, workload_fingerprint=workload.fingerprint(),
            reserved_ids=sorted(reserved), engine=cfg.engine, hf=cfg.hf, warmup=cfg.warmup,
            gemm_flops_per_s=gemm["flops_per_s"],
        )
        t0 = time.perf_counter()
        with console.status(f"running {system}"):
            row, toks = _run_worker(job, out_dir / "logs" / f"{system}.log", cfg.system_timeout_s)
        rows.append(row)
        if toks:
            tokens[system] = toks
        detail = f"{row.output_tokens_per_s:.1f} out tok/s" if row.status == "ok" else (row.reason or "").splitlines()[0]
        console.print(f"{system}: {row.status} in {time.perf_counter() - t0:.1f}s ({detail})")

    ref = tokens.get("hf_generate_b4")
    for row in rows:
        if ref and row.name != "hf_generate_b4" and row.name in tokens:
            row.agreement_vs_hf_generate_b4 = agreement(ref, tokens[row.name])
    _ratios(rows, workload)
    for row in rows:
        if row.status == "ok" and row.wall_s:
            row.floor_ratio = row.wall_s / floor.wall_s
    _speculative_rows(rows, tokens, cfg.engine.speculative_base)
    results["systems"] = [r.model_dump(mode="json") for r in rows]
    results["headline"] = _headline(rows)
    results["total_bench_s"] = time.perf_counter() - t_start
    return results, tokens
