"""Chooses kernel implementations by device and availability.

Ops resolve to the torch reference implementations, except decode attention on CPU, which uses the compiled
native kernel when it builds (kernels/cpu); Triton kernels register here when their issue lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import torch

from kernels.reference import activation, attention, int8_gemm, kv_cache, norm, rotary


@dataclass(frozen=True)
class Kernels:
    rms_norm: Callable[..., torch.Tensor]
    add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    silu_and_mul: Callable[[torch.Tensor], torch.Tensor]
    apply_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    store_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]
    backend: str
    # (x, int8 weight [N, K], float32 scale [N], bias | None) -> x.dtype [.., N]
    int8_linear: Callable[..., torch.Tensor] = int8_gemm.w8a8_linear


def get_kernels(device: torch.device | str, prefer: str = "auto") -> Kernels:
    """Return the kernel set for `device`; `prefer="reference"` forces the torch implementations."""
    if prefer not in ("auto", "reference"):
        raise ValueError(f"unknown kernel backend preference {prefer!r}; expected 'auto' or 'reference'")
    device = torch.device(device)
    paged_attention, backend = attention.paged_attention, "torch-reference"
    ops = _native_cpu_ops(device, prefer)
    if ops is not None:
        from kernels.cpu.attention import make_paged_attention  # noqa: PLC0415

        paged_attention, backend = make_paged_attention(ops), "torch-reference+cpu-native-decode"
    return Kernels(
        rms_norm=norm.rms_norm,
        add_rms_norm=norm.add_rms_norm,
        silu_and_mul=activation.silu_and_mul,
        apply_rotary=rotary.apply_rotary,
        store_kv=kv_cache.store_kv,
        paged_attention=paged_attention,
        backend=backend,
        int8_linear=_int8_linear(device, prefer, ops),
    )


def _native_cpu_ops(device: torch.device, prefer: str) -> ModuleType | None:
    """The compiled CPU kernels (built on first use), or None off CPU, when forced to the reference, or when the
    build failed."""
    if prefer != "auto" or device.type != "cpu":
        return None
    from kernels.cpu import native_ops  # noqa: PLC0415

    return native_ops()


def _int8_linear(device: torch.device, prefer: str, ops: ModuleType | None) -> Callable[..., torch.Tensor]:
    """CUDA + triton: weight-only Triton GEMM (int8 weights dequantized in registers; decode reads half the
    bytes). Otherwise per-token W8A8 through torch._int_mm, which beats bf16 on VNNI CPUs; on CPU with the
    native kernels built, its quantize/dequantize passes run in C++ (bit-identical)."""
    if ops is not None:
        from kernels.cpu.int8_linear import make_w8a8_linear  # noqa: PLC0415

        return make_w8a8_linear(ops)
    if prefer == "auto" and device.type == "cuda":
        from kernels import triton as triton_kernels  # noqa: PLC0415 - triton is optional

        if triton_kernels.available():
            from kernels.triton.int8_gemm import weight_only_linear  # noqa: PLC0415

            return weight_only_linear
    return int8_gemm.w8a8_linear
