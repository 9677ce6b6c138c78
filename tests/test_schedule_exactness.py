"""Greedy tokens are the batch-1 HF reference under every schedule the engine can produce.

The property test draws token budgets (small enough to leave 1-token prefill chunks next to running decodes),
`max_num_seqs`, KV caches small enough to force preemption, prefix caching on and off, block sizes and prompt
lengths around block boundaries with shared prefixes, and compares every output with HF transformers in float32.
"""

from __future__ import annotations

import random
from functools import lru_cache

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis drives the schedule property test")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from engine import LLM, SamplingParams  # noqa: E402
from tests.helpers.hf_reference import hf_greedy  # noqa: E402

VOCAB = 384
# Bytes of one KV token in the tiny checkpoints (2 layers, 2 KV heads of 16 floats; K and V); mistral has 1 KV head.
_KV_TOKEN_BYTES = {"llama": 2 * 2 * 2 * 16 * 4, "mistral": 2 * 2 * 1 * 16 * 4, "qwen2": 2 * 2 * 2 * 16 * 4}


@lru_cache(maxsize=4096)
def _reference(path: str, prompt: tuple[int, ...], max_new: int, ignore_eos: bool) -> tuple[int, ...]:
    return tuple(hf_greedy(path, list(prompt), max_new, ignore_eos=ignore_eos))


def test_one_token_chunk_mid_prompt_does_not_sample(checkpoints):
    """The budget leaves exactly one token for a prompt still prefilling: that chunk must not sample."""
    path = checkpoints["llama"]
    rng = random.Random(3)
    a = [0] + [rng.randrange(2, VOCAB) for _ in range(14)]  # 15 tokens
    b = [0] + [rng.randrange(2, VOCAB) for _ in range(29)]  # 30 tokens
    params = SamplingParams(max_tokens=8, min_tokens=8, ignore_eos=True)
    ref = list(_reference(str(path), tuple(b), 8, True))
    llm = LLM(path, dtype="float32", max_num_batched_tokens=16, enable_prefix_caching=False)
    alone = llm.generate([b], params, progress=False)[0]
    both = llm.generate([a, b], params, progress=False)[1]
    assert alone.outputs[0].token_ids == ref
    assert both.outputs[0].token_ids == ref


@st.composite
def _schedules(draw):
    arch = draw(st.sampled_from(["llama", "mistral", "qwen2"]))
    block_size = draw(st.sampled_from([4, 8]))
    seed = draw(st.integers(0, 2**16))
    rng = random.Random(seed)
    shared = [0] + [rng.randrange(2, VOCAB) for _ in range(draw(st.sampled_from([0, 1, 2])) * block_size - 1)]
    shared = shared if len(shared) > 1 else [0]
    prompts = []
    for _ in range(draw(st.integers(1, 6))):
        # Lengths just below, at and above block boundaries, after an optional shared prefix.
        body = draw(st.integers(0, 4)) * block_size + draw(st.sampled_from([-1, 0, 1, 2])) + 1
        head = shared if draw(st.booleans()) else [0]
        prompts.append(head + [rng.randrange(2, VOCAB) for _ in range(max(body, 0))])
    max_new = draw(st.integers(1, 10))
    ignore_eos = draw(st.booleans())
    longest = max(len(p) for p in prompts) + max_new
    min_blocks = -(-longest // block_size) + 1
    blocks = draw(st.one_of(st.integers(min_blocks, min_blocks + 4), st.just(4 * min_blocks + 16)))
    return dict(
        arch=arch,
        block_size=block_size,
        prompts=prompts,
        max_new=max_new,
        ignore_eos=ignore_eos,
        budget=draw(st.integers(16, 40)),
        max_num_seqs=draw(st.integers(1, 6)),
        blocks=blocks,
        prefix_caching=draw(st.booleans()),
    )


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_schedules())
def test_every_schedule_matches_hf_batch1(checkpoints, case):
    path = checkpoints[case["arch"]]
    refs = [list(_reference(str(path), tuple(p), case["max_new"], case["ignore_eos"])) for p in case["prompts"]]
    llm = LLM(path, dtype="float32", block_size=case["block_size"], max_num_batched_tokens=case["budget"],
              max_num_seqs=case["max_num_seqs"], enable_prefix_caching=case["prefix_caching"],
              kv_cache_memory=case["blocks"] * case["block_size"] * _KV_TOKEN_BYTES[case["arch"]])
    kw = dict(min_tokens=case["max_new"], ignore_eos=True) if case["ignore_eos"] else {}
    outs = llm.generate(case["prompts"], SamplingParams(max_tokens=case["max_new"], **kw), progress=False)
    assert [o.error for o in outs] == [None] * len(outs)
    assert [o.outputs[0].token_ids for o in outs] == refs
