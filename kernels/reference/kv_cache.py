"""Writes new keys/values into the paged pool at their slots (slot = block * block_size + offset).

The pool of one layer is [kv_heads, num_slots, row]: head-major, so a gather of a sequence's slots yields per-head
contiguous [L, row] panels that batched matmuls consume without another copy.

Two row formats:
- float: a row is the head_dim values in the model dtype;
- int8 (`kv_cache_dtype="int8"`): a row is head_dim int8 values followed by the row's float32 scale in 4 bytes
  (symmetric, one scale per token and head, the same rounding as the W8A8 activations). Scale and values share a
  row so every kernel keeps one pointer and one stride per cache; a row is head_dim + 4 bytes instead of
  2 * head_dim (bf16), which halves the bytes decode attention streams per step.
Attention always sees the dequantized values, for the current chunk's keys too (`fake_quantize_kv`): a token's
keys are the same numbers whether they were just computed or read back from the cache, so chunking and prefix
caching do not change results.
"""

from __future__ import annotations

import torch

from kernels.reference.int8_gemm import quantize_activation

SCALE_BYTES = 4  # one float32 per row


def is_quantized(cache: torch.Tensor) -> bool:
    return cache.dtype == torch.int8


def kv_row_width(head_dim: int, quantized: bool) -> int:
    """Elements per cache row: head_dim, or head_dim int8 values + the float32 scale's bytes."""
    if quantized and head_dim % SCALE_BYTES:
        raise ValueError(f"an int8 KV cache needs head_dim divisible by {SCALE_BYTES}, got {head_dim}")
    return head_dim + SCALE_BYTES if quantized else head_dim


def quantize_kv(x: torch.Tensor) -> torch.Tensor:
    """[..., D] float -> [..., D + 4] int8 rows (values, then the float32 scale's bytes)."""
    lead, dim = x.shape[:-1], x.shape[-1]
    q, scale = quantize_activation(x.reshape(-1, dim))
    return torch.cat([q, scale.view(torch.int8)], dim=1).view(*lead, dim + SCALE_BYTES)


def dequantize_kv(rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..., D + 4] int8 rows -> [..., D] in `dtype` (values * scale in float32, then rounded once)."""
    dim = rows.shape[-1] - SCALE_BYTES
    scale = rows[..., dim:].contiguous().view(torch.float32)
    return (rows[..., :dim].to(torch.float32) * scale).to(dtype)


def fake_quantize_kv(x: torch.Tensor) -> torch.Tensor:
    """The values an int8 cache gives back for `x`: what attention must use for keys not yet read from it."""
    return dequantize_kv(quantize_kv(x), x.dtype)


def store_kv(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor
) -> None:
    """k, v: [T, Hkv, D]; caches: [Hkv, num_slots, D] (float) or [Hkv, num_slots, D + 4] (int8 rows)."""
    if is_quantized(k_cache):
        k, v = quantize_kv(k), quantize_kv(v)
    k_cache.index_copy_(1, slots, k.transpose(0, 1))
    v_cache.index_copy_(1, slots, v.transpose(0, 1))
