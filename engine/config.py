"""Validated engine configuration (a pydantic boundary object)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

GiB = 1 << 30


class EngineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_dir: Path
    adapter: Path | None = None  # a LoRA adapter directory (peft format), merged into the weights at load
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    max_num_seqs: int = Field(128, ge=1)
    max_num_batched_tokens: int = Field(2048, ge=16)
    kv_cache_memory: int | None = Field(None, ge=1, description="bytes for the KV pool; None picks a default")
    block_size: int = Field(16, ge=1, le=1024)
    max_model_len: int | None = Field(None, ge=2)
    seed: int = 0
    enable_prefix_caching: bool = True
    quantization: Literal["int8"] | None = None
    # "auto": K/V in the model dtype; "int8": one int8 row per token and head with its float32 scale (about half the
    # bytes decode attention reads, and twice the tokens per byte of cache; changes outputs slightly).
    kv_cache_dtype: Literal["auto", "int8"] = "auto"
    # "auto": compiled kernels where they build (C++ on CPU; Triton on CUDA); "reference": the plain torch
    # implementations only (the benchmark ladder's rung below "+ compiled/fused kernels", and a fallback);
    # "triton": the Triton kernels on any device (on CPU only under TRITON_INTERPRET=1, for tests).
    kernels: Literal["auto", "reference", "triton"] = "auto"
    # Decode-only steps replay CUDA graphs (one per batch-size bucket) on CUDA with the Triton kernels; False runs
    # every step eagerly (vLLM's enforce_eager). No effect on CPU.
    cuda_graphs: bool = True
    # Ranks one sequence's KV and attention are split over (engine/distributed); kv_cache_memory is then per rank.
    context_parallel_size: int = Field(1, ge=1, le=64)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if v != "auto" and not (v == "cpu" or v.startswith("cuda")):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {v!r}")
        return v
