"""Percentiles, per-system summaries and model FLOPs: the arithmetic behind every number in the report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.shapes import ModelShape


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty sample."""
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q={q} outside [0, 100]")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_stats_ms(values_s: Sequence[float]) -> dict[str, float] | None:
    """P50/P95/P99/mean/max in milliseconds; None when no request produced the measure."""
    vals = [v for v in values_s if v is not None and math.isfinite(v)]
    if not vals:
        return None
    out = {f"p{q}": percentile(vals, q) * 1e3 for q in (50, 95, 99)}
    out["mean"] = sum(vals) / len(vals) * 1e3
    out["max"] = max(vals) * 1e3
    return out


@dataclass
class RequestRecord:
    """Per-request measurements, seconds from the moment all requests were submitted (t = 0)."""

    index: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float | None
    e2e_s: float | None
    tpot_s: float | None = None
    cached_tokens: int | None = None  # None: the system does not report prefix-cache hits
    token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # TPOT is (finish - first token) / (output tokens - 1) unless the system reported its own.
        if self.tpot_s is None and self.ttft_s is not None and self.e2e_s is not None and self.output_tokens > 1:
            self.tpot_s = (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def linear_flops_per_token(shape: ModelShape) -> float:
    """2 x weights touched per token in the decoder stack (projections and MLP), excluding the LM head."""
    h, hd = shape.hidden_size, shape.head_dim
    q, kv = shape.num_heads * hd, shape.num_kv_heads * hd
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * shape.intermediate_size
    return 2.0 * shape.num_layers * per_layer


def request_flops_split(shape: ModelShape, prompt_tokens: int, output_tokens: int) -> tuple[float, float]:
    """(GEMM FLOPs, attention FLOPs) to serve one request once: every token through the stack with causal
    attention, logits only where a token is sampled. GEMMs (projections, MLP, LM head) run on the int8 units in
    the int8 rungs, attention in the model dtype, so the floor model prices them apart."""
    t = prompt_tokens + max(output_tokens - 1, 0)  # the last sampled token is never fed back
    attn_pairs = t * (t + 1) / 2  # query-key pairs under the causal mask
    attn = shape.num_layers * 4.0 * shape.num_heads * shape.head_dim * attn_pairs  # QK^T and PV
    lm_head = 2.0 * shape.hidden_size * shape.vocab_size * output_tokens
    return linear_flops_per_token(shape) * t + lm_head, attn


def request_flops(shape: ModelShape, prompt_tokens: int, output_tokens: int) -> float:
    """Model FLOPs to serve one request once. No recomputation, no padding, no credit for caching: the same work
    for every system, so MFU compares systems on useful work."""
    return sum(request_flops_split(shape, prompt_tokens, output_tokens))


def summarise(
    records: Sequence[RequestRecord], wall_s: float, shape: ModelShape, gemm_flops_per_s: float | None
) -> dict[str, object]:
    """Throughput, latency percentiles, cache hit rate and MFU from per-request records and the wall time."""
    if wall_s <= 0:
        raise ValueError(f"wall time must be positive, got {wall_s}")
    prompt = sum(r.prompt_tokens for r in records)
    output = sum(r.output_tokens for r in records)
    flops = sum(request_flops(shape, r.prompt_tokens, r.output_tokens) for r in records)
    known = [r.cached_tokens for r in records if r.cached_tokens is not None]
    hit_rate = (sum(known) / prompt if prompt else 0.0) if len(known) == len(records) else None
    return {
        "num_requests": len(records),
        "prompt_tokens": prompt,
        "output_tokens": output,
        "wall_s": wall_s,
        "requests_per_s": len(records) / wall_s,
        "output_tokens_per_s": output / wall_s,
        "total_tokens_per_s": (prompt + output) / wall_s,
        "ttft_ms": latency_stats_ms([r.ttft_s for r in records if r.ttft_s is not None]),
        "tpot_ms": latency_stats_ms([r.tpot_s for r in records if r.tpot_s is not None]),
        "e2e_ms": latency_stats_ms([r.e2e_s for r in records if r.e2e_s is not None]),
        "prefix_cache_hit_rate": hit_rate,
        "model_flops": flops,
        "achieved_flops_per_s": flops / wall_s,
        "mfu": (flops / wall_s / gemm_flops_per_s) if gemm_flops_per_s else None,
    }


def agreement(reference: Sequence[Sequence[int]], other: Sequence[Sequence[int]]) -> dict[str, float]:
    """How closely greedy outputs match a reference: share of requests with the same first token, and mean share of
    each output matching before the first divergence. Informational (bf16 reductions may legitimately differ)."""
    if len(reference) != len(other) or not reference:
        raise ValueError("agreement needs two non-empty output lists of equal length")
    first = 0
    prefix_share = 0.0
    for ref, got in zip(reference, other):
        n = 0
        for a, b in zip(ref, got):
            if a != b:
                break
            n += 1
        first += int(bool(ref) and bool(got) and ref[0] == got[0])
        prefix_share += n / max(len(ref), 1)
    return {"first_token_match": first / len(reference), "mean_matching_prefix": prefix_share / len(reference)}
