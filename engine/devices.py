"""Which device and dtype a model runs in, from the user's "auto" / names and what the machine can do."""

from __future__ import annotations

import torch

from engine.models.config import ModelConfig

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available")
    return dev


def resolve_dtype(name: str, cfg: ModelConfig, device: torch.device) -> torch.dtype:
    if name != "auto":
        return DTYPES[name]
    dtype = DTYPES.get(str(cfg.torch_dtype), torch.float32)
    if device.type == "cpu" and dtype in (torch.float16, torch.bfloat16):
        # CPU fp16 GEMMs are slow and bf16 keeps the range, but only where the CPU has bf16 instructions: without
        # them (AVX2-only CPUs) a bf16 GEMM is two orders of magnitude slower than float32 (design-choices.md).
        return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
    return dtype


def cpu_has_fast_bf16() -> bool:
    """Whether the CPU has bf16 dot-product instructions (AVX512-BF16 or AMX). Not oneDNN's
    `_is_mkldnn_bf16_supported`: that is true on any AVX-512 CPU, where bf16 is converted in software and a bf16
    GEMM runs several times slower than float32."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False
