"""What is batch-invariant, checked bit for bit: a row's result must not depend on the other rows of the call.

The README's determinism section states exactly this: the int8 linear (int32 accumulation, per-token activation
scales) and decode attention (each row reads only its own keys, in a fixed order) are invariant; float GEMMs
and prefill attention (whose shapes follow the chunking the token budget and the other requests impose) are not.
"""

from __future__ import annotations

import pytest
import torch

from kernels import get_kernels
from kernels.reference.int8_gemm import quantize_weight


@pytest.mark.parametrize("backend", ["auto", "reference"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_linear_rows_do_not_depend_on_the_batch(backend, dtype):
    k = get_kernels("cpu", prefer=backend)
    torch.manual_seed(0)
    qweight, scale = quantize_weight(torch.randn(200, 96))
    bias = torch.randn(200)
    weight = qweight  # the native GEMM packs a plain weight per call: the same numerics as a packed one
    x = torch.randn(67, 96).to(dtype)
    full = k.int8_linear(x, weight, scale, bias)
    for rows in ([5], [0, 1, 2], list(range(9, 40))):
        assert torch.equal(k.int8_linear(x[rows], weight, scale, bias), full[rows])


def test_native_decode_attention_rows_do_not_depend_on_the_batch():
    from kernels.cpu import native_ops

    ops = native_ops()
    if ops is None:
        pytest.skip("the native CPU kernels did not build here")
    torch.manual_seed(1)
    bs, kv_heads, dim = 8, 2, 32
    k_cache, v_cache = torch.randn(kv_heads, 40 * bs, dim), torch.randn(kv_heads, 40 * bs, dim)
    q = torch.randn(12, 4, dim)
    tables = torch.randint(0, 40, (12, 6))
    lens = torch.randint(1, 6 * bs + 1, (12,))
    out = torch.empty_like(q)
    ops.paged_decode_attention(q, k_cache, v_cache, tables, lens, bs, 0.2, 0, out)
    for r in (0, 7, 11):
        one = torch.empty_like(q[r : r + 1])
        ops.paged_decode_attention(q[r : r + 1].contiguous(), k_cache, v_cache, tables[r : r + 1].contiguous(),
                                   lens[r : r + 1].contiguous(), bs, 0.2, 0, one)
        assert torch.equal(one, out[r : r + 1])
