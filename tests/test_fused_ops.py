"""The fused C++ elementwise kernels (kernels/cpu/fused_ops.cpp) against the torch reference, bit for bit.

They promise the reference's exact bits (same float operations, same roundings, torch's own exp and sum order)
for the dtypes their build covers — bfloat16/float16 with AVX-512, float32 on AVX2 CPUs without it — so every
comparison here is on the raw bits, over shapes with vector tails and odd sizes; a dtype the build does not
cover is skipped (and the machine's CPU decides which must be covered).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernels import AttentionMetadata, PrefillSegment, get_kernels
from kernels.reference import activation, attention, norm, rotary

REDUCED = [torch.bfloat16, torch.float16]
ALL = [torch.bfloat16, torch.float16, torch.float32]


def _cpu_flags() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _expected_dtypes() -> set[torch.dtype]:
    flags = _cpu_flags()
    if " avx512f" in flags and " avx512bw" in flags:
        return set(REDUCED)
    return {torch.float32} if " avx2" in flags else set()


@pytest.fixture(scope="module")
def ops():
    from kernels.cpu import native_ops
    from kernels.cpu.elementwise import fused_dtypes

    module = native_ops()
    built = fused_dtypes(module, "elementwise") if module is not None else frozenset()
    if not built:
        if _expected_dtypes():
            pytest.fail("this CPU has AVX-512 or AVX2: the fused kernels must build here")
        pytest.skip("fused kernels need AVX-512 or AVX2")
    assert built == _expected_dtypes()
    return module


def _covered(ops, dtype: torch.dtype, kind: str = "elementwise") -> None:
    from kernels.cpu.elementwise import fused_dtypes

    if dtype not in fused_dtypes(ops, kind):
        pytest.skip(f"this CPU's build of the fused {kind} kernels does not take {dtype}")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    bits = torch.int32 if a.dtype == torch.float32 else torch.int16
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(bits), b.view(bits))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("hidden", [576, 896, 2048, 100, 17])
def test_add_rms_norm_is_bit_identical(ops, dtype: torch.dtype, hidden: int) -> None:
    _covered(ops, dtype)
    gen = torch.Generator().manual_seed(hidden)
    x = (torch.randn(37, hidden, generator=gen) * 3).to(dtype)
    res = torch.randn(37, hidden, generator=gen).to(dtype)
    w = (torch.rand(hidden, generator=gen) + 0.5).to(dtype)
    out, new_res = ops.fused_add_rms_norm(x, res, w, 1e-5)
    ref_out, ref_res = norm.add_rms_norm(x, res, w, 1e-5)
    assert _same(out, ref_out) and _same(new_res, ref_res)
    out, same_x = ops.fused_add_rms_norm(x, None, w, 1e-6)
    assert _same(out, norm.add_rms_norm(x, None, w, 1e-6)[0]) and same_x is x


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("inter", [1536, 4864, 100, 33])
def test_silu_and_mul_is_bit_identical(ops, dtype: torch.dtype, inter: int) -> None:
    _covered(ops, dtype)
    x = (torch.randn(19, 2 * inter, generator=torch.Generator().manual_seed(inter)) * 4).to(dtype)
    assert _same(ops.fused_silu_and_mul(x), activation.silu_and_mul(x))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [64, 128, 80, 16, 12])
def test_rotary_on_fused_qkv_columns_is_bit_identical(ops, dtype: torch.dtype, dim: int) -> None:
    _covered(ops, dtype)
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
    _covered(ops, dtype, "causal_softmax")
    scores = (torch.randn(3, 3, block, keys, generator=torch.Generator().manual_seed(keys + block)) * 4).to(dtype)
    ref = attention.causal_block_softmax(scores.clone(), block)
    ops.causal_softmax_(scores, block)
    assert _same(scores, ref)


@pytest.mark.parametrize("dtype", REDUCED)
def test_cpu_prefill_with_native_softmax_is_bit_identical(ops, dtype: torch.dtype) -> None:
    """Whole prefill segments (fresh, and after 37 cached tokens) through the blocked CPU path."""
    _covered(ops, dtype, "causal_softmax")
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


def test_dispatch_sends_the_build_dtypes_to_the_fused_kernels_and_keeps_the_rest_exact(ops) -> None:
    from kernels.cpu.elementwise import fused_dtypes

    kernels = get_kernels("cpu")
    assert kernels.add_rms_norm is not norm.add_rms_norm and kernels.silu_and_mul is not activation.silu_and_mul
    gen = torch.Generator().manual_seed(1)
    calls = []
    for dtype in ALL:
        for hidden in (96, 6):  # rows under 8 wide: torch sums them in another order, so the reference runs
            x = torch.randn(5, hidden, generator=gen).to(dtype)
            w = torch.rand(hidden, generator=gen).to(dtype)
            got, ref = kernels.add_rms_norm(x, x, w, 1e-5), norm.add_rms_norm(x, x, w, 1e-5)
            assert _same(got[0], ref[0]) and _same(got[1], ref[1])
            assert _same(kernels.silu_and_mul(x), activation.silu_and_mul(x))
        calls.append(dtype in fused_dtypes(ops, "elementwise"))
    assert any(calls) and not all(calls)
    ref_kernels = get_kernels("cpu", prefer="reference")
    assert ref_kernels.add_rms_norm is norm.add_rms_norm and ref_kernels.apply_rotary is rotary.apply_rotary


def test_fused_kernels_reject_other_dtypes_and_bad_shapes(ops) -> None:
    from kernels.cpu.elementwise import fused_dtypes

    covered = fused_dtypes(ops, "elementwise")
    other = next(d for d in ALL if d not in covered)
    dtype = next(iter(covered))
    with pytest.raises(RuntimeError, match="this build takes"):
        ops.fused_silu_and_mul(torch.randn(2, 8).to(other))
    with pytest.raises(RuntimeError, match="contiguous"):
        ops.fused_add_rms_norm(torch.randn(2, 8).to(dtype), None, torch.ones(7).to(dtype), 1e-5)
    if fused_dtypes(ops, "causal_softmax"):
        with pytest.raises(RuntimeError, match="keys >= block"):
            ops.causal_softmax_(torch.randn(4, 3).bfloat16(), 4)
    else:
        with pytest.raises(RuntimeError, match="needs AVX-512"):
            ops.causal_softmax_(torch.randn(4, 4).bfloat16(), 4)


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_engine_prefill_through_the_fused_kernels_matches_the_torch_kernels(ops, checkpoints, arch: str,
                                                                            dtype: str) -> None:
    """End to end through the model: the first token of each prompt comes from prefill alone (fused norms,
    rotary, SiLU, KV store, native causal softmax), which is bit-identical to the torch kernels, so the greedy
    first tokens must agree exactly; prompts cross query blocks and KV blocks. Every prompt is longer than
    MAX_DECODE_QUERIES: shorter ones run as decode rows through the native decode kernel, which accumulates in
    float32 rather than in the model dtype (not bit-identical in bf16; checked against a naive oracle within
    tolerance in tests/test_attention.py). In float32 the prefill attention is PyTorch's flash kernel rather than
    the reference's query blocks (equal up to rounding), so there the greedy tokens, not the bits, must agree."""
    from engine import LLM, SamplingParams
    from engine.step_layout import MAX_DECODE_QUERIES

    _covered(ops, getattr(torch, dtype))
    lengths = (MAX_DECODE_QUERIES + 1, 17, 40, 129, 150, 260)
    prompts = [[1] + [(7 * i + 3 * j) % 250 + 5 for j in range(n)] for i, n in enumerate(lengths)]
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    firsts = {}
    for kernels in ("auto", "reference"):
        llm = LLM(checkpoints[arch], dtype=dtype, block_size=8, kernels=kernels)
        assert ("cpu-native" in llm.config_summary()["kernels"]) == (kernels == "auto")
        firsts[kernels] = [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]
    assert firsts["auto"] == firsts["reference"]
