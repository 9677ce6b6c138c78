"""Writes new keys/values into the paged pool at their slots (slot = block * block_size + offset).

The pool of one layer is [kv_heads, num_slots, head_dim]: head-major, so a gather of a sequence's slots yields
per-head contiguous [L, head_dim] panels that batched matmuls consume without another copy.
"""

from __future__ import annotations

import torch


def store_kv(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor
) -> None:
    """k, v: [T, Hkv, D]; caches: [Hkv, num_slots, D]."""
    k_cache.index_copy_(1, slots, k.transpose(0, 1))
    v_cache.index_copy_(1, slots, v.transpose(0, 1))
