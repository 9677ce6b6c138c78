"""Attention over the paged KV pool with plain torch ops.

Decode rows come in groups of similar KV length (the runner sorts them); each group gathers its keys once per
layer into [Hkv, G, L, D] and runs two batched matmuls, with the query heads that share a KV head stacked as rows
(no K/V repeat). Prefill segments use SDPA's fused kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata


def _decode_group(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor,
                  mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """q: [G, Hq, D]; slots: [G, L]; mask: [G, L] bool (True = real key) or None. Returns [G, Hq, D]."""
    rows, num_heads, dim = q.shape
    kv_heads = k_cache.shape[0]
    length = slots.shape[1]
    flat = slots.reshape(-1)
    kg = k_cache.index_select(1, flat).view(kv_heads, rows, length, dim)
    vg = v_cache.index_select(1, flat).view(kv_heads, rows, length, dim)
    qg = q.view(rows, kv_heads, num_heads // kv_heads, dim).permute(1, 0, 2, 3)  # [Hkv, G, group, D]
    scores = torch.matmul(qg, kg.transpose(-1, -2)).float() * scale  # [Hkv, G, group, L]
    if mask is not None:
        scores.masked_fill_(~mask[None, :, None, :], float("-inf"))
    probs = scores.softmax(-1).to(q.dtype)
    out = torch.matmul(probs, vg)  # [Hkv, G, group, D]
    return out.permute(1, 0, 2, 3).reshape(rows, num_heads, dim)


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """q: [T, Hq, D]; k, v: [T, Hkv, D] of this step (already stored). Caches: [Hkv, slots, D]. Returns [T, Hq, D]."""
    num_heads = q.shape[1]
    kv_heads = k.shape[1]
    group = num_heads // kv_heads
    out = torch.empty_like(q)

    for g in meta.decode_groups:
        out[g.start : g.end] = _decode_group(q[g.start : g.end], k_cache, v_cache, g.kv_slots, g.mask, scale)

    for p in meta.prefills:
        end = p.start + p.length
        qs = q[p.start : end].transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
        if p.kv_slots is None:
            ks = k[p.start : end].transpose(0, 1)
            vs = v[p.start : end].transpose(0, 1)
        else:
            ks = k_cache.index_select(1, p.kv_slots)
            vs = v_cache.index_select(1, p.kv_slots)
        ks = ks.unsqueeze(0)
        vs = vs.unsqueeze(0)
        if group > 1:
            ks = ks.repeat_interleave(group, dim=1)
            vs = vs.repeat_interleave(group, dim=1)
        if p.mask is None:
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale)
        else:
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=p.mask, scale=scale)
        out[p.start : end] = o.squeeze(0).transpose(0, 1)
    return out
