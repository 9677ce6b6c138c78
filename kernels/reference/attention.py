"""Attention over the paged KV pool with plain torch ops.

Decode rows come in groups of similar KV length (the runner sorts them); each group gathers its keys once per
layer into [Hkv, G, L, D] and runs two batched matmuls, with the query heads that share a KV head stacked as rows
(no K/V repeat).

Causal prefill segments (with or without cached context) run on CPU as query blocks of PREFILL_BLOCK rows: each
block multiplies only the keys up to its last position (skipping the upper triangle) and masks only its diagonal
tile. That is faster than SDPA's fused CPU kernel (docs/bench/design-choices.md), whose masked path computes every
score and whose causal path runs well below GEMM speed. Scores stay in the model dtype and the softmax accumulates
in float32, as Hugging Face's eager attention does. Elsewhere (CUDA) and for sliding windows, SDPA is used.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata, PrefillSegment
from kernels.reference import kv_cache

# Query rows per block in the CPU causal prefill (best of 64/128/256/512 on smollm2-135m shapes, 1-2 threads).
PREFILL_BLOCK = 128


def _decode_group(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor,
                  block_size: int, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """q: [G, Hq, D]; table: [G, nblk] block ids; mask: [G, nblk * block_size] bool (True = real key) or None.

    Gathers whole blocks (a view of the pool as [Hkv, blocks, block_size * D]) rather than token rows: fewer,
    larger copies. Masked keys get -inf scores; their values are finite (null block, zeroed fresh blocks or old
    real values), so the zero weights cancel them exactly. Returns [G, Hq, D]."""
    rows, num_heads, dim = q.shape
    kv_heads, width = k_cache.shape[0], k_cache.shape[-1]
    length = table.shape[1] * block_size
    flat = table.reshape(-1)
    kg = gather_rows(k_cache.view(kv_heads, -1, block_size * width), flat).view(kv_heads, rows, length, width)
    vg = gather_rows(v_cache.view(kv_heads, -1, block_size * width), flat).view(kv_heads, rows, length, width)
    if kv_cache.is_quantized(k_cache):
        kg, vg = kv_cache.dequantize_kv(kg, q.dtype), kv_cache.dequantize_kv(vg, q.dtype)
    qg = (q * scale).view(rows, kv_heads, num_heads // kv_heads, dim).permute(1, 0, 2, 3)  # [Hkv, G, group, D]
    scores = torch.matmul(qg, kg.transpose(-1, -2))  # [Hkv, G, group, L], model dtype like the prefill path
    if mask is not None:
        scores.masked_fill_(~mask[None, :, None, :], float("-inf"))
    probs = scores.softmax(-1)
    out = torch.matmul(probs, vg)  # [Hkv, G, group, D]
    return out.permute(1, 0, 2, 3).reshape(rows, num_heads, dim)


def gather_rows(pool: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """pool: [Hkv, N, W]; returns pool[:, index] as a new [Hkv, len(index), W] tensor.

    On CPU, index_select along dim 1 takes a slow element-wise path; one dim-0 select per head into the output is
    several times faster (docs/bench/design-choices.md). Elsewhere the single call is kept."""
    if pool.device.type != "cpu":
        return pool.index_select(1, index)
    out = torch.empty((pool.shape[0], index.numel(), pool.shape[2]), dtype=pool.dtype, device=pool.device)
    for h in range(pool.shape[0]):
        torch.index_select(pool[h], 0, index, out=out[h])
    return out


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """q: [T, Hq, D]; k, v: [T, Hkv, D] of this step (already stored). Caches: [Hkv, slots, D], or int8 rows
    [Hkv, slots, D + 4] (kernels/reference/kv_cache.py). Returns [T, Hq, D]."""
    out = torch.empty_like(q)
    for g in meta.decode_groups:
        out[g.start : g.end] = _decode_group(q[g.start : g.end], k_cache, v_cache, g.block_table, g.block_size,
                                              g.key_mask(), scale)
    prefill_attention(q, k, v, k_cache, v_cache, meta, scale, out)
    return out


def causal_block_softmax(scores: torch.Tensor, block: int) -> torch.Tensor:
    """scores: contiguous [..., block, keys] of a query block whose last row sees every key; row i sees the first
    keys - block + i + 1. Returns the probabilities (masked keys 0); may reuse `scores`' memory."""
    if block > 1:
        keys = scores.shape[-1]
        tri = torch.ones(block, block, dtype=torch.bool, device=scores.device).triu_(1)
        scores[..., keys - block :].masked_fill_(tri, float("-inf"))
    return torch.softmax(scores, dim=-1)


BlockSoftmax = Callable[[torch.Tensor, int], torch.Tensor]
# (q rows of one segment, k, v, k_cache, v_cache, segment, scale) -> [n, Hq, D]: a backend's causal prefill.
CausalPrefill = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, PrefillSegment, float],
                         torch.Tensor]


def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, meta: AttentionMetadata, scale: float, out: torch.Tensor,
                      block_softmax: BlockSoftmax = causal_block_softmax,
                      causal_prefill: CausalPrefill | None = None) -> None:
    """Writes the rows of `meta.prefills` into `out`; shared by every backend whose decode path differs (and which
    may bring its own `block_softmax` for the CPU query-block path, or its own whole `causal_prefill`)."""
    group = q.shape[1] // k.shape[1]
    for p in meta.prefills:
        end = p.start + p.length
        if p.mask is None and causal_prefill is not None:
            out[p.start : end] = causal_prefill(q[p.start : end], k, v, k_cache, v_cache, p, scale)
        elif p.mask is None and q.device.type == "cpu":
            out[p.start : end] = _prefill_causal_blocked(q[p.start : end], k, v, k_cache, v_cache, p, scale,
                                                         block_softmax)
        else:
            out[p.start : end] = _prefill_sdpa(q[p.start : end], k, v, k_cache, v_cache, p, scale, group)


def segment_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                p: PrefillSegment) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values [Hkv, context + length, D] of one prefill segment, as the cache holds them."""
    quantized = kv_cache.is_quantized(k_cache)
    if p.kv_slots is None:
        end = p.start + p.length
        ks, vs = k[p.start : end].transpose(0, 1), v[p.start : end].transpose(0, 1)
        return (kv_cache.fake_quantize_kv(ks), kv_cache.fake_quantize_kv(vs)) if quantized else (ks, vs)
    ks, vs = gather_rows(k_cache, p.kv_slots), gather_rows(v_cache, p.kv_slots)
    return (kv_cache.dequantize_kv(ks, k.dtype), kv_cache.dequantize_kv(vs, k.dtype)) if quantized else (ks, vs)


def _prefill_causal_blocked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                            v_cache: torch.Tensor, p: PrefillSegment, scale: float,
                            block_softmax: BlockSoftmax) -> torch.Tensor:
    """q: [n, Hq, D] continuing after p.context_len cached tokens; causal. Returns [n, Hq, D]."""
    n, num_heads, dim = q.shape
    ks, vs = segment_kv(k, v, k_cache, v_cache, p)
    kv_heads = ks.shape[0]
    group = num_heads // kv_heads
    ctx = p.context_len
    qg = (q * scale).view(n, kv_heads, group, dim).permute(1, 2, 0, 3)  # [Hkv, group, n, D]
    out = torch.empty((kv_heads, group, n, dim), dtype=q.dtype, device=q.device)
    for s in range(0, n, PREFILL_BLOCK):
        e = min(n, s + PREFILL_BLOCK)
        b = e - s
        keys = ctx + e  # this block's last query sees exactly the first ctx + e keys
        qb = qg[:, :, s:e].reshape(kv_heads, group * b, dim)
        scores = torch.bmm(qb, ks[:, :keys].transpose(1, 2)).view(kv_heads, group, b, keys)
        probs = block_softmax(scores, b).view(kv_heads, group * b, keys)
        out[:, :, s:e] = torch.bmm(probs, vs[:, :keys]).view(kv_heads, group, b, dim)
    return out.permute(2, 0, 1, 3).reshape(n, num_heads, dim)


def _prefill_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  p: PrefillSegment, scale: float, group: int) -> torch.Tensor:
    ks, vs = segment_kv(k, v, k_cache, v_cache, p)
    qs = q.transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
    ks = ks.unsqueeze(0)
    vs = vs.unsqueeze(0)
    if group > 1:
        ks = ks.repeat_interleave(group, dim=1)
        vs = vs.repeat_interleave(group, dim=1)
    if p.mask is not None:
        o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=p.mask, scale=scale)
    elif p.context_len == 0:
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale)
    else:  # causal after cached context: SDPA's is_causal aligns to the top-left, so spell the mask out
        o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=p.causal_mask(q.device), scale=scale)
    return o.squeeze(0).transpose(0, 1)
