"""Paged attention's prefill paths against a naive float64 softmax attention.

The CPU path splits causal prefills into query blocks that skip the upper triangle; these cases cross block
edges, continue after cached context that is not block aligned, and use grouped-query heads.
"""

from __future__ import annotations

import pytest
import torch

from kernels import AttentionMetadata, PrefillSegment
from kernels.reference import attention
from kernels.reference.kv_cache import store_kv

HQ, HKV, D = 6, 2, 16


def _naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, context: int, window: int | None) -> torch.Tensor:
    """q: [n, Hq, D]; k, v: [context + n, Hkv, D] -> [n, Hq, D] in float64."""
    n, total = q.shape[0], k.shape[0]
    group = HQ // HKV
    kk = k.double().repeat_interleave(group, dim=1).transpose(0, 1)  # [Hq, total, D]
    vv = v.double().repeat_interleave(group, dim=1).transpose(0, 1)
    scores = q.double().transpose(0, 1) @ kk.transpose(1, 2) * D**-0.5  # [Hq, n, total]
    q_pos = torch.arange(context, context + n)[:, None]
    k_pos = torch.arange(total)[None, :]
    allowed = k_pos <= q_pos
    if window is not None:
        allowed &= k_pos > q_pos - window
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (scores.softmax(-1) @ vv).transpose(0, 1)


def _run(context: int, n: int, window: int | None = None, force_sdpa: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(context * 1000 + n)
    total = context + n
    q = torch.randn(n, HQ, D, generator=gen)
    k_all = torch.randn(total, HKV, D, generator=gen)
    v_all = torch.randn(total, HKV, D, generator=gen)
    slots_total = total + 40
    k_cache = torch.zeros(HKV, slots_total, D)
    v_cache = torch.zeros(HKV, slots_total, D)
    # Scatter the sequence over non-contiguous slots, as a block table would.
    slots = torch.randperm(slots_total - 1, generator=gen)[:total] + 1
    store_kv(k_all, v_all, k_cache, v_cache, slots)
    mask = None
    if window is not None:
        q_pos = torch.arange(context, total)[:, None]
        k_pos = torch.arange(total)[None, :]
        mask = (k_pos <= q_pos) & (k_pos > q_pos - window)
    seg = PrefillSegment(start=0, length=n, context_len=context, kv_slots=slots if context else None, mask=mask)
    meta = AttentionMetadata(slot_mapping=slots[context:], prefills=[seg])
    if force_sdpa:
        out = attention._prefill_sdpa(q, k_all[context:], v_all[context:], k_cache, v_cache, seg, D**-0.5, HQ // HKV)
    else:
        out = attention.paged_attention(q, k_all[context:], v_all[context:], k_cache, v_cache, meta, D**-0.5)
    return out, _naive(q, k_all, v_all, context, window)


@pytest.mark.parametrize(
    ("context", "n"),
    [(0, 1), (0, 5), (0, attention.PREFILL_BLOCK), (0, 2 * attention.PREFILL_BLOCK + 7), (37, 1), (37, 300),
     (3 * attention.PREFILL_BLOCK, attention.PREFILL_BLOCK - 1)],
)
@pytest.mark.parametrize("force_sdpa", [False, True])
def test_causal_prefill_matches_naive(context: int, n: int, force_sdpa: bool) -> None:
    out, ref = _run(context, n, force_sdpa=force_sdpa)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


def test_sliding_window_prefill_matches_naive() -> None:
    out, ref = _run(context=50, n=90, window=64)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


def test_decode_group_gathers_blocks_and_masks_padding() -> None:
    """Rows of different lengths in one group: whole blocks are gathered, the tails beyond each row's length and
    the null-block padding are masked; blocks no row owns hold NaN, so a wrong block id would show."""
    from kernels import DecodeGroup

    bs, lens = 4, [9, 3, 12]
    gen = torch.Generator().manual_seed(7)
    num_blocks = 12
    k_cache = torch.full((HKV, (num_blocks + 1) * bs, D), float("nan"))
    v_cache = torch.full((HKV, (num_blocks + 1) * bs, D), float("nan"))
    k_cache[:, :bs] = 0  # null block
    v_cache[:, :bs] = 0
    ids = torch.randperm(num_blocks, generator=gen) + 1
    tables, refs, used = [], [], 0
    q = torch.randn(len(lens), HQ, D, generator=gen)
    for row, n in enumerate(lens):
        nblk = -(-n // bs)
        blocks = ids[used:used + nblk].tolist()
        used += nblk
        # zero the whole block first (what the runner does for fresh blocks), then write the real tokens
        for b in blocks:
            k_cache[:, b * bs:(b + 1) * bs] = 0
            v_cache[:, b * bs:(b + 1) * bs] = 0
        k = torch.randn(n, HKV, D, generator=gen)
        v = torch.randn(n, HKV, D, generator=gen)
        slots = torch.tensor([blocks[p // bs] * bs + p % bs for p in range(n)])
        store_kv(k, v, k_cache, v_cache, slots)
        tables.append(blocks)
        refs.append(_naive(q[row:row + 1], k, v, context=n - 1, window=None)[0])
    nblk = max(len(t) for t in tables)
    table = torch.tensor([t + [0] * (nblk - len(t)) for t in tables])
    mask = torch.arange(nblk * bs)[None, :] < torch.tensor(lens)[:, None]
    meta = AttentionMetadata(slot_mapping=torch.empty(0, dtype=torch.long),
                             decode_groups=[DecodeGroup(start=0, end=len(lens), block_table=table, block_size=bs,
                                                        mask=mask)])
    out = attention.paged_attention(q, q[:, :HKV], q[:, :HKV], k_cache, v_cache, meta, D**-0.5)
    torch.testing.assert_close(out.double(), torch.stack(refs), atol=2e-5, rtol=1e-4)
