"""The paged KV pool: how many blocks a byte budget buys, and the preallocated per-layer tensors.

Owned by the model runner; the block manager only ever sees block ids. One extra block (id 0) is the null block
padded key positions point at: zeroed, so masked reads of it are harmless, while the rest stays uninitialised
(untouched pages cost no RAM until a sequence writes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.config import GiB
from engine.models.config import ModelConfig
from kernels import kv_row_width


@dataclass
class KVPool:
    caches: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: K and V [kv_heads, (num_blocks + 1) * bs, row]
    num_blocks: int  # usable blocks, ids 1..num_blocks
    block_size: int
    bytes: int  # the usable blocks' bytes over all layers


def kv_bytes_per_token(cfg: ModelConfig, dtype: torch.dtype, quantized: bool) -> int:
    """K and V bytes of one token over all layers, in the cache's row format."""
    elem = 1 if quantized else dtype.itemsize
    return 2 * cfg.num_layers * cfg.num_kv_heads * kv_row_width(cfg.head_dim, quantized) * elem


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * GiB


def default_kv_budget(device: torch.device, useful_bytes: int) -> int:
    """80% of free GPU memory; on CPU what `useful_bytes` asks for, but never more than 4 GiB or 40% of free RAM."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * 0.8)
    return int(min(useful_bytes, 4 * GiB, 0.4 * _available_memory()))


def kv_budget(given: int | None, device: torch.device, tokens_wanted: int, cfg: ModelConfig, dtype: torch.dtype,
              quantized: bool) -> int:
    """The KV pool's bytes: `given` (a configured budget), else room for `tokens_wanted` tokens within the
    device's caps (`default_kv_budget`)."""
    return given or default_kv_budget(device, tokens_wanted * kv_bytes_per_token(cfg, dtype, quantized))


def allocate_kv_pool(cfg: ModelConfig, dtype: torch.dtype, device: torch.device, block_size: int, budget: int,
                     quantized: bool) -> KVPool:
    block_bytes = block_size * kv_bytes_per_token(cfg, dtype, quantized)
    num_blocks = budget // block_bytes
    if num_blocks < 1:
        raise ValueError(f"kv_cache_memory={budget} bytes is smaller than one KV block ({block_bytes} bytes)")
    shape = (cfg.num_kv_heads, (num_blocks + 1) * block_size, kv_row_width(cfg.head_dim, quantized))
    kv_dtype = torch.int8 if quantized else dtype
    caches = []
    for _ in range(cfg.num_layers):
        k = torch.empty(shape, dtype=kv_dtype, device=device)
        v = torch.empty(shape, dtype=kv_dtype, device=device)
        k[:, :block_size].zero_()
        v[:, :block_size].zero_()
        caches.append((k, v))
    return KVPool(caches, num_blocks, block_size, num_blocks * block_bytes)
