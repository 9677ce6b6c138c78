"""Paged attention in Triton: split-K decode over the block table, and causal prefill over paged KV.

Decode (`paged_decode`): one program per (row, KV head, split). A row is one query token with its own KV length,
so several query tokens of one sequence (speculative verification) are just several rows. The program holds all
query heads that share the KV head (grouped-query attention without repeating K/V), walks its split's keys in
tiles through the block table, keeps an online softmax in float32, and writes its partial output with its
log-sum-exp; a second kernel merges the splits by LSE. Long contexts therefore spread over many programs
instead of one per row. Keys past the row's length are never read (no padding, no zeroed blocks needed).

Prefill (`varlen_prefill`): every causal segment of a step in one launch (varlen: a table maps each query tile
to its segment's first row, length, cached context and key slots); one program per (query tile, query head);
keys are read by slot (the step's own keys are already stored), only up to the tile's last position, with the
causal mask on the diagonal tiles. `paged_prefill` is the one-segment case. Int8 KV rows are dequantized on load
(values x the row's float32 scale, rounded to the model dtype, as the reference does).

References: kernels/reference/attention.py (same results within float rounding; scores and softmax in float32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.attention_metadata import AttentionMetadata
from kernels.reference.attention import prefill_attention as reference_prefill
from kernels.reference.kv_cache import SCALE_BYTES, is_quantized

# Keys per split of one decode row (a row of L keys runs ceil(L / SPLIT_KEYS) programs per KV head).
SPLIT_KEYS = 256
KEY_TILE = 16


@triton.jit
def _load_keys(cache_ptr, scale_ptr, slot, mask, h, slots_per_head, D, ROW, d, dmask, QUANT: tl.constexpr):
    """[TILE, DPAD] float32 keys (or values) of the given slots of KV head h."""
    rows = (h * slots_per_head + slot) * ROW
    x = tl.load(cache_ptr + rows[:, None] + d[None, :], mask=mask[:, None] & dmask[None, :], other=0.0)
    if QUANT:
        s = tl.load(scale_ptr + rows // 4 + D // 4, mask=mask, other=0.0)
        x = x.to(tl.float32) * s[:, None]
    return x.to(tl.float32)


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, table_ptr, lens_ptr, out_ptr, lse_ptr,
                   num_heads, kv_heads, slots_per_head, D, ROW, nblk, block_size, num_splits, scale, window,
                   GROUP: tl.constexpr, GPAD: tl.constexpr, DPAD: tl.constexpr, TILE: tl.constexpr,
                   SPLIT: tl.constexpr, QUANT: tl.constexpr):
    r = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.program_id(2)
    kv_len = tl.load(lens_ptr + r)
    lo = sp * SPLIT
    first = 0
    if window > 0:
        first = tl.maximum(kv_len - window, 0)
    lo = tl.maximum(lo, first)
    hi = tl.minimum((sp + 1) * SPLIT, kv_len)
    g = tl.arange(0, GPAD)
    gmask = g < GROUP
    d = tl.arange(0, DPAD)
    dmask = d < D
    heads = h * GROUP + g
    q = tl.load(q_ptr + (r * num_heads + heads)[:, None] * D + d[None, :], mask=gmask[:, None] & dmask[None, :],
                other=0.0).to(tl.float32) * scale
    m_i = tl.full((GPAD,), float("-inf"), tl.float32)
    l_i = tl.zeros((GPAD,), tl.float32)
    acc = tl.zeros((GPAD, DPAD), tl.float32)
    for start in range(lo, hi, TILE):
        pos = start + tl.arange(0, TILE)
        kmask = pos < hi
        blk = tl.load(table_ptr + r * nblk + pos // block_size, mask=kmask, other=0)
        slot = blk * block_size + pos % block_size
        k = _load_keys(k_ptr, ks_ptr, slot, kmask, h, slots_per_head, D, ROW, d, dmask, QUANT)
        v = _load_keys(v_ptr, vs_ptr, slot, kmask, h, slots_per_head, D, ROW, d, dmask, QUANT)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GPAD, TILE]
        s = tl.where(kmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m_i = m_new
    has = l_i > 0
    out = acc / tl.where(has, l_i, 1.0)[:, None]
    lse = tl.where(has, m_i + tl.log(tl.where(has, l_i, 1.0)), float("-inf"))
    base = (r * num_heads + heads) * num_splits + sp
    tl.store(out_ptr + base[:, None] * D + d[None, :], out, mask=gmask[:, None] & dmask[None, :])
    tl.store(lse_ptr + base, lse, mask=gmask)


@triton.jit
def _merge_splits_kernel(part_ptr, lse_ptr, out_ptr, D, num_splits, SPAD: tl.constexpr, DPAD: tl.constexpr):
    """out[row, head] = the LSE-weighted sum of its splits' partial outputs."""
    rh = tl.program_id(0)
    s = tl.arange(0, SPAD)
    smask = s < num_splits
    d = tl.arange(0, DPAD)
    dmask = d < D
    lse = tl.load(lse_ptr + rh * num_splits + s, mask=smask, other=float("-inf"))
    m = tl.max(lse, axis=0)
    w = tl.where(lse > float("-inf"), tl.exp(lse - m), 0.0)
    part = tl.load(part_ptr + (rh * num_splits + s)[:, None] * D + d[None, :], mask=smask[:, None] & dmask[None, :],
                   other=0.0)
    total = tl.sum(w, axis=0)
    out = tl.sum(part * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + rh * D + d, out.to(out_ptr.dtype.element_ty), mask=dmask)


def _views(k_cache: torch.Tensor, v_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool, int]:
    quant = is_quantized(k_cache)
    scale_k = k_cache.view(torch.float32) if quant else k_cache
    scale_v = v_cache.view(torch.float32) if quant else v_cache
    return scale_k, scale_v, quant, k_cache.shape[-1]


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                 kv_lens: torch.Tensor, block_size: int, scale: float, window: int | None = None,
                 max_kv_len: int | None = None) -> torch.Tensor:
    """q: [R, Hq, D] one query token per row; block_table: [R, nblk]; kv_lens: [R] keys per row (this token's
    included); max_kv_len: an upper bound of kv_lens known on the host (else read back from the device: a sync).
    Splits past a row's length are empty and weigh nothing in the merge. Returns [R, Hq, D] in q's dtype."""
    rows, num_heads, dim = q.shape
    kv_heads = k_cache.shape[0]
    group = num_heads // kv_heads
    out = torch.empty_like(q)
    if rows == 0:
        return out
    scale_k, scale_v, quant, row = _views(k_cache, v_cache)
    if quant and row != dim + SCALE_BYTES:
        raise ValueError(f"int8 KV rows must be head_dim + {SCALE_BYTES} wide")
    longest = int(kv_lens.max()) if max_kv_len is None else max_kv_len
    splits = max(1, triton.cdiv(longest, SPLIT_KEYS))
    part = torch.empty((rows, num_heads, splits, dim), dtype=torch.float32, device=q.device)
    lse = torch.empty((rows, num_heads, splits), dtype=torch.float32, device=q.device)
    table = block_table.to(torch.int64).contiguous()
    _decode_kernel[(rows, kv_heads, splits)](
        q.contiguous(), k_cache, v_cache, scale_k, scale_v, table, kv_lens.to(torch.int64).contiguous(), part, lse,
        num_heads, kv_heads, k_cache.shape[1], dim, row, table.shape[1], block_size, splits, scale, window or 0,
        GROUP=group, GPAD=triton.next_power_of_2(group), DPAD=triton.next_power_of_2(dim), TILE=KEY_TILE,
        SPLIT=SPLIT_KEYS, QUANT=quant)
    _merge_splits_kernel[(rows * num_heads,)](part, lse, out, dim, splits, SPAD=triton.next_power_of_2(splits),
                                              DPAD=triton.next_power_of_2(dim))
    return out


@triton.jit
def _prefill_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, slots_ptr, out_ptr, tile_seg_ptr, tile_idx_ptr, seg_ptr,
                    num_heads, kv_heads, slots_per_head, D, ROW, scale, GROUP: tl.constexpr, DPAD: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, QUANT: tl.constexpr):
    # Program (tile, query head); tile -> its segment and its index inside it. A segment is 4 int64: first row
    # in the packed q/out, length, cached context, offset of its key slots in slots_ptr.
    t = tl.program_id(0)
    hq = tl.program_id(1)
    seg = tl.load(tile_seg_ptr + t)
    qb = tl.load(tile_idx_ptr + t)
    row0 = tl.load(seg_ptr + 4 * seg)
    n = tl.load(seg_ptr + 4 * seg + 1)
    ctx = tl.load(seg_ptr + 4 * seg + 2)
    slot0 = tl.load(seg_ptr + 4 * seg + 3)
    h = hq // GROUP
    i = qb * BM + tl.arange(0, BM)
    imask = i < n
    d = tl.arange(0, DPAD)
    dmask = d < D
    q = tl.load(q_ptr + ((row0 + i)[:, None] * num_heads + hq) * D + d[None, :],
                mask=imask[:, None] & dmask[None, :], other=0.0).to(tl.float32) * scale
    q_pos = ctx + i
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, DPAD), tl.float32)
    end = tl.minimum(ctx + (qb + 1) * BM, ctx + n)  # the tile's last query sees keys [0, end)
    for start in range(0, end, BN):
        pos = start + tl.arange(0, BN)
        kmask = pos < end
        slot = tl.load(slots_ptr + slot0 + pos, mask=kmask, other=0)
        k = _load_keys(k_ptr, ks_ptr, slot, kmask, h, slots_per_head, D, ROW, d, dmask, QUANT)
        v = _load_keys(v_ptr, vs_ptr, slot, kmask, h, slots_per_head, D, ROW, d, dmask, QUANT)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [BM, BN]
        visible = kmask[None, :] & (pos[None, :] <= q_pos[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(out_ptr + ((row0 + i)[:, None] * num_heads + hq) * D + d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=imask[:, None] & dmask[None, :])


_PREFILL_BM = 16


def varlen_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   segments: list[tuple[int, int, int, torch.Tensor]], scale: float,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """Every causal prefill segment of a step in one launch. q: [T, Hq, D] packed rows; segments: (first row,
    length, cached context, key slots [context + length]) each, lengths and contexts known on the host. Writes the
    segments' rows of `out` (allocated like q when None) and returns it."""
    qc = q.contiguous()
    work = out if out is not None and out.is_contiguous() else torch.empty_like(qc)
    segments = [sg for sg in segments if sg[1] > 0]
    if not segments:
        return work if out is None else out
    num_heads, dim = q.shape[1], q.shape[2]
    kv_heads = k_cache.shape[0]
    scale_k, scale_v, quant, row = _views(k_cache, v_cache)
    meta: list[int] = []
    tile_seg: list[int] = []
    tile_idx: list[int] = []
    offset = 0
    for k, (row0, n, ctx, slots) in enumerate(segments):
        meta += [row0, n, ctx, offset]
        offset += slots.shape[0]
        tiles = triton.cdiv(n, _PREFILL_BM)
        tile_seg += [k] * tiles
        tile_idx += list(range(tiles))
    slots_all = torch.cat([sg[3].to(torch.int64) for sg in segments]).contiguous()
    index = torch.tensor(meta + tile_seg + tile_idx, dtype=torch.int64).to(q.device, non_blocking=True)
    seg_meta, seg_of_tile, idx_of_tile = index.split([len(meta), len(tile_seg), len(tile_idx)])
    _prefill_kernel[(len(tile_seg), num_heads)](
        qc, k_cache, v_cache, scale_k, scale_v, slots_all, work, seg_of_tile, idx_of_tile, seg_meta,
        num_heads, kv_heads, k_cache.shape[1], dim, row, scale, GROUP=num_heads // kv_heads,
        DPAD=triton.next_power_of_2(dim), BM=_PREFILL_BM, BN=16, QUANT=quant)
    if out is None or work is out:
        return work
    for row0, n, _, _ in segments:
        out[row0 : row0 + n] = work[row0 : row0 + n]
    return out


def paged_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor, ctx: int,
                  scale: float) -> torch.Tensor:
    """q: [n, Hq, D] at positions ctx .. ctx + n - 1 of one sequence; slots: [ctx + n] cache slots of its keys
    (this chunk's included, already stored). Causal. Returns [n, Hq, D] in q's dtype."""
    return varlen_prefill(q, k_cache, v_cache, [(0, q.shape[0], ctx, slots)], scale)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """The `Kernels.paged_attention` entry point: decode groups and causal prefill segments through the kernels
    above; a segment with an explicit mask (sliding window) takes the reference path."""
    out = torch.empty_like(q)
    for g in meta.decode_groups:
        out[g.start : g.end] = paged_decode(q[g.start : g.end], k_cache, v_cache, g.block_table, g.kv_lens,
                                            g.block_size, scale, g.window, g.max_kv_len)
    masked = [p for p in meta.prefills if p.mask is not None]
    causal = [(p.start, p.length, p.context_len,
               p.kv_slots if p.kv_slots is not None else meta.slot_mapping[p.start : p.start + p.length])
              for p in meta.prefills if p.mask is None]
    varlen_prefill(q, k_cache, v_cache, causal, scale, out)
    if masked:
        reference_prefill(q, k, v, k_cache, v_cache, AttentionMetadata(meta.slot_mapping, prefills=masked), scale,
                          out)
    return out
