"""Chooses kernel implementations by device and availability.

Today every op resolves to the torch reference implementation; Triton kernels register here when their issue lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from kernels.reference import activation, attention, kv_cache, norm, rotary


@dataclass(frozen=True)
class Kernels:
    rms_norm: Callable[..., torch.Tensor]
    add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    silu_and_mul: Callable[[torch.Tensor], torch.Tensor]
    apply_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    store_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]
    backend: str


def get_kernels(device: torch.device | str, prefer: str = "auto") -> Kernels:
    """Return the kernel set for `device`; `prefer="reference"` forces the torch implementations."""
    if prefer not in ("auto", "reference"):
        raise ValueError(f"unknown kernel backend preference {prefer!r}; expected 'auto' or 'reference'")
    return Kernels(
        rms_norm=norm.rms_norm,
        add_rms_norm=norm.add_rms_norm,
        silu_and_mul=activation.silu_and_mul,
        apply_rotary=rotary.apply_rotary,
        store_kv=kv_cache.store_kv,
        paged_attention=attention.paged_attention,
        backend="torch-reference",
    )
