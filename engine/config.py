"""The engine's settings, in one place: `EngineSettings` holds every knob with its one default and its help text;
`EngineConfig` adds the checkpoint. `LLM(model, **overrides)` builds an `EngineConfig`; the pipeline's options,
the context-parallel ranks and every command line's engine flags (`engine.args`) are derived from these classes,
so a default or a constraint is written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.speculative.config import SpeculativeConfig

GiB = 1 << 30
# The step token budget under `memory_limit` unless one is given: the limit reserves two steps' working set, which
# grows with the budget; a smaller one left the KV pool little more room and made the run no faster
# (docs/bench/design-choices.md).
MEMORY_LIMIT_STEP_TOKENS = 512


class EngineSettings(BaseModel):
    """How the engine runs a model (everything but which model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights and activations (auto: the checkpoint's, float32 on a CPU without bf16)")
    device: str = Field("auto", description="auto, cpu or cuda[:N]")
    max_num_seqs: int = Field(128, ge=1, description="most sequences in one engine step")
    max_num_batched_tokens: int = Field(
        2048, ge=16, description=f"token budget of one engine step ({MEMORY_LIMIT_STEP_TOKENS} under memory_limit "
                                 "unless given)")
    kv_cache_memory: int | None = Field(
        None, ge=1, description="bytes for the KV pool (per rank under context parallelism); default: room for "
                                "max_num_seqs full-length sequences within the device's caps")
    memory_limit: int | None = Field(
        None, ge=1, description="bytes this CPU process may hold resident: the KV pool gets what the loaded model, "
                                "the caller's data and two full steps (measured at load) leave; instead of "
                                "kv_cache_memory")
    block_size: int = Field(16, ge=1, le=1024, description="tokens per KV block")
    max_model_len: int | None = Field(None, ge=2, description="longest prompt + output (default: the model's)")
    seed: int = Field(0, description="seed of sampled (non-greedy) requests that bring none")
    enable_prefix_caching: bool = Field(True, description="reuse the KV of prompt prefixes already computed")
    quantization: Literal["int8"] | None = Field(
        None, description="int8 weights (W8A8; default: whatever the checkpoint stores)")
    kv_cache_dtype: Literal["auto", "int8"] = Field(
        "auto", description="KV cache rows in the model dtype (auto) or int8 with a scale per token and head: "
                            "about half the bytes decode reads; changes outputs slightly")
    kernels: Literal["auto", "reference", "triton"] = Field(
        "auto", description="auto: compiled kernels where they build (C++ on CPU, Triton on CUDA); reference: plain "
                            "torch only; triton: the Triton kernels on any device (CPU only under TRITON_INTERPRET=1)")
    cuda_graphs: bool = Field(True, description="replay decode-only steps as CUDA graphs (no effect on CPU)")
    context_parallel_size: int = Field(
        1, ge=1, le=64, description="ranks one sequence's KV and attention are split over (ring attention)")
    speculative_config: SpeculativeConfig | None = Field(
        None, description="speculative decoding (ngram prompt lookup or a draft model); greedy outputs are "
                          "identical with and without it")

    @model_validator(mode="before")
    @classmethod
    def _step_budget_under_a_limit(cls, data: Any) -> Any:
        """Under a memory limit, steps the limit can afford two of, unless the caller chose a budget."""
        if isinstance(data, dict) and data.get("memory_limit") is not None \
                and data.get("max_num_batched_tokens") is None:
            return {**data, "max_num_batched_tokens": MEMORY_LIMIT_STEP_TOKENS}
        return data

    @model_validator(mode="after")
    def _one_kv_sizing(self) -> EngineSettings:
        if self.memory_limit is not None and self.kv_cache_memory is not None:
            raise ValueError("give memory_limit or kv_cache_memory, not both (the limit sizes the KV pool)")
        if self.memory_limit is not None and self.context_parallel_size > 1:
            raise ValueError("memory_limit sizes one process's KV pool; with context_parallel_size > 1 give "
                             "kv_cache_memory (per rank) instead")
        return self

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if v != "auto" and not (v == "cpu" or v.startswith("cuda")):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {v!r}")
        return v


class EngineConfig(EngineSettings):
    """One engine: its checkpoint (a Hugging Face directory or a GGUF file), an optional LoRA adapter, and how it
    runs."""

    model_dir: Path
    adapter: Path | None = Field(None, description="a LoRA adapter directory (peft format), merged at load")

    @classmethod
    def build(cls, model: str | Path, **overrides: Any) -> EngineConfig:
        """`model` plus any settings; unknown names fail with pydantic's message naming them."""
        return cls(model_dir=Path(model), **overrides)
