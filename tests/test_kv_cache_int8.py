"""The int8 KV cache through the engine: capacity, consistency across scheduling, closeness to the float cache;
and `LLM.reset_prefix_cache`."""

from __future__ import annotations

import random
from pathlib import Path

import pydantic
import pytest
import torch

from engine import LLM, SamplingParams
from engine.models.config import load_model_config

MAX_NEW = 16


def _prompts(n: int = 10, seed: int = 5) -> list[list[int]]:
    rng = random.Random(seed)
    prefix = [0] + [rng.randrange(2, 384) for _ in range(23)]  # 3 full blocks of 8 shared by every prompt
    return [prefix + [rng.randrange(2, 384) for _ in range(rng.randrange(2, 70))] for _ in range(n)]


def _int8_bytes_per_token(model_dir: Path) -> int:
    cfg = load_model_config(model_dir)
    return 2 * cfg.num_layers * cfg.num_kv_heads * (cfg.head_dim + 4)


def _greedy(llm: LLM, prompts: list[list[int]]) -> list[list[int]]:
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]


def test_int8_rows_hold_more_tokens_in_the_same_memory(checkpoints: dict[str, Path]) -> None:
    budget = 1 << 20
    f32 = LLM(checkpoints["llama"], dtype="float32", block_size=8, kv_cache_memory=budget)
    i8 = LLM(checkpoints["llama"], dtype="float32", block_size=8, kv_cache_memory=budget, kv_cache_dtype="int8")
    cfg = f32.model_config
    k_cache, _ = i8.kv_caches[0]
    assert k_cache.dtype == torch.int8 and k_cache.shape[-1] == cfg.head_dim + 4
    per_token_f32 = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 4
    assert f32.stats()["kv_blocks_total"] == budget // (8 * per_token_f32)
    assert i8.stats()["kv_blocks_total"] == budget // (8 * _int8_bytes_per_token(checkpoints["llama"]))
    assert i8.stats()["kv_blocks_total"] > 2.5 * f32.stats()["kv_blocks_total"]  # 16 dims: 128 -> 20 bytes a row
    assert i8.config_summary()["kv_cache_dtype"] == "int8"
    assert i8.config_summary()["kv_cache_bytes"] <= budget


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_int8_kv_tokens_do_not_depend_on_scheduling(checkpoints: dict[str, Path], arch: str) -> None:
    """Prefix caching on or off, a cache small enough to preempt (recompute), alone or in a batch, the torch or
    the native kernels: every key is attended as the cache gives it back, so the tokens are the same. (Chunked prefill is left out: its different
    float32 GEMM shapes can flip a near-tied token of these random models with the float cache too; the attention
    tests show a chunk's keys and cached keys are treated alike.)"""
    prompts = _prompts()
    runs = [
        dict(enable_prefix_caching=True),
        dict(enable_prefix_caching=False),
        dict(enable_prefix_caching=True, kernels="reference"),  # the torch path: gather + dequantize
        # 16 blocks of 8: the longest request (~110 tokens) fits alone, the batch does not -> preemption
        dict(enable_prefix_caching=False, kv_cache_memory=16 * 8 * _int8_bytes_per_token(checkpoints[arch])),
    ]
    outs = []
    for kw in runs:
        llm = LLM(checkpoints[arch], dtype="float32", block_size=8, kv_cache_dtype="int8", **kw)
        outs.append(_greedy(llm, prompts))
        if "kv_cache_memory" in kw:
            assert llm.stats()["num_preemptions"] > 0
    assert all(o == outs[0] for o in outs[1:])
    alone = LLM(checkpoints[arch], dtype="float32", block_size=8, kv_cache_dtype="int8")
    assert _greedy(alone, prompts[4:5]) == outs[0][4:5]  # batch composition does not matter either


def test_int8_kv_mostly_agrees_with_the_float_cache(checkpoints: dict[str, Path]) -> None:
    prompts = _prompts(24, seed=9)
    ref = _greedy(LLM(checkpoints["mistral"], dtype="float32", block_size=8), prompts)
    got = _greedy(LLM(checkpoints["mistral"], dtype="float32", block_size=8, kv_cache_dtype="int8"), prompts)
    first = sum(a[0] == b[0] for a, b in zip(ref, got)) / len(ref)
    assert first >= 0.85, f"int8 KV first greedy token agrees with the float cache on only {first:.0%} of prompts"


def test_bad_kv_cache_dtype_is_a_clear_error(checkpoints: dict[str, Path]) -> None:
    with pytest.raises(pydantic.ValidationError, match="kv_cache_dtype"):
        LLM(checkpoints["llama"], dtype="float32", kv_cache_dtype="fp4")


def test_reset_prefix_cache(checkpoints: dict[str, Path]) -> None:
    prompts = _prompts(4)
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8)
    first = llm.generate(prompts, SamplingParams(max_tokens=4), progress=False)
    again = llm.generate(prompts, SamplingParams(max_tokens=4), progress=False)
    assert all(o.metrics.num_cached_tokens > 0 for o in again)  # the whole prompts were still cached
    assert llm.reset_prefix_cache()
    fresh = llm.generate(prompts, SamplingParams(max_tokens=4), progress=False)
    assert fresh[0].metrics.num_cached_tokens == 0  # the first request finds nothing; later ones share its prefix
    assert [o.outputs[0].token_ids for o in fresh] == [o.outputs[0].token_ids for o in first]
    params = [SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True) for n in (1, 30, 30, 30)]
    stream = llm.generate_stream(prompts, params, progress=False)
    assert next(stream).index == 0  # the other requests still hold blocks: nothing may be dropped under them
    assert not llm.reset_prefix_cache()
    stream.close()
    assert llm.reset_prefix_cache()
