"""The layer's elementwise steps in Triton, one pass each: residual add + RMSNorm, SiLU(gate) * up, rotary.

Each follows its torch reference's operation order (kernels/reference/norm.py, activation.py, rotary.py): the sum
is formed in the activation dtype, statistics in float32, the normalised row rounded to the activation dtype
before the weight multiplies it. The rotary kernel applies cos/sin tables as given, so Llama 3 frequency scaling
(and any other rope variant) lives in the tables (engine/models/rotary.py), not here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, sum_ptr, H, eps, HAS_RESIDUAL: tl.constexpr,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * H + cols, mask=mask, other=0.0)
        tl.store(sum_ptr + row * H + cols, x, mask=mask)
    xf = x.to(tl.float32)
    var = tl.sum(xf * xf, axis=0) / H
    normed = (xf * (1.0 / tl.sqrt(var + eps))).to(x.dtype)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(x.dtype)
    tl.store(out_ptr + row * H + cols, w * normed, mask=mask)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(norm(x + residual), x + residual), like kernels.reference.norm.add_rms_norm."""
    h = x.shape[-1]
    x2 = x.reshape(-1, h).contiguous()
    out = torch.empty_like(x2)
    total = torch.empty_like(x2) if residual is not None else x2
    r2 = residual.reshape(-1, h).contiguous() if residual is not None else x2
    if x2.shape[0]:
        _add_rms_norm_kernel[(x2.shape[0],)](x2, r2, weight, out, total, h, eps, HAS_RESIDUAL=residual is not None,
                                             BLOCK=triton.next_power_of_2(h))
    return out.view(x.shape), total.view(x.shape)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return add_rms_norm(x, None, weight, eps)[0]


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, inter, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    gate = tl.load(x_ptr + row * 2 * inter + cols, mask=mask, other=0.0)
    up = tl.load(x_ptr + row * 2 * inter + inter + cols, mask=mask, other=0.0)
    g = gate.to(tl.float32)
    silu = (g / (1.0 + tl.exp(-g))).to(gate.dtype)
    tl.store(out_ptr + row * inter + cols, silu * up, mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up over a fused [.., 2 * I] projection output."""
    inter = x.shape[-1] // 2
    x2 = x.reshape(-1, 2 * inter).contiguous()
    out = torch.empty((x2.shape[0], inter), dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(inter))
    if x2.shape[0]:
        _silu_and_mul_kernel[(x2.shape[0], triton.cdiv(inter, block))](x2, out, inter, BLOCK=block)
    return out.view(*x.shape[:-1], inter)


@triton.jit
def _rotary_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, heads, D, HALF, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    m = i < HALF
    base = (t * heads + h) * D
    x1 = tl.load(x_ptr + base + i, mask=m, other=0.0)
    x2 = tl.load(x_ptr + base + HALF + i, mask=m, other=0.0)
    c1 = tl.load(cos_ptr + t * D + i, mask=m, other=0.0).to(x1.dtype)
    c2 = tl.load(cos_ptr + t * D + HALF + i, mask=m, other=0.0).to(x1.dtype)
    s1 = tl.load(sin_ptr + t * D + i, mask=m, other=0.0).to(x1.dtype)
    s2 = tl.load(sin_ptr + t * D + HALF + i, mask=m, other=0.0).to(x1.dtype)
    tl.store(out_ptr + base + i, x1 * c1 + (-x2) * s1, mask=m)
    tl.store(out_ptr + base + HALF + i, x2 * c2 + x1 * s2, mask=m)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.shape[0]:
        d = x.shape[-1]
        _rotary_kernel[(x.shape[0], x.shape[1])](x, cos, sin, out, x.shape[1], d, d // 2,
                                                 BLOCK=triton.next_power_of_2(d // 2))
    return out


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                 sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [T, Hq, D], k: [T, Hkv, D], cos/sin: [T, D] (half-split layout, as the reference)."""
    cos, sin = cos.contiguous(), sin.contiguous()
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
