"""Int8 GEMMs in Triton (CUDA; testable on CPU with TRITON_INTERPRET=1 set before triton is imported).

- `weight_only_linear`: int8 weight tiles are loaded (half the bytes of bf16) and converted to the activation
  dtype in registers right before `tl.dot`; the per-output-channel scale is applied once to the accumulator,
  which is the same sum because the scale does not depend on k. This is the decode path on GPUs, where
  every step streams all weights once.
- `int8_mm` / `w8a8_linear`: int8 x int8 dot with an exact int32 accumulator and both scales applied in the
  epilogue (activations quantized per token by the torch reference), numerically the CPU path's twin.

References: kernels/reference/int8_gemm.py. Block sizes are fixed heuristics, not autotuned.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.reference.int8_gemm import quantize_activation


@triton.jit
def _weight_only_kernel(
    x_ptr, w_ptr, s_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
            mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0,
        )
        # [BLOCK_K, BLOCK_N] tile of W^T, read straight from the [N, K] int8 weight.
        wq = tl.load(
            w_ptr + rn[None, :] * stride_wn + kk[:, None] * stride_wk,
            mask=(rn[None, :] < N) & (kk[:, None] < K), other=0,
        )
        b = wq.to(a.dtype)  # dequantize in registers (|q| <= 127 is exact in fp16/bf16/fp32)
        if IEEE:
            acc += tl.dot(a, b, input_precision="ieee")
        else:
            acc += tl.dot(a, b)
    scale = tl.load(s_ptr + rn, mask=rn < N, other=0.0)
    acc = acc * scale[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(
        y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn,
        acc.to(y_ptr.dtype.element_ty),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


@triton.jit
def _w8a8_kernel(
    xq_ptr, w_ptr, xs_ptr, ws_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
    RAW_INT32: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            xq_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
            mask=(rm[:, None] < M) & (kk[None, :] < K), other=0,
        )
        b = tl.load(
            w_ptr + rn[None, :] * stride_wn + kk[:, None] * stride_wk,
            mask=(rn[None, :] < N) & (kk[:, None] < K), other=0,
        )
        acc += tl.dot(a, b, out_dtype=tl.int32)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    y_ptrs = y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    if RAW_INT32:
        tl.store(y_ptrs, acc, mask=mask)
    else:
        xs = tl.load(xs_ptr + rm, mask=rm < M, other=0.0)
        ws = tl.load(ws_ptr + rn, mask=rn < N, other=0.0)
        out = acc.to(tl.float32) * ws[None, :] * xs[:, None]
        if HAS_BIAS:
            out += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        tl.store(y_ptrs, out.to(y_ptr.dtype.element_ty), mask=mask)


def _blocks(m: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K): tl.dot needs every dim >= 16; small M (decode) gets short, wide tiles."""
    block_m = 16 if m <= 16 else 32 if m <= 32 else 64
    return block_m, 64, 64


def _check(x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor) -> None:
    if qweight.dtype != torch.int8 or qweight.dim() != 2:
        raise ValueError(f"qweight must be a 2-D int8 [N, K] tensor, got {qweight.dtype} {tuple(qweight.shape)}")
    if x.shape[-1] != qweight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features but the weight expects {qweight.shape[1]}")
    if scale.shape != (qweight.shape[0],):
        raise ValueError(f"scale must have shape ({qweight.shape[0]},), got {tuple(scale.shape)}")


def weight_only_linear(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """y = x @ (qweight * scale).T + bias, weights dequantized inside the GEMM; returns x.dtype."""
    _check(x, qweight, scale)
    x2 = x.reshape(-1, x.shape[-1])
    m, k = x2.shape
    n = qweight.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    bm, bn, bk = _blocks(m)
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    scale32 = scale.to(torch.float32)
    _weight_only_kernel[grid](
        x2, qweight, scale32, bias if bias is not None else scale32, y,
        m, n, k,
        x2.stride(0), x2.stride(1), qweight.stride(0), qweight.stride(1), y.stride(0), y.stride(1),
        HAS_BIAS=bias is not None, IEEE=x.dtype == torch.float32,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
    )
    return y.reshape(*x.shape[:-1], n)


def _launch_w8a8(
    xq: torch.Tensor, qweight: torch.Tensor, xs: torch.Tensor | None, ws: torch.Tensor | None,
    bias: torch.Tensor | None, out_dtype: torch.dtype,
) -> torch.Tensor:
    m, k = xq.shape
    n = qweight.shape[0]
    raw = out_dtype == torch.int32
    y = torch.empty((m, n), dtype=out_dtype, device=xq.device)
    bm, bn, bk = _blocks(m)
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    dummy = y  # never read when RAW_INT32 / not HAS_BIAS
    _w8a8_kernel[grid](
        xq, qweight, xs if xs is not None else dummy, ws if ws is not None else dummy,
        bias if bias is not None else dummy, y,
        m, n, k,
        xq.stride(0), xq.stride(1), qweight.stride(0), qweight.stride(1), y.stride(0), y.stride(1),
        RAW_INT32=raw, HAS_BIAS=bias is not None,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
    )
    return y


def int8_mm(xq: torch.Tensor, qweight: torch.Tensor) -> torch.Tensor:
    """Exact int32 [M, N] = xq [M, K] @ qweight[N, K].T."""
    if xq.dtype != torch.int8 or xq.dim() != 2:
        raise ValueError(f"xq must be a 2-D int8 tensor, got {xq.dtype} {tuple(xq.shape)}")
    if qweight.dtype != torch.int8 or qweight.dim() != 2 or qweight.shape[1] != xq.shape[1]:
        raise ValueError(f"qweight must be int8 [N, {xq.shape[1]}], got {qweight.dtype} {tuple(qweight.shape)}")
    return _launch_w8a8(xq, qweight, None, None, None, torch.int32)


def w8a8_linear(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-token int8 activations x per-channel int8 weights, int32 accumulation; returns x.dtype."""
    _check(x, qweight, scale)
    x2 = x.reshape(-1, x.shape[-1])
    xq, xs = quantize_activation(x2)
    y = _launch_w8a8(xq, qweight, xs.reshape(-1), scale.to(torch.float32), bias, x.dtype)
    return y.reshape(*x.shape[:-1], qweight.shape[0])
