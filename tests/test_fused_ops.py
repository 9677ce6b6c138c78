"""The fused C++ elementwise kernels (kernels/cpu/fused_ops.cpp) against the torch reference, bit for bit.

They promise the reference's exact bits for bfloat16/float16 (same float operations, same roundings, torch's own
exp and sum order), so every comparison here is `torch.equal`, over shapes with vector tails and odd sizes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernels import AttentionMetadata, PrefillSegment, get_kernels
from kernels.reference import activation, attention, norm, rotary

REDUCED = [torch.bfloat16, torch.float16]


def _cpu_has_avx512() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512f" in flags and " avx512bw" in flags


@pytest.fixture(scope="module")
def ops():
    from kernels.cpu import native_ops

    module = native_ops()
    if module is None or not module.has_fused_ops():
        if _cpu_has_avx512():
            pytest.fail("this CPU has AVX-512: the fused kernels must build here")
        pytest.skip("fused kernels need AVX-512")
    return module


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("hidden", [576, 896, 2048, 100, 17])
def test_add_rms_norm_is_bit_identical(ops, dtype: torch.dtype, hidden: int) -> None:
    gen = torch.Generator().manual_seed(hidden)
    x = (torch.randn(37, hidden, generator=gen) * 3).to(dtype)
    res = torch.randn(37, hidden, generator=gen).to(dtype)
    w = (torch.rand(hidden, generator=gen) + 0.5).to(dtype)
    out, new_res = ops.fused_add_rms_norm(x, res, w, 1e-5)
    ref_out, ref_res = norm.add_rms_norm(x, res, w, 1e-5)
    assert _same(out, ref_out) and _same(new_res, ref_res)
    out, same_x = ops.fused_add_rms_norm(x, None, w, 1e-6)
    assert _same(out, norm.add_rms_norm(x, None, w, 1e-6)[0]) and same_x is x


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("inter", [1536, 4864, 100, 33])
def test_silu_and_mul_is_bit_identical(ops, dtype: torch.dtype, inter: int) -> None:
    x = (torch.randn(19, 2 * inter, generator=torch.Generator().manual_seed(inter)) * 4).to(dtype)
    assert _same(ops.fused_silu_and_mul(x), activation.silu_and_mul(x))


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("dim", [64, 128, 80, 16])
def test_rotary_on_fused_qkv_columns_is_bit_identical(ops, dtype: torch.dtype, dim: int) -> None:
    gen = torch.Generator().manual_seed(dim)
    tokens = 23
    qkv = torch.randn(tokens, 15 * dim, generator=gen).to(dtype)  # q: 9 heads, k and v: 3 heads each
    q = qkv[:, : 9 * dim].view(tokens, 9, dim)
    k = qkv[:, 9 * dim : 12 * dim].view(tokens, 3, dim)
    cos, sin = torch.randn(tokens, dim, generator=gen).to(dtype), torch.randn(tokens, dim, generator=gen).to(dtype)
    ref_q, ref_k = rotary.apply_rotary(q, k, cos, sin)
    assert _same(ops.fused_rotary(q, cos, sin), ref_q)
    assert _same(ops.fused_rotary(k, cos, sin), ref_k)


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize(("keys", "block"), [(900, 128), (128, 128), (77, 5), (1000, 1), (300, 37), (16, 16)])
def test_causal_block_softmax_is_bit_identical(ops, dtype: torch.dtype, keys: int, block: int) -> None:
    scores = (torch.randn(3, 3, block, keys, generator=torch.Generator().manual_seed(keys + block)) * 4).to(dtype)
    ref = attention.causal_block_softmax(scores.clone(), block)
    ops.causal_softmax_(scores, block)
    assert _same(scores, ref)


@pytest.mark.parametrize("dtype", REDUCED)
def test_cpu_prefill_with_native_softmax_is_bit_identical(ops, dtype: torch.dtype) -> None:
    """Whole prefill segments (fresh, and after 37 cached tokens) through the blocked CPU path."""
    from kernels.cpu.elementwise import make_block_softmax

    gen = torch.Generator().manual_seed(5)
    hq, hkv, dim, bs = 9, 3, 64, 16
    k_cache = torch.randn(hkv, 40 * bs, dim, generator=gen).to(dtype)
    v_cache = torch.randn(hkv, 40 * bs, dim, generator=gen).to(dtype)
    n1, n2, ctx = 300, 150, 37
    q = torch.randn(n1 + n2, hq, dim, generator=gen).to(dtype)
    k = k_cache[:, :n1].transpose(0, 1).contiguous()
    k = torch.cat([k, k_cache[:, 400 : 400 + n2].transpose(0, 1)])
    v = torch.cat([v_cache[:, :n1].transpose(0, 1), v_cache[:, 400 : 400 + n2].transpose(0, 1)])
    slots = torch.cat([torch.arange(400 - ctx, 400), torch.arange(400, 400 + n2)])
    meta = AttentionMetadata(slot_mapping=torch.empty(0, dtype=torch.long), prefills=[
        PrefillSegment(start=0, length=n1, context_len=0, kv_slots=None, mask=None),
        PrefillSegment(start=n1, length=n2, context_len=ctx, kv_slots=slots, mask=None),
    ])
    ref, out = torch.empty_like(q), torch.empty_like(q)
    attention.prefill_attention(q, k, v, k_cache, v_cache, meta, dim**-0.5, ref)
    attention.prefill_attention(q, k, v, k_cache, v_cache, meta, dim**-0.5, out, make_block_softmax(ops))
    assert _same(out, ref)


def test_dispatch_uses_fused_kernels_for_reduced_precision_only(ops) -> None:
    kernels = get_kernels("cpu")
    assert kernels.add_rms_norm is not norm.add_rms_norm and kernels.silu_and_mul is not activation.silu_and_mul
    gen = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(5, 96, generator=gen).to(dtype)
        w = torch.rand(96, generator=gen).to(dtype)
        got, ref = kernels.add_rms_norm(x, x, w, 1e-5), norm.add_rms_norm(x, x, w, 1e-5)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
        assert torch.equal(kernels.silu_and_mul(x), activation.silu_and_mul(x))
    ref_kernels = get_kernels("cpu", prefer="reference")
    assert ref_kernels.add_rms_norm is norm.add_rms_norm and ref_kernels.apply_rotary is rotary.apply_rotary


def test_fused_kernels_reject_float32_and_bad_shapes(ops) -> None:
    with pytest.raises(RuntimeError, match="bfloat16 or float16"):
        ops.fused_silu_and_mul(torch.randn(2, 8))
    with pytest.raises(RuntimeError, match="contiguous"):
        ops.fused_add_rms_norm(torch.randn(2, 8).bfloat16(), None, torch.ones(7).bfloat16(), 1e-5)
    with pytest.raises(RuntimeError, match="keys >= block"):
        ops.causal_softmax_(torch.randn(4, 3).bfloat16(), 4)


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_engine_prefill_in_reduced_precision_matches_the_torch_kernels(ops, checkpoints, arch: str,
                                                                       dtype: str) -> None:
    """End to end through the model: the first token of each prompt comes from prefill alone (fused norms,
    rotary, SiLU, KV store, native causal softmax), which is bit-identical to the torch kernels, so the greedy
    first tokens must agree exactly; prompts cross query blocks and KV blocks. Every prompt is longer than
    MAX_DECODE_QUERIES: shorter ones run as decode rows through the native decode kernel, which accumulates in
    float32 rather than in the model dtype (not bit-identical in bf16; checked against a naive oracle within
    tolerance in tests/test_attention.py)."""
    from engine import LLM, SamplingParams
    from engine.model_runner import MAX_DECODE_QUERIES

    lengths = (MAX_DECODE_QUERIES + 1, 17, 40, 129, 150, 260)
    prompts = [[1] + [(7 * i + 3 * j) % 250 + 5 for j in range(n)] for i, n in enumerate(lengths)]
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    firsts = {}
    for kernels in ("auto", "reference"):
        llm = LLM(checkpoints[arch], dtype=dtype, block_size=8, kernels=kernels)
        assert ("cpu-native" in llm.config_summary()["kernels"]) == (kernels == "auto")
        firsts[kernels] = [o.token_ids for o in llm.generate(prompts, params, progress=False)]
    assert firsts["auto"] == firsts["reference"]
