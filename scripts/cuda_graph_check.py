"""On a GPU: the engine with decode CUDA graphs against the same engine run eagerly (part of scripts/gpu_check.sh).

Greedy tokens must be equal; prints the graph steps taken, the buckets captured, the wall time of both runs and
the decode step time against the weight-read floor (weights once per step at the measured read bandwidth).

    python scripts/cuda_graph_check.py --model DIR [--prompts 64] [--output 128] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from engine import LLM, SamplingParams


def _run(model: str, prompts: list[list[int]], params: SamplingParams, dtype: str, graphs: bool) -> dict:
    llm = LLM(model, dtype=dtype, device="cuda", cuda_graphs=graphs)
    llm.generate(prompts[:2], SamplingParams(max_tokens=4), progress=False)  # JIT-compile the kernels first
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, progress=False)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    weight_bytes = sum(p.numel() * p.element_size() for p in llm.model.parameters())
    return {"tokens": [o.outputs[0].token_ids for o in outs], "wall_s": wall, "stats": llm.stats(),
            "config": llm.config_summary(), "weight_bytes": weight_bytes,
            "captured": llm._core.runner.graphs.captured if llm._core.runner.graphs else []}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    rng = random.Random(0)
    prompts = [[rng.randrange(100, 20000) for _ in range(args.prompt_len)] for _ in range(args.prompts)]
    params = SamplingParams(max_tokens=args.output, min_tokens=args.output, ignore_eos=True)
    eager = _run(args.model, prompts, params, args.dtype, graphs=False)
    graph = _run(args.model, prompts, params, args.dtype, graphs=True)
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        x.sum(dtype=torch.int64)
    torch.cuda.synchronize()
    bandwidth = 10 * x.numel() / (time.perf_counter() - t0)
    floor_step = graph["weight_bytes"] / bandwidth
    report = {
        "tokens_equal": eager["tokens"] == graph["tokens"],
        "eager_wall_s": eager["wall_s"], "graph_wall_s": graph["wall_s"],
        "graph_steps": graph["stats"]["graph_steps"], "steps": graph["stats"]["steps"],
        "captured_buckets": graph["captured"],
        "read_bandwidth_gb_s": bandwidth / 1e9,
        "decode_step_floor_ms (weights once per step)": floor_step * 1e3,
        "mean_step_ms (graph run)": graph["wall_s"] / graph["stats"]["steps"] * 1e3,
        "mean_step_ms (eager run)": eager["wall_s"] / eager["stats"]["steps"] * 1e3,
        "cuda_graphs": graph["config"]["cuda_graphs"], "kernels": graph["config"]["kernels"],
    }
    print(json.dumps(report, indent=2))
    if not report["tokens_equal"]:
        raise SystemExit("graph and eager tokens differ")


if __name__ == "__main__":
    main()
