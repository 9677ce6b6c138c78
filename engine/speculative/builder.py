"""Builds the speculator an `LLM` asked for: the proposer, the draft model with its own KV pool, the cost model."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.devices import resolve_dtype
from engine.kv_pool import allocate_kv_pool, kv_budget
from engine.model_runner import ModelRunner
from engine.models.checkpoint import open_checkpoint
from engine.models.config import ModelConfig
from engine.models.loader import build_model, num_weights
from engine.speculative.config import SpeculativeConfig
from engine.speculative.draft_model import DraftModelProposer
from engine.speculative.policy import StepCostModel
from engine.speculative.speculator import Speculator
from engine.tokenizer import Tokenizer
from kernels import Kernels

# Measured step-time knees (query tokens per step below which a step costs about as much as one token) and fixed
# per-step costs in token-equivalents; see docs/bench/speculative.md for the measurement. A GPU's decode step stays
# bandwidth-bound to a few hundred tokens.
_CPU_KNEE, _CPU_OVERHEAD = 2, 16.0
_GPU_KNEE, _GPU_OVERHEAD = 256, 8.0


@dataclass(frozen=True)
class TargetInfo:
    """What the speculator needs to know of the target engine."""

    model_config: ModelConfig
    tokenizer: Tokenizer
    device: torch.device
    dtype: torch.dtype
    kernels: Kernels
    block_size: int
    kv_tokens: int  # the target pool's capacity in tokens (the draft pool holds as many by default)
    max_model_len: int
    max_num_batched_tokens: int
    num_parameters: int


def build_speculator(config: SpeculativeConfig, target: TargetInfo) -> Speculator:
    draft = None
    draft_scale = 0.0
    if config.method == "draft_model":
        draft, draft_params = _draft_model(config, target)
        draft_scale = draft_params / max(target.num_parameters, 1)
    gpu = target.device.type == "cuda"
    cost = StepCostModel(
        knee_tokens=config.compute_bound_tokens or (_GPU_KNEE if gpu else _CPU_KNEE),
        overhead_tokens=config.step_overhead_tokens if config.step_overhead_tokens is not None
        else (_GPU_OVERHEAD if gpu else _CPU_OVERHEAD),
        draft_scale=draft_scale,
    )
    return Speculator(config, cost, target.max_model_len, draft)


def _draft_model(config: SpeculativeConfig, target: TargetInfo) -> tuple[DraftModelProposer, int]:
    assert config.model is not None
    ckpt = open_checkpoint(config.model)
    if not ckpt.tokenizer.same_vocabulary(target.tokenizer):
        raise ValueError(f"draft model {config.model} has a different tokenizer from the target model: its tokens "
                         "would mean something else (a draft model must share the target's tokenizer)")
    dtype = resolve_dtype(config.draft_dtype, ckpt.config, target.device) if config.draft_dtype != "auto" \
        else target.dtype
    model = build_model(ckpt, dtype, target.device, target.kernels, config.draft_quantization)
    budget = kv_budget(config.draft_kv_cache_memory, target.device, target.kv_tokens, ckpt.config, dtype,
                       quantized=False)
    pool = allocate_kv_pool(ckpt.config, dtype, target.device, target.block_size, budget, quantized=False)
    runner = ModelRunner(model, pool, dtype=dtype, device=target.device, max_model_len=target.max_model_len,
                         decode_layout=target.kernels.decode_layout)
    proposer = DraftModelProposer(runner, target.model_config.vocab_size, target.max_num_batched_tokens)
    return proposer, num_weights(model)
