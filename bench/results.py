"""The results.json contract: one row per system or ladder step, plus run-wide context (machine, workload, GEMM peak)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from bench.metrics import RequestRecord

Status = Literal["ok", "skipped", "not_available", "error", "timeout"]
Kind = Literal["baseline", "ladder", "peer"]

SCHEMA_VERSION = 1

SYSTEM_LABELS: dict[str, str] = {
    "hf_generate_b4": "HF generate, static batch 4",
    "hf_continuous_batching": "HF continuous batching",
    "engine_paged": "engine: continuous batching + paged KV",
    "engine_prefix_cache": "+ prefix caching",
    "engine_int8": "+ INT8 weights",
    "engine_compiled": "+ compiled/fused kernels",
    "engine_kv_int8": "+ INT8 KV cache",
    "engine_speculative": "+ speculative decoding",
    "llamacpp": "llama.cpp (llama-batched-bench)",
}
BASELINES: tuple[str, ...] = ("hf_generate_b4", "hf_continuous_batching")


class LatencyStats(BaseModel):
    model_config = ConfigDict(extra="forbid")
    p50: float
    p95: float
    p99: float
    mean: float
    max: float


class SystemResult(BaseModel):
    """One row of the report. Throughput and latency fields are None unless status is 'ok'."""

    model_config = ConfigDict(extra="forbid")

    name: str
    label: str
    kind: Kind
    status: Status
    reason: str | None = None
    load_s: float | None = None
    wall_s: float | None = None
    num_requests: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    total_tokens_per_s: float | None = None
    ttft_ms: LatencyStats | None = None
    tpot_ms: LatencyStats | None = None
    e2e_ms: LatencyStats | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions: int | None = None
    peak_rss_bytes: int | None = None
    start_rss_bytes: int | None = None
    rss_method: str | None = None
    peak_device_bytes: int | None = None
    model_flops: float | None = None
    achieved_flops_per_s: float | None = None
    mfu: float | None = None
    config: dict[str, Any] = {}
    engine_stats: dict[str, Any] | None = None
    engine_stats_delta: dict[str, Any] | None = None
    per_request: dict[str, list[float | int | None]] | None = None
    agreement_vs_hf_generate_b4: dict[str, float] | None = None
    # The speculative rung against the best rung without speculation: acceptance, steps saved, throughput ratio
    # and whether its tokens equal those of the rung it builds on (they must, under greedy decoding).
    speculative: dict[str, Any] | None = None
    # wall time over the floor model's minimum wall time for this workload on this machine (bench/floor.py)
    floor_ratio: float | None = None
    ratios: dict[str, dict[str, float]] = {}
    # Against a baseline stopped by --system-timeout: its throughput was below workload tokens / limit, so these
    # ratios are lower bounds (same keys as `ratios`).
    ratios_at_least: dict[str, dict[str, float]] = {}
    reused_from: str | None = None
    notes: list[str] = []


def kind_of(name: str) -> Kind:
    if name.startswith("llamacpp"):
        return "peer"
    return "baseline" if name in BASELINES else "ladder"


def empty_row(name: str, status: Status, reason: str) -> SystemResult:
    return SystemResult(name=name, label=SYSTEM_LABELS.get(name, name), kind=kind_of(name), status=status, reason=reason)


class SystemUnavailable(Exception):
    """A system that cannot run here, for a stated reason: recorded as a row instead of crashing the run."""

    def __init__(self, reason: str, status: Status = "skipped") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class SystemRun:
    """What a system runner measured, before it is summarised into a SystemResult."""

    records: list[RequestRecord]
    wall_s: float
    load_s: float
    config: dict[str, Any] = field(default_factory=dict)
    engine_stats: dict[str, Any] | None = None
    engine_stats_delta: dict[str, Any] | None = None
    preemptions: int | None = None
    notes: list[str] = field(default_factory=list)
