"""Int8 linear layers in plain torch: the CPU fast path and the reference every int8 kernel is tested against.

Weights are int8 with one symmetric scale per output channel. Two ways to multiply by them:

- `w8a8_linear` (the CPU path): activations are quantized per token at run time, the int8 x int8 product is
  accumulated exactly in int32 (`torch._int_mm`, oneDNN VNNI on x86) and both scales are applied afterwards.
  Every row is quantized on its own and the integer sum is exact, so a token's output never depends on
  which other tokens share its batch.
- `weight_only_linear`: dequantize the weight and multiply in floating point; the numerical reference for
  kernels that dequantize weights in registers (kernels/triton/int8_gemm.py).
"""

from __future__ import annotations

import torch

QMAX = 127  # symmetric: -128 is never produced, so negation cannot overflow
# Rows per block in w8a8_linear (the best of 64/128/256/512 on the smollm2-135m shapes: docs/bench/design-choices.md).
ROW_BLOCK = 256
# Rows whose absolute maximum is below this quantize to zeros instead of dividing by (near) zero.
_MIN_AMAX = 1e-10


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, K] float -> (int8 [N, K], float32 scale [N]) with weight ~= q * scale[:, None]."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D [out, in] weight, got shape {tuple(weight.shape)}")
    w = weight.detach().to(torch.float32)
    amax = w.abs().amax(dim=1).clamp(min=_MIN_AMAX)
    scale = amax / QMAX
    q = torch.round(w / scale[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
    return q, scale


def dequantize_weight(qweight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (qweight.to(torch.float32) * scale.to(torch.float32)[:, None]).to(dtype)


def quantize_activation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[M, K] float -> (int8 [M, K], float32 scale [M, 1]), one symmetric scale per row (token).

    Written as few full passes over x as eager torch allows: this runs before every int8 GEMM.
    """
    xf = x.to(torch.float32, copy=True)
    scale = xf.abs().amax(dim=-1, keepdim=True).clamp_(min=_MIN_AMAX).div_(QMAX)
    # |x / scale| <= 127 up to one rounding step, and round() of 127.00001 is 127: no clamp needed.
    return xf.div_(scale).round_().to(torch.int8), scale


def _int_mm_supported(m: int, k: int, n: int, device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    # cuBLASLt int8 GEMM shape rules.
    return device.type == "cuda" and m > 16 and k % 8 == 0 and n % 8 == 0


def int8_mm(xq: torch.Tensor, qweight: torch.Tensor) -> torch.Tensor:
    """Exact int32 [M, N] = xq [M, K] @ qweight[N, K].T."""
    m, k = xq.shape
    n = qweight.shape[0]
    if _int_mm_supported(m, k, n, xq.device):
        # Passing the [N, K] weight transposed (not a contiguous [K, N] copy) lets oneDNN take its
        # fast path for small M (docs/bench/design-choices.md).
        return torch._int_mm(xq, qweight.t())
    # float64 holds every int32 sum exactly (|sum| <= 127 * 127 * K << 2**53).
    return (xq.to(torch.float64) @ qweight.to(torch.float64).t()).to(torch.int32)


def _flatten(x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    return x.reshape(-1, x.shape[-1]), tuple(x.shape[:-1])


def w8a8_linear(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """y = x @ (qweight * scale).T + bias with x quantized per token; returns x.dtype.

    Rows go through in blocks of ROW_BLOCK so the float32 epilogue's intermediates stay in L2 instead of streaming
    through memory on every pass (docs/bench/design-choices.md).
    """
    x2, lead = _flatten(x)
    m, n = x2.shape[0], qweight.shape[0]
    if m <= ROW_BLOCK:  # decode-sized: every saved op counts (~2 us each)
        return _w8a8_block(x2, qweight, scale, bias).to(x.dtype).reshape(*lead, n)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    for i in range(0, m, ROW_BLOCK):
        out[i : i + ROW_BLOCK].copy_(_w8a8_block(x2[i : i + ROW_BLOCK], qweight, scale, bias))
    return out.reshape(*lead, n)


def _w8a8_block(x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """float32 result for one block of rows; the same float ops in the same order for every block size, so the
    blocked and unblocked paths agree bit for bit."""
    xq, xs = quantize_activation(x)
    y = int8_mm(xq, qweight).to(torch.float32).mul_(scale).mul_(xs)
    if bias is not None:
        y += bias
    return y


def weight_only_linear(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """y = x @ (qweight * scale).T + bias in float32; the reference for dequantize-in-GEMM kernels."""
    x2, lead = _flatten(x)
    y = x2.to(torch.float32) @ dequantize_weight(qweight, scale).t()
    if bias is not None:
        y += bias.to(torch.float32)
    return y.to(x.dtype).reshape(*lead, qweight.shape[0])
