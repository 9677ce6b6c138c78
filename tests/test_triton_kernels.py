"""Every Triton kernel of the GPU path against its torch reference. Without a GPU they run in Triton's interpreter
(TRITON_INTERPRET=1, set before triton is imported; no bf16 there: fp32, fp16 and int8). Shapes are small and
ragged: odd sizes, lengths on and next to block boundaries, GQA ratios 1/2/4/8, float and int8 KV rows."""

from __future__ import annotations

import importlib.util
import os
import random

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed; the Triton kernels are optional", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

from kernels.reference import activation, kv_cache as ref_kv, norm, rotary  # noqa: E402
from kernels.triton import attention as ta, elementwise as te, kv_cache as tkv  # noqa: E402

F32_TOL = 1e-5
# bf16 runs only on a GPU (Triton's interpreter has no bf16): scripts/gpu_check.sh.
BF16 = pytest.param(torch.bfloat16, 2e-2, marks=pytest.mark.skipif(DEVICE == "cpu", reason="no bf16 in Triton's "
                                                                                             "CPU interpreter"))


def _rand(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(DEVICE, dtype)


# ---- elementwise ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows,hidden", [(1, 64), (7, 37), (33, 96)])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, F32_TOL), (torch.float16, 2e-3), BF16])
def test_add_rms_norm(rows, hidden, with_residual, dtype, tol):
    x, r, w = _rand(rows, hidden, seed=1, dtype=dtype), _rand(rows, hidden, seed=2, dtype=dtype), _rand(hidden, seed=3,
                                                                                                      dtype=dtype)
    out, total = te.add_rms_norm(x, r if with_residual else None, w, 1e-6)
    ref_out, ref_total = norm.add_rms_norm(x, r if with_residual else None, w, 1e-6)
    torch.testing.assert_close(out, ref_out, atol=tol, rtol=tol)
    torch.testing.assert_close(total, ref_total, atol=0, rtol=0)  # the sum is one rounding in both


@pytest.mark.parametrize("rows,inter", [(1, 16), (5, 37), (3, 1100)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, F32_TOL), (torch.float16, 2e-3), BF16])
def test_silu_and_mul(rows, inter, dtype, tol):
    x = _rand(rows, 2 * inter, seed=inter, dtype=dtype)
    torch.testing.assert_close(te.silu_and_mul(x), activation.silu_and_mul(x), atol=tol, rtol=tol)


@pytest.mark.parametrize("tokens,hq,hkv,dim", [(1, 4, 4, 16), (9, 8, 2, 32), (5, 6, 1, 80)])
def test_rotary_with_llama3_scaled_tables(tokens, hq, hkv, dim):
    from types import SimpleNamespace

    from engine.models.rotary import rotary_tables

    cfg = SimpleNamespace(head_dim=dim, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})  # the fields rotary_tables reads
    cos, sin = rotary_tables(cfg, 600, torch.float32, torch.device(DEVICE))
    pos = torch.tensor(random.Random(tokens).sample(range(600), tokens), device=DEVICE)
    q, k = _rand(tokens, hq, dim, seed=4), _rand(tokens, hkv, dim, seed=5)
    got = te.apply_rotary(q, k, cos[pos], sin[pos])
    want = rotary.apply_rotary(q, k, cos[pos], sin[pos])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=F32_TOL, rtol=0)


# ---- KV store ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("tokens,hkv,dim", [(1, 1, 16), (11, 2, 32), (5, 8, 64)])
def test_store_kv_by_slot_mapping(quantized, tokens, hkv, dim):
    width = ref_kv.kv_row_width(dim, quantized)
    cache_dtype = torch.int8 if quantized else torch.float32
    slots = torch.tensor(random.Random(tokens).sample(range(96), tokens), device=DEVICE)
    k, v = _rand(tokens, hkv, dim, seed=6), _rand(tokens, hkv, dim, seed=7)
    k[0, 0, :] = 0.0  # an all-zero row: the minimum scale, zeros
    ours = [torch.zeros(hkv, 96, width, dtype=cache_dtype, device=DEVICE) for _ in range(2)]
    refs = [torch.zeros(hkv, 96, width, dtype=cache_dtype, device=DEVICE) for _ in range(2)]
    tkv.store_kv(k, v, *ours, slots)
    ref_kv.store_kv(k, v, *refs, slots)
    assert torch.equal(ours[0], refs[0]) and torch.equal(ours[1], refs[1])  # int8 rows and scales: exact


# ---- attention ---------------------------------------------------------------------------------------------------
def _pool(hkv: int, dim: int, blocks: int, bs: int, quantized: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A pool filled with random rows (int8 rows quantized by the reference)."""
    k, v = _rand(blocks * bs, hkv, dim, seed=seed), _rand(blocks * bs, hkv, dim, seed=seed + 1)
    width = ref_kv.kv_row_width(dim, quantized)
    dtype = torch.int8 if quantized else torch.float32
    caches = [torch.zeros(hkv, blocks * bs, width, dtype=dtype, device=DEVICE) for _ in range(2)]
    ref_kv.store_kv(k, v, *caches, torch.arange(blocks * bs, device=DEVICE))
    return caches[0], caches[1]


def _naive(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor, q_pos: torch.Tensor,
           k_pos: torch.Tensor, scale: float, window: int | None = None) -> torch.Tensor:
    """float64 attention of q [n, Hq, D] over the keys at `slots` (positions k_pos), causal by position."""
    kk, vv = k_cache[:, slots], v_cache[:, slots]
    if ref_kv.is_quantized(k_cache):
        kk, vv = ref_kv.dequantize_kv(kk, torch.float32), ref_kv.dequantize_kv(vv, torch.float32)
    group = q.shape[1] // kk.shape[0]
    kk = kk.double().repeat_interleave(group, 0)
    vv = vv.double().repeat_interleave(group, 0)
    s = torch.einsum("nhd,hld->hnl", q.double() * scale, kk)
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= k_pos[None, :] > q_pos[:, None] - window
    s = s.masked_fill(~visible[None], float("-inf"))
    return torch.einsum("hnl,hld->nhd", s.softmax(-1), vv)


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("quantized", [False, True])
def test_paged_decode_matches_attention_over_the_block_table(group, quantized):
    hkv, dim, bs = 2, 16, 8
    lens = [1, 7, 8, 9, 16, 17, 300]  # one row; block boundaries; more than one split (SPLIT_KEYS = 256)
    blocks = sum(-(-n // bs) for n in lens) + 3
    k_cache, v_cache = _pool(hkv, dim, blocks, bs, quantized, seed=group)
    ids = list(range(1, blocks))
    random.Random(group).shuffle(ids)  # blocks in no particular order
    nblk = max(-(-n // bs) for n in lens)
    table = torch.zeros(len(lens), nblk, dtype=torch.long)
    for r, n in enumerate(lens):
        for j in range(-(-n // bs)):
            table[r, j] = ids.pop()
    q = _rand(len(lens), hkv * group, dim, seed=9)
    out = ta.paged_decode(q, k_cache, v_cache, table.to(DEVICE), torch.tensor(lens, device=DEVICE), bs, 0.25)
    for r, n in enumerate(lens):
        pos = torch.arange(n)
        slots = (table[r, pos // bs] * bs + pos % bs).to(DEVICE)
        want = _naive(q[r : r + 1], k_cache, v_cache, slots, torch.tensor([n - 1]), pos, 0.25)
        torch.testing.assert_close(out[r : r + 1].double(), want, atol=F32_TOL, rtol=0)


def test_paged_decode_several_query_tokens_of_one_sequence_and_a_window():
    """A verify step: k + 1 rows of one sequence, each seeing keys up to its own position; and a sliding window."""
    hkv, group, dim, bs = 2, 2, 32, 16
    k_cache, v_cache = _pool(hkv, dim, 8, bs, False, seed=3)
    table = torch.tensor([[5, 2, 7, 1]] * 4)
    lens = torch.tensor([50, 51, 52, 53])
    q = _rand(4, hkv * group, dim, seed=10)
    for window in (None, 20):
        out = ta.paged_decode(q, k_cache, v_cache, table.to(DEVICE), lens.to(DEVICE), bs, 0.2, window)
        for r in range(4):
            n = int(lens[r])
            pos = torch.arange(n)
            slots = (table[r, pos // bs] * bs + pos % bs).to(DEVICE)
            want = _naive(q[r : r + 1], k_cache, v_cache, slots, torch.tensor([n - 1]), pos, 0.2, window)
            torch.testing.assert_close(out[r : r + 1].double(), want, atol=F32_TOL, rtol=0)


@pytest.mark.parametrize("ctx,n", [(0, 1), (0, 17), (16, 16), (13, 40)])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("quantized", [False, True])
def test_paged_prefill_after_cached_context(ctx, n, group, quantized):
    hkv, dim, bs = 2, 16, 8
    blocks = -(-(ctx + n) // bs) + 2
    k_cache, v_cache = _pool(hkv, dim, blocks, bs, quantized, seed=ctx + n)
    ids = torch.randperm(blocks - 1, generator=torch.Generator().manual_seed(n))[: -(-(ctx + n) // bs)] + 1
    pos = torch.arange(ctx + n)
    slots = (ids[pos // bs] * bs + pos % bs).to(DEVICE)
    q = _rand(n, hkv * group, dim, seed=11)
    out = ta.paged_prefill(q, k_cache, v_cache, slots, ctx, 0.3)
    want = _naive(q, k_cache, v_cache, slots, torch.arange(ctx, ctx + n), pos, 0.3)
    torch.testing.assert_close(out.double(), want, atol=F32_TOL, rtol=0)


@pytest.mark.parametrize("quantized", [False, True])
def test_varlen_prefill_runs_every_segment_of_a_step_in_one_launch(quantized):
    """Segments of different lengths and contexts (none, block-aligned, mid-block) packed after two rows that are
    not prefill (decode rows' places: left as they were), in one launch; each segment equals its own naive
    attention, and rows outside segments are untouched."""
    hkv, group, dim, bs = 2, 2, 16, 8
    specs = [(0, 19), (16, 5), (13, 33), (7, 1)]  # (context, length)
    blocks = sum(-(-(c + n) // bs) for c, n in specs) + 2
    k_cache, v_cache = _pool(hkv, dim, blocks, bs, quantized, seed=5)
    ids = (torch.randperm(blocks - 1, generator=torch.Generator().manual_seed(3)) + 1).tolist()
    q = _rand(2 + sum(n for _, n in specs), hkv * group, dim, seed=12)
    out = torch.full_like(q, 7.0)
    segments, wants, row0, used = [], [], 2, 0
    for ctx, n in specs:
        nblk = -(-(ctx + n) // bs)
        own = torch.tensor(ids[used : used + nblk])
        used += nblk
        pos = torch.arange(ctx + n)
        slots = (own[pos // bs] * bs + pos % bs).to(DEVICE)
        segments.append((row0, n, ctx, slots))
        wants.append((row0, n, _naive(q[row0 : row0 + n], k_cache, v_cache, slots, torch.arange(ctx, ctx + n), pos,
                                      0.3)))
        row0 += n
    assert ta.varlen_prefill(q, k_cache, v_cache, segments, 0.3, out) is out
    for r0, n, want in wants:
        torch.testing.assert_close(out[r0 : r0 + n].double(), want, atol=F32_TOL, rtol=0)
    assert torch.all(out[:2] == 7.0)


# ---- dispatch and the engine end to end --------------------------------------------------------------------------
def test_cuda_dispatches_every_op_to_the_triton_kernels_and_cpu_is_unchanged():
    from kernels import get_kernels
    from kernels.triton import int8_gemm

    gpu = get_kernels("cuda")
    assert gpu.backend == "triton"
    assert (gpu.add_rms_norm, gpu.silu_and_mul, gpu.apply_rotary, gpu.store_kv, gpu.paged_attention,
            gpu.int8_linear) == (te.add_rms_norm, te.silu_and_mul, te.apply_rotary, tkv.store_kv,
                                 ta.paged_attention, int8_gemm.w8a8_linear)
    assert not gpu.decode_layout.reads_padding
    assert "triton" not in get_kernels("cpu").backend
    assert get_kernels("cuda", prefer="reference").backend == "torch-reference"


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "int8"])
def test_engine_on_the_triton_kernels_gives_the_reference_kernels_tokens(checkpoints, kv_cache_dtype):
    """The whole engine with every op on the Triton kernels (what CUDA runs; here on CPU in the interpreter):
    chunked prefill with cached context, decode across blocks, GQA. Greedy tokens equal the torch kernels'."""
    from engine import LLM, SamplingParams

    rng = random.Random(3)
    prompts = [[0] + [rng.randrange(2, 384) for _ in range(n)] for n in (4, 19, 40)]
    params = SamplingParams(max_tokens=6, min_tokens=6, ignore_eos=True)
    kwargs = dict(dtype="float32", block_size=8, max_num_batched_tokens=32, kv_cache_dtype=kv_cache_dtype)
    want = [o.outputs[0].token_ids for o in LLM(checkpoints["llama"], kernels="reference", **kwargs).generate(
        prompts, params, progress=False)]
    llm = LLM(checkpoints["llama"], kernels="triton", **kwargs)
    assert llm.config_summary()["kernels"] == "triton"
    assert [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)] == want
