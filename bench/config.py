"""Validated benchmark settings: one object travels from the CLI to every worker, so a run is reproducible from it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine import EngineSettings

Dtype = Literal["bfloat16", "float32", "float16"]


def default_dtype(device: str = "auto") -> Dtype:
    """The engine's `auto` rule for a benchmark without a checkpoint's own dtype: bfloat16 on CUDA and on CPUs with
    bf16 instructions, float32 on the others, where a bf16 GEMM is two orders of magnitude slower and the standard
    workload would run for hours."""
    # lazy: engine.devices imports torch, which the CLI's argument parsing does not need
    from engine.devices import cpu_has_fast_bf16, resolve_device

    if resolve_device(device).type == "cuda" or cpu_has_fast_bf16():
        return "bfloat16"
    return "float32"


class WorkloadSpec(BaseModel):
    """The standard workload's knobs (shared GUIDE §3). Defaults are the standard run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_requests: int = Field(64, ge=1)
    prefix_len: int = Field(256, ge=0, description="shared instruction prefix, tokens")
    body_median: float = Field(500.0, gt=0)
    body_sigma: float = Field(0.6, ge=0, description="sigma of log(body length); the guide fixes only the median")
    body_min: int = Field(64, ge=1)
    body_max: int = Field(2048, ge=1)
    output_min: int = Field(32, ge=1)
    output_max: int = Field(256, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _ranges(self) -> "WorkloadSpec":
        if self.body_min > self.body_max:
            raise ValueError(f"body_min {self.body_min} > body_max {self.body_max}")
        if self.output_min > self.output_max:
            raise ValueError(f"output_min {self.output_min} > output_max {self.output_max}")
        return self

    @property
    def max_seq_len(self) -> int:
        return self.prefix_len + self.body_max + self.output_max


_ENGINE = EngineSettings.model_fields


class EngineOptions(BaseModel):
    """Engine settings shared by every ladder step (the step adds its own switch); defaults and bounds are the
    engine's own (engine.config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_num_seqs: int = _ENGINE["max_num_seqs"]
    max_num_batched_tokens: int = _ENGINE["max_num_batched_tokens"]
    kv_cache_memory: int | None = _ENGINE["kv_cache_memory"]
    block_size: int = _ENGINE["block_size"]
    speculative_base: Literal["engine_paged", "engine_prefix_cache", "engine_int8", "engine_compiled",
                              "engine_kv_int8"] = Field(
        "engine_kv_int8", description="the rung whose switches the speculative rung adds prompt lookup to")


class HFOptions(BaseModel):
    """How the Hugging Face baselines run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_size: int = Field(4, ge=1, description="static batch size of the naive `generate` service")
    attn_implementation: str = Field("sdpa", description="transformers attention backend for `generate`")
    cb_page_size: int = Field(256, ge=4, description="page size of transformers' continuous batching cache")
    cb_max_batch_tokens: int | None = Field(
        None, ge=1, description="token budget per CB step; None = the engine's max_num_batched_tokens"
    )


class LlamaCppOptions(BaseModel):
    """The optional llama.cpp peer (bench/llamacpp.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bin_dir: Path | None = Field(None, description="where llama-batched-bench is; None = .llamacpp/bin, then PATH")
    ggufs: tuple[Path, ...] = Field((), description="GGUF files to run; empty = the --model GGUF as Q8_0 and BF16")
    parallel: tuple[int, ...] = Field((16, 32, 64), description="sequences at a time to try; the best counts")


SYSTEM_ALIASES: dict[str, tuple[str, ...]] = {
    "hf": ("hf_generate_b4", "hf_continuous_batching"),
    "peers": ("llamacpp",),
    "engine": ("engine_paged", "engine_prefix_cache", "engine_int8", "engine_compiled", "engine_kv_int8",
               "engine_speculative"),
}
ALL_SYSTEMS: tuple[str, ...] = SYSTEM_ALIASES["hf"] + SYSTEM_ALIASES["peers"] + SYSTEM_ALIASES["engine"]


def expand_systems(names: str | list[str]) -> tuple[str, ...]:
    """Turn 'hf,engine_int8' into the ordered, de-duplicated tuple of system names."""
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    wanted: set[str] = set()
    for item in items:
        if item == "all":
            wanted.update(ALL_SYSTEMS)
        elif item in SYSTEM_ALIASES:
            wanted.update(SYSTEM_ALIASES[item])
        elif item in ALL_SYSTEMS:
            wanted.add(item)
        else:
            known = ", ".join(("all", *SYSTEM_ALIASES, *ALL_SYSTEMS))
            raise ValueError(f"unknown system {item!r}; choose from: {known}")
    return tuple(s for s in ALL_SYSTEMS if s in wanted)


class BenchConfig(BaseModel):
    """Everything that defines one benchmark run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("smollm2-135m", description="a shape name (random weights) or a checkpoint directory")
    dtype: Dtype = Field(description='"auto" or left out: resolved on construction by default_dtype (device)')
    device: str = "auto"
    threads: int | None = Field(None, ge=1, description="torch threads; None = the cores this process may use")
    workload: WorkloadSpec = WorkloadSpec()
    engine: EngineOptions = EngineOptions()
    hf: HFOptions = HFOptions()
    llamacpp: LlamaCppOptions = LlamaCppOptions()
    systems: tuple[str, ...] = ALL_SYSTEMS
    warmup: bool = True
    weights_seed: int = 0
    cache_dir: Path | None = Field(None, description="where random-weight shapes are built; None = user cache")
    out_dir: Path = Path("bench-out")
    reuse_baselines: Path | None = Field(None, description="results.json whose HF rows are reused if the workload matches")
    system_timeout_s: float | None = Field(
        None, gt=0, description="stop a system after this many seconds; ratios against it become lower bounds")
    preset: Literal["standard", "quick", "custom"] = "standard"

    @model_validator(mode="before")
    @classmethod
    def _resolve_auto_dtype(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("dtype", "auto") == "auto":
            return {**data, "dtype": default_dtype(str(data.get("device", "auto")))}
        return data


QUICK_WORKLOAD = WorkloadSpec(
    num_requests=8, prefix_len=32, body_median=48, body_sigma=0.5, body_min=16, body_max=128, output_min=8, output_max=24
)
QUICK_MODEL = "tiny-llama"


class BenchJob(BaseModel):
    """What one worker process needs to measure one system (serialised to JSON between processes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str
    model_dir: Path
    shape: dict[str, object]
    dtype: Dtype
    device: str
    threads: int
    workload: WorkloadSpec
    workload_fingerprint: str
    reserved_ids: list[int]
    engine: EngineOptions
    hf: HFOptions
    warmup: bool
    gemm_flops_per_s: float | None
