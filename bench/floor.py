"""The machine's floor for one workload: the least wall time any system could take here, from the workload's work
and this run's measured rates. Every rung is reported as a multiple of it, so the bench says how much is left.

Compute: the GEMM FLOPs (projections, MLP, LM head at sampled positions only) at the faster of the int8 and the
dense GEMM peaks plus the attention FLOPs at the dense peak — the engine's default rung runs exactly that split
where int8 is the faster (VNNI CPUs). The dense peak is the faster of the run's dtype and float32 (the runner
measures both), since any system may compute in float32. Memory: decode
must read every weight (one byte each in int8) once per step, and there are at least as many steps as the
longest output; every generated token reads its context's keys and values once (model dtype). The floor is the
larger of the two: a lower bound, since the two can overlap but neither can be skipped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bench.metrics import request_flops_split
from bench.shapes import ModelShape
from bench.workload import Workload

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class Floor:
    gemm_flops: float
    attention_flops: float
    weight_bytes: float
    kv_bytes: float
    int8_ops_per_s: float
    dense_flops_per_s: float
    read_bytes_per_s: float

    @property
    def gemm_ops_per_s(self) -> float:
        """The faster of the two measured GEMM rates: where int8 is slower than float (no VNNI), a float rung's
        GEMMs beat the int8 peak, so charging them at it would be no lower bound."""
        return max(self.int8_ops_per_s, self.dense_flops_per_s)

    @property
    def compute_s(self) -> float:
        return self.gemm_flops / self.gemm_ops_per_s + self.attention_flops / self.dense_flops_per_s

    @property
    def memory_s(self) -> float:
        return (self.weight_bytes + self.kv_bytes) / self.read_bytes_per_s

    @property
    def wall_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "compute_s": self.compute_s, "memory_s": self.memory_s, "wall_s": self.wall_s}


def kv_bytes_per_token(shape: ModelShape, dtype: str) -> int:
    return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * _DTYPE_BYTES[dtype]


def workload_floor(shape: ModelShape, workload: Workload, dtype: str, int8_ops_per_s: float,
                   dense_flops_per_s: float, read_bytes_per_s: float) -> Floor:
    gemm = attention = kv_tokens = 0.0
    for r in workload.requests:
        g, a = request_flops_split(shape, len(r.prompt_token_ids), r.output_len)
        gemm, attention = gemm + g, attention + a
        # decode token i (0-based) of this request attends to prompt + i keys
        p, o = len(r.prompt_token_ids), r.output_len
        kv_tokens += o * p + o * (o - 1) / 2
    steps = max(r.output_len for r in workload.requests)
    return Floor(gemm_flops=gemm, attention_flops=attention, weight_bytes=float(shape.num_params * steps),
                 kv_bytes=kv_tokens * kv_bytes_per_token(shape, dtype), int8_ops_per_s=int8_ops_per_s,
                 dense_flops_per_s=dense_flops_per_s, read_bytes_per_s=read_bytes_per_s)


def describe(floor: dict[str, Any]) -> str:
    """One line for the console and results.md."""
    gemm_rate = max(floor["int8_ops_per_s"], floor["dense_flops_per_s"])
    kind = "int8" if floor["int8_ops_per_s"] >= floor["dense_flops_per_s"] else "dense"
    return (f"floor: {floor['gemm_flops'] / 1e12:.2f} TOP GEMM at the {kind} peak {gemm_rate / 1e9:.0f} GOPS + "
            f"{floor['attention_flops'] / 1e12:.2f} TFLOP attention at {floor['dense_flops_per_s'] / 1e9:.0f} "
            f"GFLOP/s = {floor['compute_s']:.1f} s compute; {(floor['weight_bytes'] + floor['kv_bytes']) / 1e9:.1f}"
            f" GB of decode reads at {floor['read_bytes_per_s'] / 1e9:.0f} GB/s = {floor['memory_s']:.1f} s; "
            f"minimum wall {floor['wall_s']:.1f} s (rates measured in this run)")
