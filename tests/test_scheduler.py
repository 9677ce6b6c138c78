"""Scheduler policy on a model-free simulation: preemption order, no starvation, admission watermark, O(1)
handling of requests waiting for an in-flight prefix, and budgets smaller than max_num_seqs."""

from __future__ import annotations

import random

from engine import LLM, SamplingParams
from engine.block_manager import BlockManager
from engine.outputs import RequestMetrics
from engine.scheduler import Scheduler
from engine.sequence import Sequence


def _seq(i: int, tokens: list[int]) -> Sequence:
    return Sequence(index=i, prompt_ids=tokens, params=SamplingParams(), metrics=RequestMetrics(0.0))


def _simulate(sched: Scheduler, max_out: int, on_step=None, limit: int = 10_000) -> list[Sequence]:
    """Run the scheduler as the engine does, with every sampled token 7; returns the sequences in finish order."""
    done = []
    for _ in range(limit):
        if not sched.has_unfinished():
            return done
        batch = sched.schedule()
        if on_step is not None:
            on_step(sched, batch)
        for seq, n in zip(batch.seqs, batch.num_tokens):
            seq.num_computed_tokens += n
        for seq in batch.seqs:
            if seq.num_computed_tokens == seq.num_tokens:
                seq.append([7])
                seq.num_computed_tokens = seq.num_tokens - 1
            sched.after_step(seq)
            if seq.num_output_tokens >= max_out:
                sched.finish(seq)
                done.append(seq)
        done.extend(sched.take_failed())
    raise AssertionError("the schedule did not finish")


def test_preemption_picks_the_newest_and_never_starves_the_oldest():
    for trial in range(30):
        rng = random.Random(trial)
        bm = BlockManager(num_blocks=rng.randrange(8, 16), block_size=2, enable_prefix_caching=bool(trial % 2))
        sched = Scheduler(bm, max_num_seqs=rng.randrange(2, 6), max_num_batched_tokens=16)
        seqs = [_seq(i, [1] + [rng.randrange(2, 50) for _ in range(rng.randrange(1, 6))]) for i in range(6)]
        for s in seqs:
            sched.add(s)
        preempt = sched._preempt

        def checked_preempt(seq, preempt=preempt, sched=sched):
            # The victim is the most recently first-admitted running sequence, and never the oldest one.
            assert seq.admit_order == max(s.admit_order for s in sched.running)
            assert len(sched.running) > 1 and seq is not sched.running[0]
            preempt(seq)

        sched._preempt = checked_preempt  # type: ignore[method-assign]
        done = _simulate(sched, max_out=10)
        assert sorted(s.index for s in done) == list(range(6))
        assert all(s.finish_reason is None for s in done)  # nobody failed: every request finished
        assert sched.num_preemptions > 0 or trial % 5  # most trials are tight enough to preempt


def test_readmitted_request_keeps_its_rank():
    bm = BlockManager(num_blocks=6, block_size=2)
    sched = Scheduler(bm, max_num_seqs=4, max_num_batched_tokens=16)
    old, new = _seq(0, [1, 2, 3]), _seq(1, [1, 4, 5])
    sched.add(old)
    sched.schedule()
    sched._preempt(old)  # e.g. pushed out while it was the newest
    sched.add(new)
    sched.waiting.rotate(-1)  # the newer request is admitted first this time
    sched.schedule()
    assert [s.index for s in sched.running] == [0, 1]  # re-admitted, it ranks before the newer one
    assert sched.running[-1] is new  # so the newer one is the next victim


def test_admission_leaves_the_watermark_free():
    bm = BlockManager(num_blocks=200, block_size=4)
    sched = Scheduler(bm, max_num_seqs=64, max_num_batched_tokens=4096)
    for i in range(60):
        sched.add(_seq(i, [1] + [i + 2] * 14))  # 4 blocks each: 240 blocks would be needed
    sched.schedule()
    assert bm.num_free >= sched.watermark_blocks > 0
    assert len(sched.running) == (200 - sched.watermark_blocks) // 4


def test_requests_waiting_for_an_inflight_prefix_are_parked_not_rescanned():
    bm = BlockManager(num_blocks=4000, block_size=4)
    sched = Scheduler(bm, max_num_seqs=512, max_num_batched_tokens=64)
    prefix = [1] + list(range(2, 101))  # 100 tokens: the first request prefills it over two steps
    for i in range(300):
        sched.add(_seq(i, prefix + [1000 + i, 2000 + i]))
    lookups: dict[int, int] = {}
    match = bm.match_prefix

    def counting_match(seq):
        lookups[seq.index] = lookups.get(seq.index, 0) + 1
        return match(seq)

    bm.match_prefix = counting_match  # type: ignore[method-assign]
    done = _simulate(sched, max_out=3)
    assert len(done) == 300 and not sched.bm.parked
    # Each waiting request is looked up once when it is parked under the in-flight block and once when that
    # block is published, however many steps the prefill takes; then it is admitted with the prefix hit.
    assert max(lookups.values()) <= 2
    assert sum(s.metrics.num_cached_tokens for s in done) == 299 * 100


def test_budget_smaller_than_max_num_seqs(checkpoints):
    """max_num_batched_tokens=16 with max_num_seqs=128 (the default): at most 16 sequences run at once, and
    every output is what the request gives alone."""
    rng = random.Random(2)
    prompts = [[0] + [rng.randrange(2, 384) for _ in range(rng.randrange(3, 20))] for _ in range(24)]
    params = SamplingParams(max_tokens=5, min_tokens=5, ignore_eos=True)
    llm = LLM(checkpoints["qwen2"], dtype="float32", block_size=8, max_num_batched_tokens=16)
    outs = llm.generate(prompts, params, progress=False)
    alone = [llm.generate([p], params, progress=False)[0].outputs[0].token_ids for p in prompts]
    assert [o.outputs[0].token_ids for o in outs] == alone
    assert llm.stats()["peak_running_seqs"] <= 16
