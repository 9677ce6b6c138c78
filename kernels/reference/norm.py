"""RMSNorm in the same operation order as Hugging Face Llama, so float32 results match it bit for bit."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    xf = x.to(torch.float32)
    var = xf.pow(2).mean(-1, keepdim=True)
    return weight * (xf * torch.rsqrt(var + eps)).to(dtype)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (norm(x + residual), x + residual); the sum becomes the next residual."""
    if residual is not None:
        x = x + residual
    return rms_norm(x, weight, eps), x
