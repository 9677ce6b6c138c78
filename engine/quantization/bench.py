"""Int8 vs bf16 linear throughput on one model's projection shapes: `python -m engine.quantization.bench`.

The CPU is usually shared, so the two variants run interleaved in one process and every figure is the median
of per-round ratios, not a ratio of separately taken best times.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from engine.quantization.int8_linear import Int8Linear
from kernels import get_kernels
from kernels.reference.int8_gemm import quantize_weight

# smollm2-135m: hidden 576, intermediate 1536, 9 heads / 3 KV heads of 64 -> fused qkv 960, fused gate_up 3072.
SMOLLM2_SHAPES = {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536)}
SMOLLM2_LAYERS = 30


def _time(fn: Callable[[], object], reps: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def bench_shape(n: int, k: int, m: int, rounds: int, device: torch.device) -> dict[str, float]:
    g = torch.Generator().manual_seed(n + k + m)
    w = torch.randn(n, k, generator=g) * 0.05
    wb = w.to(device, torch.bfloat16)
    q, s = (t.to(device) for t in quantize_weight(w))
    x = torch.randn(m, k, generator=g).to(device, torch.bfloat16)
    int8_linear = Int8Linear(q, s, None, get_kernels(device).int8_linear)  # the weight prepared as a model holds it
    reps = max(1, int(2e8 / (m * n * k)))
    bf16, int8 = [], []
    for _ in range(rounds):
        bf16.append(_time(lambda: F.linear(x, wb), reps))
        int8.append(_time(lambda: int8_linear(x), reps))
    ref = F.linear(x.float(), w.to(device))
    err = ((int8_linear(x).float() - ref).norm() / ref.norm()).item()
    return {
        "bf16_us": statistics.median(bf16) * 1e6,
        "int8_us": statistics.median(int8) * 1e6,
        "speedup": statistics.median(a / b for a, b in zip(bf16, int8)),
        "rel_err": err,
    }


def weight_bytes(shapes: dict[str, tuple[int, int]], layers: int) -> dict[str, int]:
    """Decoder projection bytes: bf16 weights vs int8 weights + float32 per-channel scales."""
    params = sum(n * k for n, k in shapes.values()) * layers
    channels = sum(n for n, _ in shapes.values()) * layers
    return {"bf16": 2 * params, "int8": params + 4 * channels}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--rows", default="1,16,64,512,2048", help="comma list of M (tokens per GEMM)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"threads={torch.get_num_threads()} device={device}")
    for m in (int(r) for r in args.rows.split(",")):
        total_bf16 = total_int8 = 0.0
        for name, (n, k) in SMOLLM2_SHAPES.items():
            r = bench_shape(n, k, m, args.rounds, device)
            total_bf16 += r["bf16_us"]
            total_int8 += r["int8_us"]
            print(f"M={m:5d} {name:8s} N={n:5d} K={k:5d}  bf16 {r['bf16_us']:9.0f} us  int8 {r['int8_us']:9.0f} us"
                  f"  speedup {r['speedup']:.2f}x  rel.err {r['rel_err']:.4f}")
        print(f"M={m:5d} one decoder layer: bf16 {total_bf16:.0f} us, int8 {total_int8:.0f} us, "
              f"{total_bf16 / total_int8:.2f}x")
    wb = weight_bytes(SMOLLM2_SHAPES, SMOLLM2_LAYERS)
    print(f"smollm2-135m decoder projection weights: bf16 {wb['bf16'] / 2**20:.1f} MiB, "
          f"int8 {wb['int8'] / 2**20:.1f} MiB ({wb['int8'] / wb['bf16']:.3f}x)")


if __name__ == "__main__":
    main()
