"""Paged attention on CPU with the native decode kernel; float32 and bf16 prefill run PyTorch's fused flash
kernel (kernels/cpu/prefill_attention.py), fp16 prefill the query-block path with the native causal softmax
(kernels/cpu/elementwise.py) where it was built.

Decode rows read their keys and values in place through the block table (kernels/cpu/paged_decode.cpp), which
removes the per-layer gather of every running sequence's KV into a dense copy: several times faster than the
gather + batched matmuls or a torch.compile'd gather-and-reduce (docs/bench/design-choices.md).
"""

from __future__ import annotations

from types import ModuleType

import torch

from kernels.attention_metadata import AttentionMetadata
from kernels.cpu.elementwise import fused_dtypes, make_block_softmax, packed_heads
from kernels.cpu.prefill_attention import flash_available, flash_prefill
from kernels.reference.attention import causal_block_softmax, prefill_attention
from kernels.reference.kv_cache import store_kv as reference_store_kv

# Prefill dtypes that run on PyTorch's flash kernel: faster than the query-block path for float32 and bf16 on the
# CPUs measured; fp16 stays on the query-block path, which was faster (docs/bench/design-choices.md).
FLASH_DTYPES = (torch.float32, torch.bfloat16)


def make_paged_attention(ops: ModuleType):
    """Bind the compiled module (from `kernels.cpu.native_ops()`) into a `paged_attention` with the reference
    signature."""
    block_softmax = make_block_softmax(ops) if fused_dtypes(ops, "causal_softmax") else causal_block_softmax
    flash = flash_available()

    def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                        v_cache: torch.Tensor, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        out = torch.empty_like(q)
        for g in meta.decode_groups:
            ops.paged_decode_attention(q[g.start : g.end].contiguous(), k_cache, v_cache, g.block_table, g.kv_lens,
                                       g.block_size, scale, g.window or 0, out[g.start : g.end])
        causal = flash_prefill if flash and q.dtype in FLASH_DTYPES else None
        prefill_attention(q, k, v, k_cache, v_cache, meta, scale, out, block_softmax, causal)
        return out

    return paged_attention


def make_store_kv(ops: ModuleType):
    """`store_kv` through the C++ row copy (kernels/cpu/kv_store.cpp); other layouts take the torch path."""

    def store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 slots: torch.Tensor) -> None:
        if packed_heads(k) and packed_heads(v) and k_cache.is_contiguous() and v_cache.is_contiguous():
            ops.store_kv_(k, v, k_cache, v_cache, slots)
        else:
            reference_store_kv(k, v, k_cache, v_cache, slots)

    return store_kv
