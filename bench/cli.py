"""`pipeline bench`: argument parsing only; the work is in runner.py and report.py."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.config import (
    QUICK_MODEL,
    QUICK_WORKLOAD,
    BenchConfig,
    EngineOptions,
    HFOptions,
    LlamaCppOptions,
    WorkloadSpec,
    expand_systems,
)
from bench.shapes import SHAPES
from engine import add_engine_args, engine_overrides

_WORKLOAD_FLAGS = {  # CLI dest -> WorkloadSpec field
    "num_requests": "num_requests", "seed": "seed", "prefix_len": "prefix_len", "body_median": "body_median",
    "body_sigma": "body_sigma", "body_min": "body_min", "body_max": "body_max", "output_min": "output_min",
    "output_max": "output_max",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", choices=("standard", "extraction", "real"), default="standard",
                   help="standard (GUIDE §3, every system and rung), extraction: the eval set's grounded "
                        "extraction requests on a real model, without and with speculative decoding, or real: "
                        "`pipeline run` end to end on folders of documents (documents/hour, fields right, time split)")
    r = p.add_argument_group("real workload")
    r.add_argument("--input", action="append", type=Path, default=None, metavar="DIR",
                   help="a folder of documents, gold JSON beside a PDF scored (repeatable; default data/samples)")
    r.add_argument("--run-config", action="append", default=None, metavar="LABEL=ARGS",
                   help="a configuration: a label and the `pipeline run` arguments it adds (repeatable; default "
                        "one run with the defaults); the first is the baseline of the ratios")
    r.add_argument("--peer-llamacpp", default=None, metavar="P,P,...",
                   help="also run it with llama.cpp's server as the engine (same prompts, same JSON schemas), with P "
                        "slots each, on the --llamacpp-gguf files or the default model converted to Q8_0 and BF16 "
                        "(needs bash scripts/build_llamacpp.sh)")
    r.add_argument("--peer-hf", action="store_true",
                   help="also run it with HF transformers generate in batches of 4 as the engine (the naive baseline; "
                        "same prompts, the same JSON schemas through the engine's grammar), in --dtype")
    x = p.add_argument_group("extraction workload")
    x.add_argument("--speculative", action="append", default=None, metavar="ngram|draft_model:PATH|JSON",
                   help="speculative configurations to compare with the engine default (repeatable; default ngram)")
    x.add_argument("--num-speculative-tokens", type=int, default=None, metavar="K")
    x.add_argument("--eval-dir", default=None, help="synthetic gold set (default data/eval)")
    x.add_argument("--gold", default=None, metavar="DIR", help="a real gold set instead (e.g. the shared invoices)")
    x.add_argument("--limit", type=int, default=None, help="first N documents and N windows of the gold set")
    x.add_argument("--repeat", type=int, default=2, help="runs of each configuration, alternating (fastest counts)")
    p.add_argument("--quick", action="store_true",
                   help=f"CI smoke preset: shape {QUICK_MODEL}, {QUICK_WORKLOAD.num_requests} short requests")
    p.add_argument("--model", default=None,
                   help=f"shape with random weights ({', '.join(SHAPES)}; default smollm2-135m) or a HF checkpoint dir; "
                        "with --workload extraction a model directory, .gguf file or registered name (default: "
                        "as `pipeline run`)")
    p.add_argument("--systems", default="all",
                   help="comma list of systems or groups: all, hf, peers, engine, hf_generate_b4, "
                        "hf_continuous_batching, llamacpp, "
                        "engine_paged, engine_prefix_cache, engine_int8, engine_compiled, engine_kv_int8, engine_speculative")
    p.add_argument("--out", type=Path, default=Path("bench-out"), help="output directory (default bench-out)")
    p.add_argument("--reuse-baselines", type=Path, default=None, metavar="RESULTS_JSON",
                   help="reuse the HF rows of an earlier results.json of the same workload instead of re-running them")
    p.add_argument("--system-timeout", type=float, default=None, metavar="SECONDS",
                   help="stop any system still running after this long; ratios against it become lower bounds")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float32", "float16"), default="auto",
                   help="auto (default): as the engine, bfloat16 on CUDA and on CPUs with bf16 instructions, float32 "
                        "on the others (a bf16 GEMM without them runs at a few GFLOP/s)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: cores this process may use)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="measure cold starts too")
    p.add_argument("--cache-dir", type=Path, default=None, help="where random-weight shapes are built")
    p.add_argument("--weights-seed", type=int, default=0)
    g = p.add_argument_group("workload (defaults: shared GUIDE §3, or the --quick preset)")
    g.add_argument("--num-requests", type=int)
    g.add_argument("--seed", type=int)
    g.add_argument("--prefix-len", type=int)
    g.add_argument("--body-median", type=float)
    g.add_argument("--body-sigma", type=float)
    g.add_argument("--body-min", type=int)
    g.add_argument("--body-max", type=int)
    g.add_argument("--output-min", type=int)
    g.add_argument("--output-max", type=int)
    e = p.add_argument_group("engine")
    add_engine_args(e, ("max_num_seqs", "max_num_batched_tokens", "kv_cache_memory", "block_size"))
    e.add_argument("--speculative-on", default=EngineOptions().speculative_base, metavar="RUNG",
                   help="the rung the speculative rung builds on (default engine_kv_int8)")
    h = p.add_argument_group("HF baselines")
    h.add_argument("--hf-batch-size", type=int, default=HFOptions().batch_size)
    h.add_argument("--hf-attn", default=HFOptions().attn_implementation, help="attention backend for HF generate")
    h.add_argument("--hf-cb-page-size", type=int, default=HFOptions().cb_page_size)
    lc = p.add_argument_group("llama.cpp peer (needs bash scripts/build_llamacpp.sh and a uniform workload)")
    lc.add_argument("--llamacpp-bin", type=Path, default=None, metavar="DIR",
                    help="directory of llama-batched-bench and llama-quantize (default .llamacpp/bin, then PATH)")
    lc.add_argument("--llamacpp-gguf", type=Path, action="append", default=None, metavar="FILE",
                    help="GGUF files to run (repeatable; default: the --model GGUF converted to Q8_0 and BF16)")
    lc.add_argument("--llamacpp-parallel", default="16,32,64", metavar="P,P,...",
                    help="sequences at a time to try; each file's best counts (default 16,32,64)")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    base = QUICK_WORKLOAD if args.quick else WorkloadSpec()
    overrides = {field: getattr(args, dest) for dest, field in _WORKLOAD_FLAGS.items() if getattr(args, dest) is not None}
    workload = WorkloadSpec(**{**base.model_dump(), **overrides})
    model = args.model or (QUICK_MODEL if args.quick else "smollm2-135m")
    hf = HFOptions(batch_size=args.hf_batch_size, attn_implementation=args.hf_attn, cb_page_size=args.hf_cb_page_size)
    engine = EngineOptions(**engine_overrides(args, ("max_num_seqs", "max_num_batched_tokens", "kv_cache_memory",
                                                     "block_size")), speculative_base=args.speculative_on)
    llamacpp = LlamaCppOptions(bin_dir=args.llamacpp_bin, ggufs=tuple(args.llamacpp_gguf or ()),
                               parallel=tuple(int(x) for x in args.llamacpp_parallel.split(",") if x.strip()))
    # The standard workload is defined in bfloat16 and float32: which one a machine runs is the dtype rule's choice.
    standard = (not args.quick and not overrides and model == "smollm2-135m" and args.dtype != "float16"
                and hf == HFOptions() and engine == EngineOptions())
    return BenchConfig(
        model=model, dtype=args.dtype, device=args.device, threads=args.threads, workload=workload, engine=engine,
        hf=hf, llamacpp=llamacpp, systems=expand_systems(args.systems), warmup=args.warmup, weights_seed=args.weights_seed,
        cache_dir=args.cache_dir, out_dir=args.out, reuse_baselines=args.reuse_baselines,
        system_timeout_s=args.system_timeout,
        preset="quick" if args.quick and not overrides else ("standard" if standard else "custom"),
    )


def _invocation() -> list[str]:
    prog = Path(sys.argv[0]).name
    head = ["python", "-m", "bench"] if prog == "__main__.py" else [prog]
    return head + sys.argv[1:]


def run_command(args: argparse.Namespace) -> int:
    """Entry point for the parsed `bench` command. Exit status 1 when any system errored."""
    # lazy: the bench's modules load when it runs: `pipeline --help` stays fast
    from bench.report import render_table, write_outputs
    from bench.runner import run_bench

    console = Console(stderr=True)
    if args.workload == "extraction":
        return _run_extraction(args, console)
    if args.workload == "real":
        return _run_real(args, console)
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        console.print(f"[red]bad arguments:[/red] {e}")
        return 2
    try:
        results, tokens = run_bench(cfg, console, argv=[shlex.join(_invocation())])
    except (ValueError, FileNotFoundError) as e:  # bad model dir, incompatible --reuse-baselines, too-long workload
        console.print(f"[red]cannot run the benchmark:[/red] {e}")
        return 2
    paths = write_outputs(results, tokens, cfg.out_dir)
    render_table(results, Console(width=None if sys.stdout.isatty() else 220))
    console.print("wrote " + ", ".join(str(p) for p in paths.values()))
    errors = [r["name"] for r in results["systems"] if r["status"] == "error"]
    if errors:
        console.print(f"[red]systems with errors:[/red] {', '.join(errors)} (see {cfg.out_dir / 'logs'})")
        return 1
    return 0


def _run_extraction(args: argparse.Namespace, console: Console) -> int:
    # lazy: the bench's modules load when it runs: `pipeline --help` stays fast
    from bench.extraction import render_extraction, run_extraction_bench
    from pipeline.config import speculative_config

    try:
        specs = [speculative_config(v, args.num_speculative_tokens) for v in (args.speculative or ["ngram"])]
        results = run_extraction_bench(args.model, [s for s in specs if s], args.out, limit=args.limit,
                                       eval_dir=args.eval_dir, gold_dir=args.gold, repeat=args.repeat)
    except (ValueError, FileNotFoundError) as e:
        console.print(f"[red]cannot run the extraction benchmark:[/red] {e}")
        return 2
    render_extraction(results, Console(width=None if sys.stdout.isatty() else 220))
    console.print(f"wrote {args.out / 'extraction.json'}")
    return 0


def _run_real(args: argparse.Namespace, console: Console) -> int:
    # lazy: the bench's modules load when it runs: `pipeline --help` stays fast
    from bench.real import render_real, run_real_bench
    from bench.real_chart import write_real_chart

    configs: dict[str, list[str]] = {}
    for spec in args.run_config or ["default="]:
        label, sep, rest = spec.partition("=")
        if not sep or not label.strip():
            console.print(f"[red]bad arguments:[/red] --run-config {spec!r} is not LABEL=ARGS")
            return 2
        configs[label.strip()] = shlex.split(rest)
    try:
        peers = _real_peers(args) if args.peer_llamacpp else {}
        if args.peer_hf:
            # lazy: as above
            from bench.config import default_dtype
            from bench.real import HFPeer

            dtype = default_dtype("cpu") if args.dtype == "auto" else args.dtype
            peers["hf generate b4"] = HFPeer(dtype, args.out / "hf-peer")
        results = run_real_bench(args.input or [Path("data/samples")], args.out, configs, repeat=args.repeat,
                                 timeout_s=args.system_timeout, peers=peers)
    except (FileNotFoundError, FileExistsError) as e:
        console.print(f"[red]cannot run the real workload:[/red] {e}")
        return 2
    render_real(results, Console(width=None if sys.stdout.isatty() else 220))
    chart = write_real_chart(results, args.out)
    console.print(f"wrote {args.out / 'real.json'}" + (f", {chart}" if chart else ""))
    return 0 if all(r["exit_status"] == 0 for r in results["runs"]) else 1


def _real_peers(args: argparse.Namespace) -> dict[str, Any]:
    """llama-server configurations for the real workload: each GGUF (given, or the default model the runs use,
    converted once under --out) at each slot count, every slot the context the engine gives a request."""
    # lazy: the bench's modules load when it runs: `pipeline --help` stays fast
    from bench.llamacpp import DEFAULT_BIN_DIR, find_tool, peer_ggufs
    from bench.llamacpp_server import SERVER, merged_gguf
    from bench.real import PeerServer
    from engine.models.checkpoint import open_checkpoint
    from engine.registry import model_parts
    from pipeline.config import default_model_dir

    server = find_tool(SERVER, args.llamacpp_bin)
    if server is None:
        raise FileNotFoundError(f"{SERVER} not found (bash scripts/build_llamacpp.sh)")
    model = default_model_dir()
    ctx = open_checkpoint(model_parts(model)[0]).config.max_position_embeddings
    ggufs: list[Path] | str = list(args.llamacpp_gguf or ())
    if not ggufs:  # the model the runs use, merged and converted, then quantized as the standard peer's files are
        gguf_dir = args.out / "peer-gguf"
        f32 = merged_gguf(model, gguf_dir, args.llamacpp_bin or DEFAULT_BIN_DIR)
        ggufs = peer_ggufs(f32, (), gguf_dir, args.llamacpp_bin)
    if isinstance(ggufs, str):
        raise FileNotFoundError(ggufs)
    threads = args.threads or len(os.sched_getaffinity(0))
    return {f"llama.cpp server {Path(g).stem} -np {n}": PeerServer(Path(server), Path(g), n, ctx, threads)
            for g in ggufs for n in (int(x) for x in args.peer_llamacpp.split(",") if x.strip())}


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `bench` subcommand to the `pipeline` CLI; the parsed args carry `func` returning an exit status."""
    p = subparsers.add_parser(
        "bench", help="benchmark the engine against HF baselines on the standard workload",
        description="Standard workload (GUIDE §3): HF generate batch 4, HF continuous batching and the engine's "
                    "optimisation ladder, with TTFT/TPOT/e2e percentiles, throughput, memory and MFU.",
    )
    add_arguments(p)
    p.set_defaults(func=run_command)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="pipeline bench (standalone)")
    add_arguments(parser)
    return run_command(parser.parse_args(argv))
