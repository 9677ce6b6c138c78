"""Attention across context-parallel ranks, in the `Kernels.paged_attention` signature.

Replicated rows (decodes): every rank attends to the keys it holds; the partial (output, LSE) pairs are all-gathered
and merged in rank order, so every rank gets bit-identical rows.

Sharded rows (prefill chunks): zigzag ring attention. Each rank starts with its own keys of the chunk's sequence
(the cached context it holds plus the chunk rows it just stored), passes them to the next rank and receives the
previous rank's, N - 1 times; at each stage its query rows attend to the visiting block with the causal mask by
position and merge the partial result by LSE in float32. A block that lies wholly after a rank's last query is
skipped, which is where zigzag placement pays: every rank holds an early and a late part of the chunk.

Keys are always read back from the pool after the store, so an int8 KV cache gives the same (dequantized) values
whichever rank or step produced them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.distributed.comm import Comm
from engine.distributed.plan import RankLayout
from kernels import AttentionMetadata, Kernels
from kernels.decode_layout import EXACT_LENGTH_READS
from kernels.reference import kv_cache
from kernels.reference.attention import gather_rows
from kernels.reference.attention_lse import attention_lse, attention_lse_rows, merge_lse


@dataclass
class ContextParallelMetadata(AttentionMetadata):
    layout: RankLayout | None = None


def _read_keys(cache: torch.Tensor, slots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[Hkv, len(slots), D] in `dtype`, as the pool holds them."""
    rows = gather_rows(cache, slots)
    return kv_cache.dequantize_kv(rows, dtype) if kv_cache.is_quantized(cache) else rows


def replicated_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lay: RankLayout,
                         scale: float, comm: Comm) -> torch.Tensor:
    """q: [R, Hq, D] replicated rows. Returns their full attention [R, Hq, D] float32, the same on every rank."""
    rows, keys = lay.rep_key_slots.shape
    if keys:
        flat = lay.rep_key_slots.reshape(-1)
        kg = _read_keys(k_cache, flat, q.dtype).view(k_cache.shape[0], rows, keys, -1)
        vg = _read_keys(v_cache, flat, q.dtype).view(v_cache.shape[0], rows, keys, -1)
        out, lse = attention_lse_rows(q, kg, vg, lay.rep_q_pos, lay.rep_key_pos, scale)
    else:
        out, lse = attention_lse_rows(q, q.new_empty((k_cache.shape[0], rows, 0, q.shape[-1])),
                                      q.new_empty((k_cache.shape[0], rows, 0, q.shape[-1])), lay.rep_q_pos,
                                      lay.rep_key_pos, scale)
    dim = q.shape[-1]
    parts = comm.all_gather(torch.cat([out, lse[..., None]], dim=-1))
    merged, _ = merge_lse([p[..., :dim] for p in parts], [p[..., dim] for p in parts])
    return merged


def ring_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lay: RankLayout, scale: float,
                   comm: Comm, out: torch.Tensor) -> None:
    """Writes the sharded rows of `lay.segments` into `out`."""
    n, me = comm.world_size, comm.rank
    segs = lay.segments
    kv_heads, dim = k_cache.shape[0], q.shape[-1]
    sizes = [sum(len(s.k_pos[r]) for s in segs) for r in range(n)]
    offsets = []  # per rank: where each segment's keys start in that rank's block
    for r in range(n):
        acc, offs = 0, []
        for s in segs:
            offs.append(acc)
            acc += len(s.k_pos[r])
        offsets.append(offs)
    slots = torch.cat([s.k_slots for s in segs])
    cur = torch.stack([_read_keys(k_cache, slots, q.dtype), _read_keys(v_cache, slots, q.dtype)])
    q_max = [int(s.q_pos.max()) if len(s.q_pos) else -1 for s in segs]
    results: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(segs)
    for stage in range(n):
        src = (me - stage) % n
        pending = None
        if stage < n - 1:
            incoming = q.new_empty((2, kv_heads, sizes[(me - stage - 1) % n], dim))
            pending = comm.ring_exchange(cur, incoming)  # gloo: completes here; NCCL: overlaps the compute below
        for i, s in enumerate(segs):
            k_pos = s.k_pos[src]
            if not len(s.q_pos) or not len(k_pos) or int(k_pos[0]) > q_max[i]:
                continue  # no query here, no key there, or every key after every query
            off = offsets[src][i]
            block = cur[:, :, off : off + len(k_pos)]
            part = attention_lse(q[s.rows], block[0], block[1], s.q_pos, k_pos, scale)
            results[i] = part if results[i] is None else merge_lse([results[i][0], part[0]],  # type: ignore[index]
                                                                   [results[i][1], part[1]])  # type: ignore[index]
        if pending is not None:
            cur = pending.wait()
    for s, res in zip(segs, results):
        if res is not None:
            out[s.rows] = res[0].to(out.dtype)


def context_parallel_kernels(base: Kernels, comm: Comm) -> Kernels:
    """`base` with attention and the KV store replaced by their context-parallel forms (the rest is per row)."""
    from dataclasses import replace  # noqa: PLC0415

    def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                        v_cache: torch.Tensor, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        lay = meta.layout  # type: ignore[attr-defined]
        out = torch.empty_like(q)
        r = lay.num_replicated
        if r:
            out[:r] = replicated_attention(q[:r], k_cache, v_cache, lay, scale, comm).to(q.dtype)
        if lay.segments:
            ring_attention(q, k_cache, v_cache, lay, scale, comm, out)
        return out

    def store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 slots: torch.Tensor) -> None:
        """Only the rows whose block this rank owns (slot >= 0); replicated rows of other ranks are not stored."""
        own = (slots >= 0).nonzero().squeeze(1)
        if own.numel() == slots.numel():
            base.store_kv(k, v, k_cache, v_cache, slots)
        elif own.numel():
            base.store_kv(k[own].contiguous(), v[own].contiguous(), k_cache, v_cache, slots[own])

    return replace(base, paged_attention=paged_attention, store_kv=store_kv, decode_layout=EXACT_LENGTH_READS,
                   backend=f"{base.backend}+context-parallel")
