"""Causal prefill attention on CPU through PyTorch's fused flash-attention kernel (no score matrix in memory).

PyTorch's CPU flash kernel (`aten::_scaled_dot_product_flash_attention_for_cpu`) tiles queries and keys, keeps an
online softmax, handles grouped-query heads itself, and returns each row's log-sum-exp. Its causal mode aligns
the diagonal top-left, which is right only without cached context; with context, a chunk's queries see every
cached key and the chunk's own keys causally, so it runs twice — cached keys unmasked, the chunk's keys causal —
and the two partials are merged by their log-sum-exps. That keeps both calls on the fast, mask-free path (a
spelled-out mask makes SDPA compute every score).

Used for float32 and bf16, where it beat the query-block path (kernels/reference/attention.py: two batched matmuls
and a softmax per block of 128 queries); fp16 keeps the query-block path with the fused softmax. Figures:
docs/bench/design-choices.md.
"""

from __future__ import annotations

import torch

from kernels.attention_metadata import PrefillSegment
from kernels.reference.attention import segment_kv
from kernels.reference.attention_lse import merge_lse

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def flash_available() -> bool:
    """Whether this torch has the CPU flash kernel (a private op: checked, never assumed)."""
    try:
        return bool(_flash.default)
    except (AttributeError, RuntimeError):
        return False


def flash_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  p: PrefillSegment, scale: float) -> torch.Tensor:
    """q: [n, Hq, D] at positions p.context_len ..; causal. Returns [n, Hq, D] in q's dtype."""
    ks, vs = segment_kv(k, v, k_cache, v_cache, p)  # [Hkv, ctx + n, D]
    ctx = p.context_len
    qs = q.transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
    out, lse = _flash(qs, ks[None, :, ctx:], vs[None, :, ctx:], is_causal=True, scale=scale)[:2]
    if ctx:
        out0, lse0 = _flash(qs, ks[None, :, :ctx], vs[None, :, :ctx], is_causal=False, scale=scale)[:2]
        merged, _ = merge_lse([out0.float(), out.float()], [lse0, lse])
        out = merged.to(q.dtype)
    return out[0].transpose(0, 1)
