"""Context parallelism (engine/distributed): LSE merging, zigzag ring attention across real gloo ranks, the sharded
block manager, and greedy tokens of LLM(context_parallel_size=N) against the single-process engine."""

from __future__ import annotations

import random
import socket

import pytest
import torch
import torch.multiprocessing as mp

from engine import LLM, SamplingParams
from engine.distributed.block_manager import ShardedBlockManager
from engine.distributed.plan import build_layout
from engine.outputs import RequestMetrics
from engine.sequence import Sequence
from engine.step_layout import Chunk, StepLayout
from kernels.reference import attention_lse as lse_mod
from kernels.reference.attention_lse import attention_lse, merge_lse


def _full_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor,
                    scale: float) -> torch.Tensor:
    """Plain float64 attention, keys visible when k_pos <= q_pos. q: [n, Hq, D]; k, v: [Hkv, L, D]."""
    group = q.shape[1] // k.shape[0]
    kk = k.double().repeat_interleave(group, dim=0)  # [Hq, L, D]
    vv = v.double().repeat_interleave(group, dim=0)
    scores = torch.einsum("nhd,hld->hnl", q.double() * scale, kk)
    scores.masked_fill_(~(k_pos[None, None, :] <= q_pos[None, :, None]), float("-inf"))
    return torch.einsum("hnl,hld->nhd", scores.softmax(-1), vv)


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
def test_partial_attentions_merged_by_lse_equal_full_attention(shards, monkeypatch):
    monkeypatch.setattr(lse_mod, "Q_TILE", 7)  # several query and key tiles, odd sizes
    monkeypatch.setattr(lse_mod, "K_TILE", 11)
    g = torch.Generator().manual_seed(shards)
    n, length, hq, hkv, d = 37, 53, 4, 2, 16
    q = torch.randn(n, hq, d, generator=g)
    k = torch.randn(hkv, length, d, generator=g)
    v = torch.randn(hkv, length, d, generator=g)
    k_pos = torch.arange(length)
    q_pos = torch.arange(length - n, length)
    owner = torch.randint(0, shards, (length,), generator=g)  # keys spread over shards in no particular order
    parts = [attention_lse(q, k[:, owner == s], v[:, owner == s], q_pos, k_pos[owner == s], 0.25)
             for s in range(shards)]
    out, _ = merge_lse([p[0] for p in parts], [p[1] for p in parts])
    torch.testing.assert_close(out.double(), _full_attention(q, k, v, q_pos, k_pos, 0.25), atol=1e-5, rtol=0)


def test_a_query_that_sees_no_key_is_neutral_in_the_merge():
    q = torch.randn(3, 2, 8)
    k = torch.randn(1, 4, 8)
    out, lse = attention_lse(q, k, k, torch.tensor([0, 1, 2]), torch.tensor([5, 6, 7, 8]), 1.0)
    assert torch.all(out == 0) and torch.all(torch.isinf(lse))
    other = attention_lse(q, k, k, torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0, 0]), 1.0)
    merged, _ = merge_lse([out, other[0]], [lse, other[1]])
    assert torch.equal(merged, other[0])


# ---- the sharded block manager -----------------------------------------------------------------------------------
def _seq(n_tokens: int, index: int = 0) -> Sequence:
    return Sequence(index=index, prompt_ids=list(range(2, 2 + n_tokens)), params=SamplingParams(),
                    metrics=RequestMetrics(arrival_time=0.0))


@pytest.mark.parametrize("ranks", [2, 4])
def test_zigzag_placement_balances_a_prompt(ranks):
    bm = ShardedBlockManager(ranks, 64, block_size=4, enable_prefix_caching=False)
    seq = _seq(4 * 8 * ranks - 3)  # 8N blocks, the last one partial
    assert bm.grow(seq, seq.num_tokens)
    owners = [bm.rank_of(b) for b in seq.block_table]
    chunk = len(owners) // (2 * ranks)
    expected = [c if c < ranks else 2 * ranks - 1 - c for c in range(2 * ranks) for _ in range(chunk)]
    assert owners == expected
    assert bm.used_by_rank() == [8] * ranks
    # Decode blocks go round-robin; a full rank hands its turn on.
    for _ in range(2 * ranks):
        assert bm.grow(seq, (len(seq.block_table) + 1) * 4)
    assert bm.used_by_rank() == [10] * ranks
    bm.free_sequence(seq)
    assert bm.used_by_rank() == [0] * ranks and bm.num_free == 64 * ranks


def test_a_full_rank_hands_its_blocks_to_another():
    bm = ShardedBlockManager(2, 3, block_size=4, enable_prefix_caching=False)
    a, b = _seq(12), _seq(8, 1)
    assert bm.grow(a, 12)  # 3 blocks: fewer than 2N, round robin: ranks 0, 1, 0
    assert bm.grow(b, 8)
    assert sorted(bm.rank_of(x) for x in a.block_table + b.block_table) == [0, 0, 0, 1, 1]
    assert bm.num_free == 1 and not bm.grow(b, 16)
    assert bm.grow(b, 12)
    assert bm.used_by_rank() == [3, 3] and bm.num_free == 0
    assert all(bm.local_id(x) != 0 for x in a.block_table + b.block_table)  # never a null block


# ---- ring attention on real ranks --------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(world: int, target, args) -> None:
    """Run `target(*args(rank, port, errors))` in `world` spawned processes; fail with what any rank reported."""
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=target, args=args(r, port, errors)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, found
    assert all(p.exitcode == 0 for p in procs)


def _ring_rank(rank: int, world: int, port: int, length: int, cached: int, errors: "mp.Queue[str]") -> None:
    """One rank: build the same sharded pool layout as every other rank, store the K/V it owns, run the ring
    (a prompt chunk after `cached` context tokens) and the replicated decode path, and check its rows."""
    import torch.distributed as dist

    from engine.distributed.attention import replicated_attention, ring_attention
    from engine.distributed.comm import Comm

    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        comm = Comm(rank, world, torch.device("cpu"))
        g = torch.Generator().manual_seed(length)
        hq, hkv, d, bs, scale = 4, 2, 8, 4, 0.3
        q = torch.randn(length + 1, hq, d, generator=g)
        k = torch.randn(hkv, length + 1, d, generator=g)
        v = torch.randn(hkv, length + 1, d, generator=g)
        bm = ShardedBlockManager(world, 32, block_size=bs, enable_prefix_caching=False)
        seq = _seq(length + 1)
        assert bm.grow(seq, cached) and bm.grow(seq, length) and bm.grow(seq, length + 1)
        k_cache = torch.zeros(hkv, bm.stride * bs, d)
        v_cache = torch.zeros(hkv, bm.stride * bs, d)
        for p in range(length + 1):
            bid = seq.block_table[p // bs]
            if bm.rank_of(bid) == rank:
                k_cache[:, bm.local_id(bid) * bs + p % bs] = k[:, p]
                v_cache[:, bm.local_id(bid) * bs + p % bs] = v[:, p]
        ref = _full_attention(q, k, v, torch.arange(length + 1), torch.arange(length + 1), scale)
        chunk = Chunk(seq.block_table, cached, list(range(cached, length)), num_sampled=1)  # sharded rows
        decode = Chunk(seq.block_table, length, [0], num_sampled=1)  # replicated rows
        assert not chunk.decode_rows and decode.decode_rows
        lay = build_layout(StepLayout([decode, chunk]), rank, world, bm.stride, bs, torch.device("cpu"))
        qs = torch.cat([q[length : length + 1], q[lay.positions[1:]]])
        out = torch.full_like(qs, float("nan"))
        out[:1] = replicated_attention(qs[:1], k_cache, v_cache, lay, scale, comm).to(out.dtype)
        ring_attention(qs, k_cache, v_cache, lay, scale, comm, out)
        err = (out.double() - ref[lay.positions]).abs().max().item()
        if err > 1e-5:
            errors.put(f"rank {rank}: max error {err}")
        dist.destroy_process_group()
    except Exception as exc:  # reported to the test process
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("length,cached", [(61, 0), (45, 12), (9, 0)])
def test_ring_attention_on_gloo_ranks_equals_single_process_attention(world, length, cached):
    """Zigzag ring attention (prompt lengths not divisible by 2N, with and without cached context on the ranks)
    and the replicated decode row, within 1e-5 of one-process attention."""
    _run_ranks(world, _ring_rank, lambda r, port, errors: (r, world, port, length, cached, errors))


# ---- the engine --------------------------------------------------------------------------------------------------
def _cp_prompts(seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    prefix = [0] + [rng.randrange(2, 384) for _ in range(36)]  # 4.5 blocks of 8 shared by some prompts
    lengths = [3, 13, 37, 59, 85, 131]  # none divisible by 2N for N = 2 or 4
    own = [[0] + [rng.randrange(2, 384) for _ in range(n - 1)] for n in lengths]
    shared = [prefix + [rng.randrange(2, 384) for _ in range(n)] for n in (1, 22, 51)]
    return own + shared


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_greedy_tokens_equal_single_process(checkpoints, arch, ranks):
    prompts = _cp_prompts(ranks)
    params = SamplingParams(max_tokens=20, min_tokens=20, ignore_eos=True)
    kwargs = dict(dtype="float32", block_size=8, max_num_batched_tokens=64, enable_prefix_caching=True)
    single = LLM(checkpoints[arch], **kwargs)
    expected = [o.outputs[0].token_ids for o in single.generate(prompts, params, progress=False)]
    with LLM(checkpoints[arch], context_parallel_size=ranks, **kwargs) as llm:
        first = [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]
        again = [o.outputs[0].token_ids for o in llm.generate(prompts[::-1], params, progress=False)][::-1]  # cached prefixes
        stats = llm.stats()
    assert first == expected
    assert again == expected
    assert stats["prefix_cache_hits"] > 0
    assert all(used > 0 for used in stats["kv_blocks_peak_used_by_rank"])
    assert llm.config_summary()["context_parallel_size"] == ranks


def test_context_parallel_ranks_exit_on_close(checkpoints):
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, context_parallel_size=2)
    procs = list(llm._ranks.procs)
    assert procs and all(p.poll() is None for p in procs)
    llm.close()
    assert all(p.poll() is not None for p in procs)
    llm.close()  # idempotent


def test_unsupported_combinations_fail_clearly(checkpoints):
    with pytest.raises(ValueError, match="speculative decoding is not supported"):
        LLM(checkpoints["llama"], dtype="float32", context_parallel_size=2,
            speculative_config={"method": "ngram", "num_speculative_tokens": 2})


def _attached_rank(rank: int, port: int, path: str, prompts: list[list[int]], expected: list[list[int]],
                   errors: "mp.Queue[str]") -> None:
    """Ranks started by someone else (as torchrun would): rank 0 builds the LLM, rank 1 serves."""
    import torch.distributed as dist

    from engine.distributed import serve_rank

    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        if rank == 0:
            with LLM(path, dtype="float32", block_size=8, max_num_batched_tokens=64, context_parallel_size=2) as llm:
                got = [o.outputs[0].token_ids for o in llm.generate(prompts, SamplingParams(max_tokens=8), progress=False)]
            if got != expected:
                errors.put(f"tokens differ: {got} != {expected}")
        else:
            serve_rank()
        dist.destroy_process_group()
    except Exception as exc:
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")


def test_llm_attaches_to_ranks_started_elsewhere(checkpoints):
    prompts = _cp_prompts(5)[:4]
    single = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_num_batched_tokens=64)
    expected = [o.outputs[0].token_ids for o in single.generate(prompts, SamplingParams(max_tokens=8), progress=False)]
    _run_ranks(2, _attached_rank, lambda r, port, errors: (r, port, str(checkpoints["llama"]), prompts, expected,
                                                            errors))


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "int8"])
def test_greedy_tokens_equal_single_process_under_preemption(checkpoints, kv_cache_dtype):
    """A cache too small for the batch on every rank: sequences are preempted and recomputed, blocks move between
    ranks' free lists, and the tokens still equal the single-process engine's (with the same total cache)."""
    prompts = _cp_prompts(11)
    params = SamplingParams(max_tokens=24, min_tokens=24, ignore_eos=True)
    row = 2 * 2 * 2 * (16 + 4 if kv_cache_dtype == "int8" else 16 * 4)  # K+V x 2 layers x 2 KV heads x row bytes
    kwargs = dict(dtype="float32", block_size=8, max_num_batched_tokens=64, kv_cache_dtype=kv_cache_dtype)
    single = LLM(checkpoints["qwen2"], kv_cache_memory=40 * 8 * row, **kwargs)
    expected = [o.outputs[0].token_ids for o in single.generate(prompts, params, progress=False)]
    with LLM(checkpoints["qwen2"], context_parallel_size=2, kv_cache_memory=20 * 8 * row, **kwargs) as llm:
        got = [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]
        stats = llm.stats()
    assert stats["num_preemptions"] > 0
    assert stats["kv_blocks_total"] == 40
    assert got == expected
