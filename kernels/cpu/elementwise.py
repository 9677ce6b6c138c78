"""The decoder layer's elementwise steps on CPU through the fused C++ kernels (kernels/cpu/fused_ops.cpp).

Each is one pass over the activations instead of three to seven eager ops, and bit-identical to the torch
reference (same float operations, same roundings, torch's own exp and sum order). Which activation dtypes a
build covers depends on the CPU (`ops.fused_dtypes()`): bfloat16/float16 with AVX-512, float32 on AVX2 CPUs
without it; any other dtype keeps the reference ops. Timings: docs/bench/fused-elementwise.md.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import torch

from kernels.reference import activation, attention, norm, rotary


def fused_dtypes(ops: ModuleType, kind: str) -> frozenset[torch.dtype]:
    """The activation dtypes this build's fused `kind` kernels take ("elementwise" or "causal_softmax")."""
    return frozenset(getattr(torch, name) for name in ops.fused_dtypes().get(kind, ()))


def make_add_rms_norm(ops: ModuleType) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    dtypes = fused_dtypes(ops, "elementwise")

    def add_rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        # rows under 8 wide: torch's float sum takes another order there (and no model has them)
        if x.dtype not in dtypes or x.dim() != 2 or weight.dtype != x.dtype or x.shape[1] < 8:
            return norm.add_rms_norm(x, residual, weight, eps)
        res = residual.contiguous() if residual is not None else None
        out, new_res = ops.fused_add_rms_norm(x.contiguous(), res, weight.contiguous(), eps)
        return out, new_res

    return add_rms_norm


def make_silu_and_mul(ops: ModuleType) -> Callable[[torch.Tensor], torch.Tensor]:
    dtypes = fused_dtypes(ops, "elementwise")

    def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in dtypes or x.dim() != 2:
            return activation.silu_and_mul(x)
        return ops.fused_silu_and_mul(x.contiguous())

    return silu_and_mul


def make_apply_rotary(ops: ModuleType) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    dtypes = fused_dtypes(ops, "elementwise")

    def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if q.dtype not in dtypes or cos.dtype != q.dtype or not packed_heads(q) or not packed_heads(k):
            return rotary.apply_rotary(q, k, cos, sin)
        cos, sin = cos.contiguous(), sin.contiguous()
        return ops.fused_rotary(q, cos, sin), ops.fused_rotary(k, cos, sin)

    return apply_rotary


def make_block_softmax(ops: ModuleType) -> attention.BlockSoftmax:
    """The CPU prefill's causal softmax, in place on the score block."""
    dtypes = fused_dtypes(ops, "causal_softmax")

    def block_softmax(scores: torch.Tensor, block: int) -> torch.Tensor:
        if scores.dtype not in dtypes or not scores.is_contiguous():
            return attention.causal_block_softmax(scores, block)
        ops.causal_softmax_(scores, block)
        return scores

    return block_softmax


def packed_heads(x: torch.Tensor) -> bool:
    """[T, H, D] whose heads and head dims are packed (a column slice of the fused QKV output qualifies)."""
    return x.dim() == 3 and x.stride(2) == 1 and x.stride(1) == x.shape[2]
