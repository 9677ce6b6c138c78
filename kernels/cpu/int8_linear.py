"""The W8A8 linear on CPU with its quantize and dequantize passes in C++ (kernels/cpu/int8_rows.cpp).

Same arithmetic as `kernels.reference.int8_gemm.w8a8_linear`, bit for bit; the integer GEMM is still
`torch._int_mm` (oneDNN VNNI). What changes is the memory traffic around it: one pass to quantize a block of
activations and one to scale the int32 result straight into the output, instead of about ten eager passes.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import torch

from kernels.reference.int8_gemm import ROW_BLOCK, int8_mm


def make_w8a8_linear(ops: ModuleType) -> Callable[..., torch.Tensor]:
    """Bind the compiled module into a function with `w8a8_linear`'s signature."""

    def w8a8_linear(x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        m, n = x2.shape[0], qweight.shape[0]
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        for i in range(0, m, ROW_BLOCK):  # blocks keep the int32 intermediate in L2 (see the reference)
            xq, xs = ops.quantize_rows(x2[i : i + ROW_BLOCK])
            ops.dequantize_rows(int8_mm(xq, qweight), scale, xs, bias, out[i : i + ROW_BLOCK])
        return out.reshape(*lead, n)

    return w8a8_linear
