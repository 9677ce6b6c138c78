"""Paged attention's prefill paths against a naive float64 softmax attention.

Three causal paths: the query-block path (blocks that skip the upper triangle), SDPA with a spelled-out mask,
and the CPU backend's flash path (PyTorch's fused kernel; with cached context, two calls merged by log-sum-exp).
These cases cross block edges, continue after cached context that is not block aligned, and use grouped-query
heads.
"""

from __future__ import annotations

import pytest
import torch

from kernels import AttentionMetadata, PrefillSegment
from kernels.reference import attention
from kernels.reference.kv_cache import SCALE_BYTES, fake_quantize_kv, quantize_kv, store_kv

HQ, HKV, D = 6, 2, 16


def _naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, context: int, window: int | None) -> torch.Tensor:
    """q: [n, Hq, D]; k, v: [context + n, Hkv, D] -> [n, Hq, D] in float64."""
    n, total = q.shape[0], k.shape[0]
    group = HQ // HKV
    kk = k.double().repeat_interleave(group, dim=1).transpose(0, 1)  # [Hq, total, D]
    vv = v.double().repeat_interleave(group, dim=1).transpose(0, 1)
    scores = q.double().transpose(0, 1) @ kk.transpose(1, 2) * D**-0.5  # [Hq, n, total]
    q_pos = torch.arange(context, context + n)[:, None]
    k_pos = torch.arange(total)[None, :]
    allowed = k_pos <= q_pos
    if window is not None:
        allowed &= k_pos > q_pos - window
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (scores.softmax(-1) @ vv).transpose(0, 1)


def _run(context: int, n: int, window: int | None = None, path: str = "blocked",
         int8_kv: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(context * 1000 + n)
    total = context + n
    q = torch.randn(n, HQ, D, generator=gen)
    k_all = torch.randn(total, HKV, D, generator=gen)
    v_all = torch.randn(total, HKV, D, generator=gen)
    slots_total = total + 40
    row, kv_dtype = (D + SCALE_BYTES, torch.int8) if int8_kv else (D, torch.float32)
    k_cache = torch.zeros(HKV, slots_total, row, dtype=kv_dtype)
    v_cache = torch.zeros(HKV, slots_total, row, dtype=kv_dtype)
    # Scatter the sequence over non-contiguous slots, as a block table would.
    slots = torch.randperm(slots_total - 1, generator=gen)[:total] + 1
    store_kv(k_all, v_all, k_cache, v_cache, slots)
    mask = None
    if window is not None:
        q_pos = torch.arange(context, total)[:, None]
        k_pos = torch.arange(total)[None, :]
        mask = (k_pos <= q_pos) & (k_pos > q_pos - window)
    seg = PrefillSegment(start=0, length=n, context_len=context, kv_slots=slots if context else None, mask=mask)
    meta = AttentionMetadata(slot_mapping=slots[context:], prefills=[seg])
    if path == "sdpa":
        out = attention._prefill_sdpa(q, k_all[context:], v_all[context:], k_cache, v_cache, seg, D**-0.5, HQ // HKV)
    elif path == "flash":
        from kernels.cpu.prefill_attention import flash_prefill

        out = flash_prefill(q, k_all[context:], v_all[context:], k_cache, v_cache, seg, D**-0.5)
    else:
        out = attention.paged_attention(q, k_all[context:], v_all[context:], k_cache, v_cache, meta, D**-0.5)
    if int8_kv:  # every key, cached or of this chunk, is attended as the int8 cache gives it back
        k_all, v_all = fake_quantize_kv(k_all), fake_quantize_kv(v_all)
    return out, _naive(q, k_all, v_all, context, window)


@pytest.mark.parametrize(
    ("context", "n"),
    [(0, 1), (0, 5), (0, attention.PREFILL_BLOCK), (0, 2 * attention.PREFILL_BLOCK + 7), (37, 1), (37, 300),
     (3 * attention.PREFILL_BLOCK, attention.PREFILL_BLOCK - 1)],
)
@pytest.mark.parametrize("path", ["blocked", "sdpa", "flash"])
def test_causal_prefill_matches_naive(context: int, n: int, path: str) -> None:
    out, ref = _run(context, n, path=path)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(("context", "n"), [(0, 2 * attention.PREFILL_BLOCK + 7), (37, 300)])
@pytest.mark.parametrize("path", ["blocked", "sdpa", "flash"])
def test_int8_kv_prefill_attends_over_dequantized_keys(context: int, n: int, path: str) -> None:
    """Whether a key comes from the cache (context) or from this chunk, attention sees its dequantized value, so
    chunking and prefix caching cannot change results."""
    out, ref = _run(context, n, path=path, int8_kv=True)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)
    plain, _ = _run(context, n, path=path)
    assert not torch.allclose(out, plain, atol=1e-6)  # the int8 path really ran


def test_sliding_window_prefill_matches_naive() -> None:
    out, ref = _run(context=50, n=90, window=64)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("context", [0, 37])
def test_native_cpu_bf16_prefill_runs_on_the_flash_kernel(context: int) -> None:
    """bf16 prefill goes through PyTorch's flash kernel, as float32 does (faster than the query-block path on
    every CPU level measured: docs/bench/design-choices.md), and stays within bf16's rounding of the exact
    result; fp16 keeps the query-block path."""
    from kernels.cpu import native_ops
    from kernels.cpu.attention import make_paged_attention
    from kernels.cpu.prefill_attention import flash_available, flash_prefill

    ops = native_ops()
    if ops is None or not flash_available():
        pytest.skip("needs the native CPU kernels and torch's CPU flash kernel")
    n = 2 * attention.PREFILL_BLOCK + 7
    gen = torch.Generator().manual_seed(7)
    total = context + n
    q, k_all, v_all = (torch.randn(total if i else n, h, D, generator=gen) for i, h in enumerate((HQ, HKV, HKV)))
    slots = torch.arange(1, total + 1)
    k_cache, v_cache = torch.zeros(HKV, total + 1, D), torch.zeros(HKV, total + 1, D)
    store_kv(k_all, v_all, k_cache, v_cache, slots)
    seg = PrefillSegment(start=0, length=n, context_len=context, kv_slots=slots if context else None, mask=None)
    meta = AttentionMetadata(slot_mapping=slots[context:], prefills=[seg])
    ref = _naive(q, k_all, v_all, context, None)
    bf = [t.bfloat16() for t in (q, k_all[context:], v_all[context:], k_cache, v_cache)]
    out = make_paged_attention(ops)(*bf, meta, D**-0.5)
    assert torch.equal(out, flash_prefill(*bf, seg, D**-0.5))
    torch.testing.assert_close(out.double(), ref, atol=3e-2, rtol=3e-2)


def _decode_backends() -> list:
    """The reference decode path, and the native CPU kernel when it builds here."""
    from kernels.cpu import native_ops
    from kernels.cpu.attention import make_paged_attention

    backends = [pytest.param(attention.paged_attention, id="reference")]
    ops = native_ops()
    if ops is not None:
        backends.append(pytest.param(make_paged_attention(ops), id="native"))
    return backends


def _nan_cache(hkv: int, slots: int, dim: int, dtype: torch.dtype, int8: bool) -> torch.Tensor:
    """A pool whose every row reads as NaN: float NaNs, or int8 rows whose float32 scale is NaN."""
    if not int8:
        return torch.full((hkv, slots, dim), float("nan"), dtype=dtype)
    cache = torch.zeros((hkv, slots, dim + SCALE_BYTES), dtype=torch.int8)
    cache[..., dim:] = torch.tensor([float("nan")], dtype=torch.float32).view(torch.int8)
    return cache


def _decode_case(lens: list[int], bs: int, hq: int, hkv: int, dim: int, dtype: torch.dtype, seed: int,
                 window: int | None = None, int8_kv: bool = False):
    """Rows of different lengths in one group, scattered over random blocks; blocks no row owns hold NaN, so a
    wrong block id would show. With `int8_kv` the pool holds int8 rows and the reference attends over the values
    they dequantize to. Returns (q, k_cache, v_cache, DecodeGroup, float64 reference)."""
    from kernels import DecodeGroup

    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-n // bs) for n in lens) + 3
    k_cache = _nan_cache(hkv, (num_blocks + 1) * bs, dim, dtype, int8_kv)
    v_cache = _nan_cache(hkv, (num_blocks + 1) * bs, dim, dtype, int8_kv)
    k_cache[:, :bs] = 0  # null block
    v_cache[:, :bs] = 0
    ids = torch.randperm(num_blocks, generator=gen) + 1
    tables, refs, used = [], [], 0
    q = torch.randn(len(lens), hq, dim, generator=gen).to(dtype)
    for row, n in enumerate(lens):
        nblk = -(-n // bs)
        blocks = ids[used:used + nblk].tolist()
        used += nblk
        # zero the whole block first (what the runner does for fresh blocks), then write the real tokens
        for b in blocks:
            k_cache[:, b * bs:(b + 1) * bs] = 0
            v_cache[:, b * bs:(b + 1) * bs] = 0
        k = torch.randn(n, hkv, dim, generator=gen).to(dtype)
        v = torch.randn(n, hkv, dim, generator=gen).to(dtype)
        slots = torch.tensor([blocks[p // bs] * bs + p % bs for p in range(n)])
        store_kv(k, v, k_cache, v_cache, slots)
        if int8_kv:
            k, v = fake_quantize_kv(k.float()), fake_quantize_kv(v.float())
        tables.append(blocks)
        refs.append(_naive_heads(q[row:row + 1], k, v, n - 1, window, hq, hkv, dim)[0])
    nblk = max(len(t) for t in tables)
    table = torch.tensor([t + [0] * (nblk - len(t)) for t in tables])
    group = DecodeGroup(start=0, end=len(lens), block_table=table, block_size=bs, kv_lens=torch.tensor(lens),
                        window=window)
    return q, k_cache, v_cache, group, torch.stack(refs)


def _naive_heads(q, k, v, context, window, hq, hkv, dim):
    n, total = q.shape[0], k.shape[0]
    kk = k.double().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    vv = v.double().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    scores = q.double().transpose(0, 1) @ kk.transpose(1, 2) * dim**-0.5
    q_pos = torch.arange(context, context + n)[:, None]
    k_pos = torch.arange(total)[None, :]
    allowed = k_pos <= q_pos
    if window is not None:
        allowed &= k_pos > q_pos - window
    return (scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ vv).transpose(0, 1)


@pytest.mark.parametrize("backend", _decode_backends())
def test_decode_group_gathers_blocks_and_masks_padding(backend) -> None:
    q, k_cache, v_cache, group, ref = _decode_case([9, 3, 12], bs=4, hq=HQ, hkv=HKV, dim=D, dtype=torch.float32,
                                                   seed=7)
    meta = AttentionMetadata(slot_mapping=torch.empty(0, dtype=torch.long), decode_groups=[group])
    out = backend(q, q[:, :HKV], q[:, :HKV], k_cache, v_cache, meta, D**-0.5)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("backend", _decode_backends())
@pytest.mark.parametrize(
    ("dtype", "hq", "hkv", "dim", "window", "atol", "int8_kv"),
    [
        (torch.float32, 9, 3, 64, None, 2e-5, False),  # smollm2 heads: the AVX-512 path
        (torch.float32, 14, 2, 64, 40, 2e-5, False),  # qwen2.5 grouping, sliding window
        (torch.float32, 4, 4, 128, None, 2e-5, False),  # no grouping, wide heads
        (torch.float32, 4, 2, 24, None, 2e-5, False),  # head_dim not a multiple of 16: the portable loops
        (torch.bfloat16, 9, 3, 64, None, 3e-2, False),  # AVX512-BF16 key pass where the CPU has it
        (torch.bfloat16, 14, 2, 64, 40, 3e-2, False),  # ... with a window starting mid-block (partial key chunks)
        (torch.bfloat16, 4, 4, 128, None, 3e-2, False),
        (torch.bfloat16, 6, 3, 32, None, 3e-2, False),
        (torch.bfloat16, 4, 2, 96, None, 3e-2, False),  # three 32-dim chunks in the bf16 pair passes
        (torch.bfloat16, 4, 2, 80, 40, 3e-2, False),  # 80 = 5 x 16: the float32 value pass
        (torch.float32, 4, 2, 80, None, 2e-5, True),
        (torch.float16, 8, 2, 32, None, 5e-3, False),
        # int8 KV rows: the int8 key pass, a window starting mid-chunk, the portable loops, reduced precision q
        (torch.float32, 9, 3, 64, None, 2e-5, True),
        (torch.float32, 14, 2, 64, 40, 2e-5, True),
        (torch.float32, 4, 2, 24, None, 2e-5, True),
        (torch.float32, 4, 4, 128, None, 2e-5, True),
        (torch.bfloat16, 9, 3, 64, None, 3e-2, True),
        (torch.float16, 8, 2, 32, None, 5e-3, True),
    ],
)
def test_decode_matches_naive_across_shapes_and_dtypes(backend, dtype, hq, hkv, dim, window, atol, int8_kv) -> None:
    """Long rows (hundreds of keys over many 16-token blocks), short rows and a row ending mid-block."""
    lens = [1, 17, 300, 513, 64]
    q, k_cache, v_cache, group, ref = _decode_case(lens, bs=16, hq=hq, hkv=hkv, dim=dim, dtype=dtype, seed=11,
                                                   window=window, int8_kv=int8_kv)
    meta = AttentionMetadata(slot_mapping=torch.empty(0, dtype=torch.long), decode_groups=[group])
    kv = torch.zeros(len(lens), hkv, dim, dtype=dtype)
    out = backend(q, kv, kv, k_cache, v_cache, meta, dim**-0.5)
    assert out.dtype == dtype and out.shape == q.shape
    torch.testing.assert_close(out.double(), ref, atol=atol, rtol=1e-2 if dtype != torch.float32 else 1e-4)


def test_native_kernel_builds_here() -> None:
    """CI has a compiler: the native decode kernel must build, or the speed the README reports is not what runs."""
    from kernels import get_kernels
    from kernels.cpu import native_ops

    assert native_ops() is not None
    assert "cpu-native" in get_kernels("cpu").backend
    assert get_kernels("cpu", prefer="reference").backend == "torch-reference"


def test_native_decode_rejects_lengths_beyond_the_block_table() -> None:
    from kernels.cpu import native_ops

    ops = native_ops()
    if ops is None:
        pytest.skip("native CPU kernels did not build here")
    q = torch.zeros(1, HQ, D)
    cache = torch.zeros(HKV, 64, D)
    table = torch.tensor([[1, 2]])
    out = torch.empty_like(q)
    for bad in (9, 0):  # 2 blocks of 4 hold at most 8 keys; a row has at least its own token
        with pytest.raises(RuntimeError, match="kv_lens out of range"):
            ops.paged_decode_attention(q, cache, cache, table, torch.tensor([bad]), 4, 1.0, 0, out)


@pytest.mark.parametrize("int8_kv", [False, True], ids=["float-rows", "int8-rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_native_store_kv_matches_index_copy(dtype, int8_kv) -> None:
    """Float rows are copied; int8 rows are quantized exactly as the reference does (values and scale bytes)."""
    from kernels.cpu import native_ops
    from kernels.cpu.attention import make_store_kv

    ops = native_ops()
    if ops is None:
        pytest.skip("native CPU kernels did not build here")
    gen = torch.Generator().manual_seed(3)
    dim = 40  # two 16-lane chunks and a tail
    qkv = torch.randn(7, 5 * 2 * dim, generator=gen).to(dtype)  # v as a strided column slice, like the model's
    k = torch.randn(7, 2, dim, generator=gen).to(dtype)
    k[2, 1] = 0  # an all-zero row gets the minimum scale, not a division by zero
    v = qkv[:, 2 * dim : 4 * dim].view(7, 2, dim)
    slots = torch.tensor([3, 0, 9, 4, 15, 8, 1])
    row = dim + SCALE_BYTES if int8_kv else dim
    caches = [torch.zeros(2, 16, row, dtype=torch.int8 if int8_kv else dtype) for _ in range(4)]
    make_store_kv(ops)(k, v, caches[0], caches[1], slots)
    store_kv(k, v, caches[2], caches[3], slots)
    assert torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])
    if int8_kv:
        assert torch.equal(caches[0][:, slots], quantize_kv(k).transpose(0, 1))
    with pytest.raises(RuntimeError, match="outside the cache"):
        ops.store_kv_(k, v, caches[0], caches[1], torch.tensor([0, 1, 2, 3, 4, 5, 16]))
