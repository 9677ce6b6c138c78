"""Chooses kernel implementations by device and availability.

Ops resolve to the torch reference implementations, except on CPU where the compiled native kernels build
(kernels/cpu): decode attention, the int8 linear, and the fused elementwise steps for bfloat16/float16; and on
CUDA with triton installed, where every op is a Triton kernel (kernels/triton).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import Callable

import torch

from kernels.decode_layout import EXACT_LENGTH_READS, PADDED_BLOCK_READS, DecodeLayout
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
    # How the decode attention wants its rows: grouped by length over zeroed blocks (the torch path reads padded
    # blocks) or all in one call (kernels that stop at each row's length); kernels/decode_layout.py.
    decode_layout: DecodeLayout = PADDED_BLOCK_READS


def get_kernels(device: torch.device | str, prefer: str = "auto") -> Kernels:
    """Return the kernel set for `device`; `prefer="reference"` forces the torch implementations, and
    `prefer="triton"` the Triton kernels on any device (on CPU only under TRITON_INTERPRET=1: tests)."""
    if prefer not in ("auto", "reference", "triton"):
        raise ValueError(f"unknown kernel backend preference {prefer!r}; expected 'auto', 'reference' or 'triton'")
    device = torch.device(device)
    if prefer == "triton" or (prefer == "auto" and device.type == "cuda" and _triton_available()):
        return _triton_kernels()
    kernels = Kernels(
        rms_norm=norm.rms_norm,
        add_rms_norm=norm.add_rms_norm,
        silu_and_mul=activation.silu_and_mul,
        apply_rotary=rotary.apply_rotary,
        store_kv=kv_cache.store_kv,
        paged_attention=attention.paged_attention,
        backend="torch-reference",
    )
    ops = _native_cpu_ops(device, prefer)
    if ops is None:
        return replace(kernels, int8_linear=_int8_linear(device, prefer))
    return _with_native_cpu_ops(kernels, ops)


def _triton_available() -> bool:
    from kernels import triton as triton_kernels  # noqa: PLC0415 - triton is optional

    return triton_kernels.available()


def _triton_kernels() -> Kernels:
    """Every op as a Triton kernel (kernels/triton): what CUDA runs when triton is installed. The int8 linear is the
    W8A8 kernel, whose numbers are the CPU path's (per-token int8 activations, exact int32 sums, both scales in
    the same order), so a model id gives the same outputs on either device."""
    if not _triton_available():
        raise RuntimeError("kernels='triton' needs the triton package")
    from kernels.triton import attention, elementwise, int8_gemm, kv_cache as triton_kv  # noqa: PLC0415

    return Kernels(rms_norm=elementwise.rms_norm, add_rms_norm=elementwise.add_rms_norm,
                   silu_and_mul=elementwise.silu_and_mul, apply_rotary=elementwise.apply_rotary,
                   store_kv=triton_kv.store_kv, paged_attention=attention.paged_attention, backend="triton",
                   int8_linear=int8_gemm.w8a8_linear, decode_layout=EXACT_LENGTH_READS)


def _with_native_cpu_ops(kernels: Kernels, ops: ModuleType) -> Kernels:
    """The C++ kernels: decode attention (reads keys only up to each row's length), the KV store and the int8
    linear (its own packed-weight GEMM with AVX512-VNNI or AVX2, else torch._int_mm between C++ passes) everywhere they
    build; the fused elementwise kernels (bit-identical to the reference) for the activation dtypes the build covers
    (bfloat16/float16 with AVX-512, float32 on AVX2 without it)."""
    from kernels.cpu import attention as cpu_attention, elementwise, int8_linear  # noqa: PLC0415

    kernels = replace(kernels, paged_attention=cpu_attention.make_paged_attention(ops),
                      store_kv=cpu_attention.make_store_kv(ops), decode_layout=EXACT_LENGTH_READS,
                      int8_linear=int8_linear.make_w8a8_linear(ops), backend="torch-reference+cpu-native")
    if not elementwise.fused_dtypes(ops, "elementwise"):
        return kernels
    return replace(kernels, add_rms_norm=elementwise.make_add_rms_norm(ops),
                   silu_and_mul=elementwise.make_silu_and_mul(ops),
                   apply_rotary=elementwise.make_apply_rotary(ops))


def _native_cpu_ops(device: torch.device, prefer: str) -> ModuleType | None:
    """The compiled CPU kernels (built on first use), or None off CPU, when forced to the reference, or when the
    build failed."""
    if prefer != "auto" or device.type != "cpu":
        return None
    from kernels.cpu import native_ops  # noqa: PLC0415

    return native_ops()


def _int8_linear(device: torch.device, prefer: str) -> Callable[..., torch.Tensor]:
    """Per-token W8A8 through torch._int_mm, which beats bf16 on VNNI CPUs (with the native CPU kernels built,
    the whole linear runs in C++ over packed weights, bit-identical: see _with_native_cpu_ops; CUDA with triton
    takes the Triton W8A8 kernel, see _triton_kernels)."""
    return int8_gemm.w8a8_linear
