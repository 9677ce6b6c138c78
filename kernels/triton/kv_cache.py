"""Writing new keys and values into the paged pool by slot mapping, in Triton (reference: kernels/reference/kv_cache.py).

Float caches get the rows as they are. Int8 caches get each (token, head) row quantized symmetrically, the same
numbers as the reference: scale = max(|x|, 1e-10) / 127, values round-half-to-even(x / scale) with correctly
rounded division, then the float32 scale in the row's last 4 bytes (a row of D + 4 int8 is (D + 4) / 4 float32
words, so the scale is word D / 4 of the row). Rows with a negative slot are skipped.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.reference.kv_cache import SCALE_BYTES, is_quantized


@triton.jit
def _round_half_even(y):
    r = tl.floor(y + 0.5)
    tie = (r - y) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(tie & odd, r - 1.0, r)


@triton.jit
def _store_kv_kernel(src_ptr, cache_ptr, scale_ptr, slot_ptr, heads, slots_per_head, D, ROW,
                     QUANT: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        d = tl.arange(0, BLOCK)
        m = d < D
        x = tl.load(src_ptr + (t * heads + h) * D + d, mask=m, other=0.0)
        row = (h * slots_per_head + slot) * ROW
        if QUANT:
            xf = x.to(tl.float32)
            scale = tl.maximum(tl.max(tl.abs(xf), axis=0), 1e-10) / 127.0
            q = _round_half_even(tl.math.div_rn(xf, scale))
            tl.store(cache_ptr + row + d, q.to(tl.int8), mask=m)
            tl.store(scale_ptr + row // 4 + D // 4, scale)
        else:
            tl.store(cache_ptr + row + d, x, mask=m)


def _store(src: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> None:
    t, heads, dim = src.shape
    quant = is_quantized(cache)
    row = cache.shape[-1]
    scale_view = cache.view(torch.float32) if quant else cache
    if quant and row != dim + SCALE_BYTES:
        raise ValueError(f"int8 KV rows must be head_dim + {SCALE_BYTES} wide, got {row} for head_dim {dim}")
    _store_kv_kernel[(t, heads)](src.contiguous(), cache, scale_view, slots, heads, cache.shape[1], dim, row,
                                 QUANT=quant, BLOCK=triton.next_power_of_2(dim))


def store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slots: torch.Tensor) -> None:
    """k, v: [T, Hkv, D]; caches: [Hkv, num_slots, D] (float) or [Hkv, num_slots, D + 4] (int8 rows)."""
    if k.shape[0] == 0:
        return
    slots = slots.contiguous()
    _store(k, k_cache, slots)
    _store(v, v_cache, slots)
