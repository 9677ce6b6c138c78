"""Attention over the paged KV pool with torch SDPA.

Decode rows come in groups of similar KV length (the runner sorts them), so each group is one padded SDPA call;
query heads that share a KV head are folded into the query-length axis, which avoids repeating K/V and keeps the
fast CPU kernel in bf16. Prefill segments are one SDPA call each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata


def _gather(cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    heads, dim = cache.shape[-2], cache.shape[-1]
    return cache.view(-1, heads, dim)[slots]


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """q: [T, Hq, D]; k, v: [T, Hkv, D] of this step (already stored in the caches). Returns [T, Hq, D]."""
    num_tokens, num_heads, dim = q.shape
    kv_heads = k.shape[1]
    group = num_heads // kv_heads
    out = torch.empty_like(q)

    for g in meta.decode_groups:
        rows = g.end - g.start
        qg = q[g.start : g.end].view(rows, kv_heads, group, dim)
        kg = _gather(k_cache, g.kv_slots).permute(0, 2, 1, 3)  # [G, Hkv, L, D]
        vg = _gather(v_cache, g.kv_slots).permute(0, 2, 1, 3)
        o = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=g.mask, scale=scale)
        out[g.start : g.end] = o.reshape(rows, num_heads, dim)

    for p in meta.prefills:
        end = p.start + p.length
        qs = q[p.start : end].transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
        if p.kv_slots is None:
            ks, vs = k[p.start : end], v[p.start : end]
        else:
            ks, vs = _gather(k_cache, p.kv_slots), _gather(v_cache, p.kv_slots)
        ks = ks.transpose(0, 1).unsqueeze(0)
        vs = vs.transpose(0, 1).unsqueeze(0)
        if group > 1:
            ks = ks.repeat_interleave(group, dim=1)
            vs = vs.repeat_interleave(group, dim=1)
        if p.mask is None:
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale)
        else:
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=p.mask, scale=scale)
        out[p.start : end] = o.squeeze(0).transpose(0, 1)
    return out
