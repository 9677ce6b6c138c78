"""Triton int8 GEMMs against the torch references. Without a GPU they run in Triton's interpreter
(TRITON_INTERPRET=1, set before triton is imported; it has no bf16, so fp32/fp16/int8 only). Shapes stay tiny
and ragged (not multiples of the block sizes) so masking is exercised."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
import torch.nn.functional as F

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed; the int8 Triton kernels are optional", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

from kernels.reference.int8_gemm import (  # noqa: E402
    dequantize_weight,
    quantize_activation,
    quantize_weight,
    w8a8_linear as ref_w8a8_linear,
)
from kernels.triton import int8_gemm as tk  # noqa: E402

SHAPES = [(1, 40, 24), (19, 72, 70)]  # (M, K, N): a decode row; a ragged multi-tile GEMM


def _weights(n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q, s = quantize_weight(torch.randn(n, k, generator=g) * 0.1)
    return q.to(DEVICE), s.to(DEVICE)


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_int8_mm_exact(m: int, k: int, n: int) -> None:
    g = torch.Generator().manual_seed(m + k + n)
    a = torch.randint(-127, 128, (m, k), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    a[0, :] = 127
    b[0, :] = -127  # the most negative sum this K allows
    y = tk.int8_mm(a.to(DEVICE), b.to(DEVICE)).cpu()
    assert y.dtype == torch.int32
    assert torch.equal(y.to(torch.int64), a.to(torch.int64) @ b.to(torch.int64).t())


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_weight_only_gemm_matches_dequantized_reference(
    m: int, k: int, n: int, dtype: torch.dtype, tol: float, with_bias: bool
) -> None:
    q, s = _weights(n, k, seed=n)
    g = torch.Generator().manual_seed(m)
    x = torch.randn(m, k, generator=g).to(DEVICE, dtype)
    bias = torch.randn(n, generator=g).to(DEVICE, dtype) if with_bias else None
    y = tk.weight_only_linear(x, q, s, bias)
    assert y.dtype == dtype and y.shape == (m, n)
    ref = F.linear(x.float(), dequantize_weight(q, s), None if bias is None else bias.float())
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_w8a8_gemm_matches_torch_reference(m: int, k: int, n: int, dtype: torch.dtype) -> None:
    q, s = _weights(n, k, seed=n + 1)
    g = torch.Generator().manual_seed(m + 1)
    x = torch.randn(m, k, generator=g).to(DEVICE, dtype)
    bias = torch.randn(n, generator=g).to(DEVICE, dtype)
    y = tk.w8a8_linear(x, q, s, bias)
    assert y.dtype == dtype
    # Same integer sums, same scales: only the float epilogue's rounding order may differ.
    ref = ref_w8a8_linear(x.float(), q, s, bias.float())
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol)
    xq, xs = quantize_activation(x)
    assert xq.dtype == torch.int8 and xs.shape == (m, 1)


def test_kernels_reject_mismatched_shapes() -> None:
    q, s = _weights(8, 16, seed=0)
    with pytest.raises(ValueError, match="features"):
        tk.weight_only_linear(torch.randn(2, 12, device=DEVICE), q, s)
    with pytest.raises(ValueError, match="scale"):
        tk.weight_only_linear(torch.randn(2, 16, device=DEVICE), q, s[:4])


def test_dispatch_uses_triton_on_cuda_and_w8a8_on_cpu() -> None:
    from kernels import get_kernels
    from kernels.cpu import native_ops
    from kernels.reference import int8_gemm as ref

    cpu = get_kernels("cpu").int8_linear
    if native_ops() is None:
        assert cpu is ref.w8a8_linear
    else:  # the same W8A8 through the C++ kernels (bit-identical, tests/test_int8.py)
        from kernels.cpu.int8_linear import NativeW8A8Linear

        assert isinstance(cpu, NativeW8A8Linear)
    assert get_kernels("cpu", prefer="reference").int8_linear is ref.w8a8_linear
    assert get_kernels("cuda").int8_linear is tk.w8a8_linear  # the CPU path's numbers on the GPU too
    assert get_kernels("cuda", prefer="reference").int8_linear is ref.w8a8_linear
