"""Writes new keys/values into the paged pool at their slots (slot = block * block_size + offset)."""

from __future__ import annotations

import torch


def store_kv(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor
) -> None:
    """k, v: [T, Hkv, D]; caches: [num_blocks, block_size, Hkv, D]."""
    heads, dim = k.shape[1], k.shape[2]
    k_cache.view(-1, heads, dim).index_copy_(0, slots, k)
    v_cache.view(-1, heads, dim).index_copy_(0, slots, v)
