"""Greedy token parity with Hugging Face transformers in float32: the engine's correctness backbone."""

from __future__ import annotations

import random

import pytest

from engine import LLM, SamplingParams
from tests.helpers.hf_reference import hf_greedy

LENGTHS = [3, 8, 15, 16, 17, 33, 47, 64, 90]  # around and across block boundaries (block_size 8)
MAX_NEW = 24


def _prompts(vocab: int = 384, seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    return [[0] + [rng.randrange(2, vocab) for _ in range(n - 1)] for n in LENGTHS]


@pytest.fixture(scope="module")
def references(checkpoints):
    prompts = _prompts()
    return prompts, {arch: [hf_greedy(path, p, MAX_NEW) for p in prompts] for arch, path in checkpoints.items()}


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_greedy_matches_hf(checkpoints, references, arch, prefix_caching):
    prompts, refs = references
    llm = LLM(checkpoints[arch], dtype="float32", block_size=8, max_num_batched_tokens=64,
              enable_prefix_caching=prefix_caching)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_NEW), progress=False)
    assert [o.outputs[0].token_ids for o in outs] == refs[arch]
    assert all(o.outputs[0].finish_reason in ("stop", "length") for o in outs)
    # Prompts were chunked (budget 64 < longest prompt) and outputs crossed block boundaries.
    assert max(len(p) for p in prompts) > 64


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_greedy_matches_hf_under_preemption(checkpoints, references, arch):
    prompts, refs = references
    # Room for 16 blocks of 8 tokens (the longest request needs 15): far less than the batch needs, so sequences get preempted and recomputed.
    llm = LLM(checkpoints[arch], dtype="float32", block_size=8, kv_cache_memory=16 * 8 * 2 * 2 * 2 * 16 * 4)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_NEW), progress=False)
    assert llm.stats()["num_preemptions"] > 0
    assert all(o.outputs[0].finish_reason != "error" for o in outs), [o.error for o in outs]
    assert [o.outputs[0].token_ids for o in outs] == refs[arch]


def test_shared_prefix_parity_with_eviction(checkpoints):
    """Prompts sharing a prefix (some an exact multiple of the block size) under a tiny cache that evicts."""
    path = checkpoints["llama"]
    rng = random.Random(7)
    prefix = [0] + [rng.randrange(2, 384) for _ in range(31)]  # 32 tokens = 4 full blocks
    prompts = [prefix + [rng.randrange(2, 384) for _ in range(n)] for n in (0, 8, 5, 16, 1, 24, 0, 13)]
    refs = [hf_greedy(path, p, 16, ignore_eos=True) for p in prompts]
    params = SamplingParams(max_tokens=16, min_tokens=16, ignore_eos=True)
    for caching in (True, False):
        llm = LLM(path, dtype="float32", block_size=8, kv_cache_memory=20 * 8 * 2 * 2 * 2 * 16 * 4,
                  enable_prefix_caching=caching)
        outs = llm.generate(prompts, params, progress=False)
        assert [o.outputs[0].token_ids for o in outs] == refs, f"prefix caching={caching}"
        stats = llm.stats()
        if caching:
            assert stats["prefix_cache_hits"] > 0
            assert stats["prefix_cache_evictions"] > 0  # the tiny cache really evicted cached blocks
            assert sum(o.metrics.num_cached_tokens for o in outs) > 0
        else:
            assert stats["prefix_cache_hits"] == 0
