"""The W8A8 linear on CPU through the C++ kernels: bit for bit `kernels.reference.int8_gemm.w8a8_linear`.

Where the CPU has AVX512-VNNI (kernels/cpu/int8_gemm.cpp) or AVX2 (kernels/cpu/int8_gemm_avx2.cpp), the whole
linear is one call over a weight packed once at load (`pack_weight`; `Int8Linear` then keeps only the packed form).
VNNI, against `torch._int_mm` (oneDNN) with the C++ quantize/dequantize passes around it, on the smollm2-135m
shapes with 2 threads: 2-3x the rate at 8-16 rows (decode), ~1.3x at 32-64, about equal at 256+ rows, and 1.5-2x
on the 49152-column LM head at any row count. AVX2 (2-core EPYC, no VNNI): 160-200 GOP/s at 64-2048 rows where
`torch._int_mm` gives ~1.7, and 1.1-5x float32 `F.linear` (most at decode's few rows and on the LM head).
Elsewhere the integer GEMM is `torch._int_mm` with the two elementwise ends in C++ (kernels/cpu/int8_rows.cpp).
"""

from __future__ import annotations

from types import ModuleType

import torch

from kernels.reference.int8_gemm import ROW_BLOCK, int8_mm


class NativeW8A8Linear:
    """`w8a8_linear`'s signature, where `qweight` may instead be a weight from `pack_weight` (then `packed=True`;
    a plain weight is packed on every call: fine for one-off calls, not for a model's layers). `pack_weight` /
    `unpack_weight` are None when the packed-weight GEMM was not built."""

    def __init__(self, ops: ModuleType) -> None:
        self._ops = ops
        packs = ops.has_int8_gemm()
        self.pack_weight = ops.pack_int8_weight if packs else None
        self.unpack_weight = ops.unpack_int8_weight if packs else None  # (packed, n, k) -> [N, K] int8

    def __call__(self, x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor,
                 bias: torch.Tensor | None = None, packed: bool = False) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        n = scale.shape[0]
        if self.pack_weight is not None:
            weight = qweight if packed else self.pack_weight(qweight)
            return self._ops.int8_linear(x2, weight, n, scale, bias).reshape(*lead, n)
        if packed:
            raise ValueError("a packed weight needs the packed-weight GEMM, which did not build here")
        out = torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)
        for i in range(0, x2.shape[0], ROW_BLOCK):  # blocks keep the int32 intermediate in L2 (see the reference)
            xq, xs = self._ops.quantize_rows(x2[i : i + ROW_BLOCK])
            self._ops.dequantize_rows(int8_mm(xq, qweight), scale, xs, bias, out[i : i + ROW_BLOCK])
        return out.reshape(*lead, n)


def make_w8a8_linear(ops: ModuleType) -> NativeW8A8Linear:
    """Bind the compiled module into a callable with `w8a8_linear`'s signature."""
    return NativeW8A8Linear(ops)
