"""The multi-token step: a sequence computes its last verified token plus k draft tokens and samples k + 1
positions; accepted drafts stay, rejected ones are rolled back with their KV, and nothing unverified reaches the
prefix cache. Drafts here come from an oracle (the HF reference continuation, optionally corrupted), so the test
checks the seam speculative decoding will use, independent of any proposer."""

from __future__ import annotations

import random

import pytest

from engine import LLM, SamplingParams
from engine.block_manager import BlockManager
from engine.outputs import RequestMetrics
from engine.sequence import Sequence
from tests.helpers.hf_reference import hf_greedy

MAX_NEW = 20


def _prompts(seed: int = 11) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [0] + [rng.randrange(2, 384) for _ in range(15)]
    return [shared + [rng.randrange(2, 384) for _ in range(n)] for n in (1, 7, 8, 9, 20)] + [[0, 5, 9]]


def _with_oracle_drafts(llm: LLM, refs: list[list[int]], k: int, corrupt_every: int) -> None:
    """Before each schedule, every decoding sequence gets the next k reference tokens as drafts; every
    `corrupt_every`-th draft token is replaced by a wrong one (0: none)."""
    sched = llm.scheduler
    schedule = sched.schedule
    counter = [0]

    def schedule_with_drafts():
        for seq in sched.running:
            if seq.num_computed_tokens == seq.num_tokens - 1 and seq.num_output_tokens > 0:
                drafts = list(refs[seq.index][seq.num_output_tokens : seq.num_output_tokens + k])
                for j in range(len(drafts)):
                    counter[0] += 1
                    if corrupt_every and counter[0] % corrupt_every == 0:
                        drafts[j] = (drafts[j] + 1) % 384
                seq.draft_ids = drafts
        return schedule()

    sched.schedule = schedule_with_drafts  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def refs(checkpoints):
    return {arch: [hf_greedy(checkpoints[arch], p, MAX_NEW, ignore_eos=True) for p in _prompts()]
            for arch in ("llama", "qwen2")}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("k,corrupt_every", [(3, 0), (3, 4), (7, 3), (12, 5)])  # 12 + 1 rows: a prefill segment
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_verify_steps_keep_hf_tokens(checkpoints, refs, arch, k, corrupt_every, prefix_caching):
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    plain = LLM(checkpoints[arch], dtype="float32", block_size=8, enable_prefix_caching=prefix_caching)
    plain.generate(_prompts(), params, progress=False)
    llm = LLM(checkpoints[arch], dtype="float32", block_size=8, enable_prefix_caching=prefix_caching)
    _with_oracle_drafts(llm, refs[arch], k, corrupt_every)
    outs = llm.generate(_prompts(), params, progress=False)
    assert [o.outputs[0].token_ids for o in outs] == refs[arch][: len(outs)]
    assert llm.stats()["steps"] < plain.stats()["steps"]  # accepted drafts saved forward passes
    assert llm.block_manager.num_used == 0
    if prefix_caching:  # a second pass over the cache only ever finds verified blocks: same tokens again
        again = llm.generate(_prompts(), params, progress=False)
        assert [o.outputs[0].token_ids for o in again] == refs[arch][: len(outs)]
        assert llm.stats()["prefix_cache_hits"] > 0


def test_verify_steps_under_preemption_and_small_budget(checkpoints, refs):
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_num_batched_tokens=16,
              kv_cache_memory=12 * 8 * 2 * 2 * 2 * 16 * 4)
    plain = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_num_batched_tokens=16,
                kv_cache_memory=12 * 8 * 2 * 2 * 2 * 16 * 4)
    plain.generate(_prompts(), params, progress=False)
    _with_oracle_drafts(llm, refs["llama"], 5, 3)
    outs = llm.generate(_prompts(), params, progress=False)
    assert [o.error for o in outs] == [None] * len(outs)
    assert [o.outputs[0].token_ids for o in outs] == refs["llama"]
    assert llm.stats()["num_preemptions"] > 0
    assert llm.stats()["steps"] < plain.stats()["steps"]


# ---- block-level pieces of the seam ----------------------------------------------------------------------------
def _seq(tokens: list[int]) -> Sequence:
    return Sequence(index=0, prompt_ids=tokens[:3], params=SamplingParams(), metrics=RequestMetrics(0.0),
                    token_ids=list(tokens))


def test_truncate_returns_blocks_and_never_publishes_drafts():
    bm = BlockManager(num_blocks=8, block_size=4)
    seq = _seq([1, 2, 3, 4, 5, 6])
    seq.draft_ids = [7, 8, 9, 10, 11]
    assert bm.grow(seq, 11) and len(seq.block_table) == 3
    seq.num_computed_tokens = 11  # the verify step wrote KV for every draft
    seq.draft_ids = []
    seq.append([7])  # only the first draft was right; the sampled bonus token is 7 too
    seq.num_computed_tokens = seq.num_tokens - 1
    bm.truncate(seq, seq.num_tokens)
    assert len(seq.block_table) == 2 and bm.num_free == 6
    bm.register_full_blocks(seq)
    assert len(bm.cached) == 1  # [1, 2, 3, 4] only: block 2 holds unverified slots


def test_rollback_into_a_cached_block_recomputes_rather_than_overwrites():
    bm = BlockManager(num_blocks=8, block_size=4)
    seq = _seq([1, 2, 3, 4, 5, 6, 7, 8, 9])
    bm.grow(seq, 9)
    seq.num_computed_tokens = 8
    bm.register_full_blocks(seq)
    shared = seq.block_table[1]
    seq.rollback(3)  # back to 6 tokens: inside the second, published block
    bm.truncate(seq, seq.num_tokens)
    assert shared not in seq.block_table and seq.num_computed_tokens == 4
    assert len(seq.prefix.hashes) == 1 and bm.blocks[shared].hash in bm.cached  # the cached copy is untouched


def test_duplicate_full_block_is_dropped_for_the_cached_one():
    bm = BlockManager(num_blocks=8, block_size=4)
    a, b = _seq([1, 2, 3, 4, 5, 6, 7, 8, 9]), _seq([1, 2, 3, 4, 5, 6, 7, 8, 10])
    for s in (a, b):  # both prefilled the same prefix at once (no hit for either)
        bm.grow(s, 9)
    for s in (a, b):
        s.num_computed_tokens = 8
        bm.register_full_blocks(s)
    assert b.block_table[:2] == a.block_table[:2] and bm.stats.duplicates_dropped == 2
    assert bm.num_used == 4  # b's two copies went back to the pool
    bm.free_sequence(a)
    c = _seq([1, 2, 3, 4, 5, 6, 7, 8, 11])
    assert bm.match_prefix(c) == 8  # the chain stays reachable through the blocks b now holds
